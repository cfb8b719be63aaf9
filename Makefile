# myproxy-operator: a Helm-based operator that runs nginx reverse proxies from MyProxy resources.
# `make help` lists the targets. Tools are built from their Go modules (hack/tools) into bin/.

# The released image, as config/manager/kustomization.yaml names it; IMG overrides it on deploy.
IMAGE_REPO := example.com/myproxy-operator
VERSION ?= 0.1.0
IMG ?= $(IMAGE_REPO):v$(VERSION)

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

ROOT := $(CURDIR)
BIN := $(ROOT)/bin
CLUSTER_BIN ?= $(BIN)/cluster
CLUSTER_DIR ?= $(BIN)/local-cluster
export CLUSTER_BIN CLUSTER_DIR

HELM ?= $(BIN)/helm
KUSTOMIZE ?= $(BIN)/kustomize
KUBECTL ?= kubectl
OPERATOR := $(BIN)/myproxy-operator

# Go test flags; e.g. make test GOTEST_FLAGS='-run TestE2E -v'.
GOTEST_FLAGS ?=

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
	  /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate the MyProxy CRD from helm-charts/myproxy/values.schema.json.
	go run ./hack/crdgen

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: vet $(HELM) ## Run go vet and helm lint.
	$(HELM) lint --strict helm-charts/myproxy

.PHONY: test
test: tools cluster-build ## Run every test: unit, chart, envtest integration, control plane and end to end.
	KUBEBUILDER_ASSETS=$(CLUSTER_BIN) HELM=$(HELM) KUSTOMIZE=$(KUSTOMIZE) \
	  go test -count=1 -p 1 -timeout 25m $(GOTEST_FLAGS) ./...

.PHONY: test-unit
test-unit: ## Run the unit tests only (no control plane).
	go test -count=1 -short $(GOTEST_FLAGS) ./internal/... ./cmd/...

##@ Build

.PHONY: build
build: ## Build the operator binary into bin/.
	go build -o $(OPERATOR) ./cmd

.PHONY: run
run: build ## Run the operator against the cluster of $KUBECONFIG (or the local one).
	$(call use-cluster) $(OPERATOR) --watches-file=watches.yaml --metrics-bind-address=0 --health-probe-bind-address=0

.PHONY: docker-build
docker-build: ## Build the operator image (needs a container engine).
	docker build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image.
	docker push $(IMG)

##@ Deployment

.PHONY: install
install: $(KUSTOMIZE) ## Install the CRD into the cluster of $KUBECONFIG.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: $(KUSTOMIZE) ## Remove the CRD (and with it every MyProxy) from the cluster.
	$(KUSTOMIZE) build config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: $(KUSTOMIZE) ## Deploy the operator into myproxy-operator-system (IMG=... sets the image).
	$(call render-default) | $(KUBECTL) apply --server-side --force-conflicts -f -

.PHONY: undeploy
undeploy: $(KUSTOMIZE) ## Uninstall every MyProxy's release, then remove everything deploy created.
	@# MyProxies go first, while the operator still runs to uninstall their releases: deleting the
	@# CRD under them would leave them stuck on their finalizer, or their releases orphaned.
	@if $(KUBECTL) get crd myproxies.gateway.example.com >/dev/null 2>&1; then \
	  $(KUBECTL) delete myproxies.gateway.example.com --all --all-namespaces --timeout=180s || { \
	    echo "undeploy: MyProxies are still being uninstalled; is the operator running? Nothing else was removed." >&2; exit 1; }; \
	fi
	$(call render-default) | $(KUBECTL) delete --ignore-not-found -f -

##@ Local cluster

.PHONY: cluster-build
cluster-build: ## Build the control-plane binaries into bin/cluster (only what is missing or changed).
	hack/cluster/build.sh

.PHONY: cluster-up
cluster-up: ## Start the local control plane (reuses a running one); CLUSTER_AUDIT=1 records an audit log.
	hack/cluster/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local control plane.
	hack/cluster/cluster.sh down

.PHONY: cluster-env
cluster-env: ## Print the export line that points kubectl at the local cluster.
	@hack/cluster/cluster.sh env

.PHONY: demo
demo: tools build ## Start the local cluster (unless KUBECONFIG is set), run the operator and the samples.
	HELM=$(HELM) KUSTOMIZE=$(KUSTOMIZE) OPERATOR=$(OPERATOR) hack/demo.sh

##@ Tools

.PHONY: tools
tools: $(HELM) $(KUSTOMIZE) ## Build helm and kustomize from hack/tools/go.mod into bin/.

$(HELM) $(KUSTOMIZE): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o $(BIN)/ helm.sh/helm/v3/cmd/helm sigs.k8s.io/kustomize/kustomize/v5
	@touch $(HELM) $(KUSTOMIZE)

# render-default: config/default with the manager image set to $(IMG), through a throwaway
# overlay so that no tracked file changes.
define render-default
mkdir -p $(BIN) && overlay=$$(mktemp -d $(BIN)/overlay.XXXXXX) && trap 'rm -rf "$$overlay"' EXIT && \
  printf 'resources:\n- ../../config/default\n' > "$$overlay/kustomization.yaml" && \
  (cd "$$overlay" && $(KUSTOMIZE) edit set image $(IMAGE_REPO)=$(IMG)) && \
  $(KUSTOMIZE) build "$$overlay"
endef

# use-cluster: KUBECONFIG if set, else the local cluster's kubeconfig.
define use-cluster
KUBECONFIG=$${KUBECONFIG:-$(CLUSTER_DIR)/kubeconfig}
endef

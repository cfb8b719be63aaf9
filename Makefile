# myproxy-operator: a Helm-based operator that runs nginx reverse proxies from MyProxy resources.
# `make help` lists the targets. Tools are built from their Go modules (hack/tools) into bin/.

# The released image, as config/manager/kustomization.yaml names it; IMG overrides it on deploy.
IMAGE_REPO := example.com/myproxy-operator
VERSION ?= 0.1.0
IMG ?= $(IMAGE_REPO):v$(VERSION)

SHELL := /usr/bin/env bash -o pipefail

# Every go command of every target runs on the pinned toolchain (hack/toolchain.env).
include hack/toolchain.env
export GOTOOLCHAIN
.SHELLFLAGS := -ec

ROOT := $(CURDIR)
BIN := $(ROOT)/bin
CLUSTER_BIN ?= $(BIN)/cluster
CLUSTER_DIR ?= $(BIN)/local-cluster
# The project's OCI tool (hack/oci): builds images from the Dockerfiles without a container
# engine, pushes and reads them, and serves the local cluster's registry (CLUSTER_REGISTRY=1).
OCI ?= $(BIN)/oci
# Where make image, bundle-build and catalog-build write their images (OCI layouts).
IMAGES ?= $(BIN)/images
# OLM (v0): its olm and catalog operators and install manifests, for make test-publish.
OLM_BIN ?= $(BIN)/olm
export CLUSTER_BIN CLUSTER_DIR OCI

HELM ?= $(BIN)/helm
# The Helm 4 CLI, at the helm.sh/helm/v4 version the operator links: the tests compare what the
# operator installs with its `helm template -f`. bin/helm (Helm 3) stays: tests make releases with
# it that the operator takes over.
HELM4 ?= $(BIN)/helm4
KUSTOMIZE ?= $(BIN)/kustomize
OPERATOR_SDK ?= $(BIN)/operator-sdk
OPM ?= $(BIN)/opm
HELM_OPERATOR ?= $(BIN)/helm-operator
HELM_OPERATOR_PLUGINS ?= $(BIN)/helm-operator-plugins
# Flux's helm-controller and the CRDs it needs, for the benchmark.
HELM_CONTROLLER ?= $(BIN)/helm-controller
HELM_CONTROLLER_CRDS ?= $(BIN)/helm-controller-crds.yaml
GOLANGCI_LINT ?= $(BIN)/golangci-lint
PROMTOOL ?= $(BIN)/promtool
GOVULNCHECK ?= $(BIN)/govulncheck
# The vulnerability database, built offline from the pinned golang.org/x/vulndb module.
VULNDB ?= $(BIN)/vulndb
# progress NAME ESTIMATE: says when a build starts and finishes, and that it is alive meanwhile.
PROGRESS := $(CURDIR)/hack/progress.sh

# Where make bench and make chaos write their results.
BENCH_REPORT ?= docs/benchmark-results.md
# Where make bench keeps its clusters and raw results (a separate one keeps a run at another N apart).
BENCH_DIR ?= $(BIN)/bench
CHAOS_REPORT ?= docs/chaos-results.md

# OLM bundle and catalog.
BUNDLE_IMG ?= $(IMAGE_REPO)-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_REPO)-catalog:v$(VERSION)
CHANNELS ?= alpha
DEFAULT_CHANNEL ?= alpha
BUNDLE_METADATA_OPTS ?= --channels=$(CHANNELS) --default-channel=$(DEFAULT_CHANNEL)
# Where render-bundle writes bundle/ and bundle.Dockerfile and bundle-build reads them, and where
# make catalog writes catalog/ and catalog-build reads it: the repository, unless a release is
# staged elsewhere.
BUNDLE_CONTEXT ?= .
CATALOG_CONTEXT ?= .
# The bundles make catalog puts in its channel, oldest first, each upgrading the one before:
# DIR=IMAGE, a bundle directory and the image it was pushed as (DIR= carries the bundle's objects
# inline, with no image to pull).
CATALOG_BUNDLES ?= $(BUNDLE_CONTEXT)/bundle=$(BUNDLE_IMG)
KUBECTL ?= kubectl
OPERATOR := $(BIN)/myproxy-operator

# Named shards of a sharded fleet for deploy, undeploy and render-default, e.g. SHARDS=a,b:
# one more manager Deployment per shard beside the default shard's (docs/deploying.md).
SHARDS ?=

# Go test flags; e.g. make test GOTEST_FLAGS='-run TestE2E -v'.
GOTEST_FLAGS ?=

.DEFAULT_GOAL := help

##@ General

.PHONY: print-%
print-%: ## Print a variable, e.g. make -s print-VERSION.
	@echo $($*)

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
	  /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate from watches.yaml and the charts: each kind's CRD and user roles, the manager ClusterRole, PROJECT's resources.
	go run ./hack/manifests

.PHONY: fuzz-chart
fuzz-chart: ## Render CHART (a chart directory) with every hostile value its schema admits, and report what broke.
	@test -n "$(CHART)" || { echo "usage: make fuzz-chart CHART=helm-charts/<chart>" >&2; exit 2; }
	go run ./hack/chartfuzz --chart $(CHART)

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) $(HELM) ## Run golangci-lint (.golangci.yml) and helm lint.
	$(GOLANGCI_LINT) run ./...
	cd hack/oci && $(GOLANGCI_LINT) run --config $(ROOT)/.golangci.yml ./...
	$(HELM) lint --strict helm-charts/myproxy
	$(HELM) lint --strict examples/staticsite
	$(HELM) lint --strict examples/greeter

# The unit tests run in parallel (they start no server), which also compiles every package's
# dependencies on all cores; the tests under test/ start control planes, one package at a time;
# test/publish runs last, through make test-publish.
.PHONY: test
test: lint vulncheck tools olm-tools cluster-build ## Run lint, the vulnerability check and every test: unit, chart, monitoring, envtest integration, control plane, end to end and publishing.
	GOVULNCHECK=$(GOVULNCHECK) VULNDB=$(VULNDB) go test -count=1 -timeout 10m $(GOTEST_FLAGS) ./cmd/... ./internal/... ./bench/... ./hack/...
	cd hack/oci && go test -count=1 $(GOTEST_FLAGS) ./...
	KUBEBUILDER_ASSETS=$(CLUSTER_BIN) HELM=$(HELM) HELM4=$(HELM4) KUSTOMIZE=$(KUSTOMIZE) OPERATOR_SDK=$(OPERATOR_SDK) OPM=$(OPM) PROMTOOL=$(PROMTOOL) \
	  go test -count=1 -p 1 -timeout 25m $(GOTEST_FLAGS) $$(go list ./test/... | grep -v /test/publish)
	$(MAKE) --no-print-directory test-publish

# The packages this project ships: the operator binary and the manifests generator chart authors run.
VULNCHECK_PACKAGES := ./cmd/... ./hack/manifests/...

.PHONY: vulncheck
vulncheck: $(GOVULNCHECK) $(VULNDB) ## Fail on any known vulnerability the shipped code reaches, unless hack/deps/accepted.yaml accepts it until a date.
	go run ./hack/deps check --govulncheck $(GOVULNCHECK) --db $(VULNDB) --accepted hack/deps/accepted.yaml $(VULNCHECK_PACKAGES)

.PHONY: test-plugins
test-plugins: cluster-build ## Run helm-operator-plugins' own tests with the modules at the versions this operator links, against the local control plane.
	hack/deps/plugins-test.sh $(CLUSTER_BIN)

.PHONY: update-deps
update-deps: ## Raise every pinned module, tool and the control plane to its newest served patch, and a vulnerable module to its fix; then make vulncheck and test-plugins.
	go run ./hack/deps update --govulncheck $(GOVULNCHECK) --db $(VULNDB) $(VULNCHECK_PACKAGES)
	$(MAKE) vulncheck
	$(MAKE) test-plugins

.PHONY: chaos
chaos: cluster-build ## The long fault tests: CHAOS_CYCLES (50) kill -9 cycles over CHAOS_PROXIES (20) MyProxies, FAILED_UPGRADES (1000), a SOAK_N (10000) create/delete soak; results in docs/chaos-results.md.
	@printf '# Chaos results\n\nWritten by `make chaos` on %s, %s cores (envtest: a real kube-apiserver and etcd).\nWhat each figure counts: [reliability.md](reliability.md).\n' "$$(date -u +%F)" "$$(nproc)" > $(CHAOS_REPORT).tmp
	KUBEBUILDER_ASSETS=$(CLUSTER_BIN) CHAOS_CYCLES=$${CHAOS_CYCLES:-50} CHAOS_PROXIES=$${CHAOS_PROXIES:-20} CHAOS_REPORT=$(abspath $(CHAOS_REPORT)).tmp \
	  FAILED_UPGRADES=$${FAILED_UPGRADES:-1000} SOAK_N=$${SOAK_N:-10000} go test -count=1 -timeout 90m -v \
	  ./test/chaos/
	mv $(CHAOS_REPORT).tmp $(CHAOS_REPORT) && cat $(CHAOS_REPORT)

# Earlier code of this operator that make bench runs side by side with this code, each a subject
# of its own (BUILDS): before the action client was rebuilt step by step (0edcee7) and before the
# move to Helm 4 (36389d4). BENCH_COMMITS= runs none.
BENCH_COMMITS ?= 0edcee7 36389d4
comma := ,
BENCH_BUILDS = $(subst $() ,$(comma),$(strip $(foreach c,$(BENCH_COMMITS),$(c)=$(BIN)/builds/$(c)/myproxy-operator)))

.PHONY: bench
bench: build bench-builds $(HELM_OPERATOR) $(HELM_OPERATOR_PLUGINS) $(HELM_CONTROLLER) cluster-build ## Benchmark against the stock helm-operator (defaults and tuned), helm-operator-plugins, Flux's helm-controller (defaults and tuned), a client-go limit and the BENCH_COMMITS builds (N=1000 IDLE=5m ROUNDS=1, rounds interleaved; results in docs/benchmark-results.md), then bench-rollout.
	BENCH_DIR=$(abspath $(BENCH_DIR)) BUILDS=$${BUILDS:-$(BENCH_BUILDS)} go run ./bench
	cp $(abspath $(BENCH_DIR))/results.md $(BENCH_REPORT)
	$(MAKE) bench-rollout

.PHONY: bench-builds
bench-builds: ## Build the operator of each BENCH_COMMITS commit, from a git worktree, into bin/builds/<commit>.
	@for c in $(BENCH_COMMITS); do \
	  [ -x $(BIN)/builds/$$c/myproxy-operator ] && continue; \
	  rm -rf $(BIN)/builds/$$c/src && git worktree add --detach $(BIN)/builds/$$c/src $$c && \
	  (cd $(BIN)/builds/$$c/src && go build -o ../myproxy-operator ./cmd) && \
	  git worktree remove --force $(BIN)/builds/$$c/src || exit 1; \
	done

.PHONY: bench-fast-paths
bench-fast-paths: build cluster-build ## Measure each fast path: this operator with every one, none, and each alone off, interleaved ROUNDS (3) times (N=300 IDLE=30s; results in docs/fast-path-results.md).
	BENCH_DIR=$(abspath $(BENCH_DIR))/fast-paths N=$${N:-300} IDLE=$${IDLE:-30s} SAMPLES=$${SAMPLES:-3} UNRELATED=0 \
	  FAST_PATH_ROUNDS=$${ROUNDS:-3} go run ./bench
	cp $(abspath $(BENCH_DIR))/fast-paths/fastpaths.md docs/fast-path-results.md

.PHONY: bench-rollout
bench-rollout: build cluster-build ## Measure a chart rollout over a converged fleet: in waves and all at once (N=1000; results in docs/rollout-results.md).
	BENCH_DIR=$(abspath $(BENCH_DIR))/rollout N=$${N:-1000} ROLLOUT=1 go run ./bench
	cp $(abspath $(BENCH_DIR))/rollout/rollout.md docs/rollout-results.md

.PHONY: bench-restart
bench-restart: build cluster-build ## Measure restarts over a converged fleet, with every fast path and without digests, for this operator and each BUILDS build (N=1000; results in bin/bench/restart).
	BENCH_DIR=$(abspath $(BENCH_DIR))/restart N=$${N:-1000} RESTART=1 go run ./bench

.PHONY: test-unit
test-unit: ## Run the unit tests only (no control plane).
	go test -count=1 -short $(GOTEST_FLAGS) ./internal/... ./cmd/... ./bench/...
	cd hack/oci && go test -count=1 $(GOTEST_FLAGS) ./...

.PHONY: test-integration
test-integration: tools olm-tools cluster-build ## Run the envtest integration tests and the chart, manifest and monitoring checks.
	KUBEBUILDER_ASSETS=$(CLUSTER_BIN) HELM=$(HELM) HELM4=$(HELM4) KUSTOMIZE=$(KUSTOMIZE) OPERATOR_SDK=$(OPERATOR_SDK) OPM=$(OPM) PROMTOOL=$(PROMTOOL) \
	  go test -count=1 -p 1 -timeout 20m $(GOTEST_FLAGS) ./test/integration/... ./test/chaos/... ./test/manifests/... ./test/chart/... ./test/dataplane/... ./test/monitoring/...

.PHONY: test-e2e
test-e2e: $(HELM) $(KUSTOMIZE) cluster-build ## Run the end-to-end tests on a local cluster of their own (make deploy, kubectl, kwok Pods).
	KUBEBUILDER_ASSETS=$(CLUSTER_BIN) HELM=$(HELM) KUSTOMIZE=$(KUSTOMIZE) \
	  go test -count=1 -p 1 -timeout 20m $(GOTEST_FLAGS) ./test/e2e/... ./test/cluster/...

# test/publish runs on a cluster of its own with a registry and an audit log: the images built
# and pushed with Go only, make deploy of the pushed image, and OLM installing, upgrading and
# removing the bundle from a catalog.
.PHONY: test-publish
test-publish: $(KUSTOMIZE) $(OPERATOR_SDK) $(OPM) $(OCI) $(OLM_BIN)/.stamp cluster-build ## Run the publishing tests: make image (reproducible, as the Dockerfile says), make deploy of the pushed image, an OLM install, upgrade and removal from a catalog.
	KUBEBUILDER_ASSETS=$(CLUSTER_BIN) KUSTOMIZE=$(KUSTOMIZE) OPERATOR_SDK=$(OPERATOR_SDK) OPM=$(OPM) OCI=$(OCI) OLM_BIN=$(OLM_BIN) \
	  go test -count=1 -timeout 25m $(GOTEST_FLAGS) ./test/publish/...

##@ Build

.PHONY: build
build: ## Build the operator binary into bin/.
	go build -o $(OPERATOR) ./cmd

.PHONY: run
run: build ## Run the operator against the cluster of $KUBECONFIG (or the local one).
	$(call use-cluster) $(OPERATOR) --watches-file=watches.yaml --metrics-bind-address=0 --health-probe-bind-address=0

.PHONY: preview
preview: ## Tell, writing nothing, what the charts would do to the values of every custom resource and to every release in the cluster of $KUBECONFIG (CHART_DIR=a new chart; PREVIEW_ARGS='-o json --diff'); exit status 1 if a value would be lost or an upgrade fail.
	@status=0; \
	$(call use-cluster) go run ./hack/manifests --preview-values $(if $(CHART_DIR),--chart-dir=$(CHART_DIR)) || status=$$?; \
	go build -o bin/preview ./hack/preview || exit 2; \
	$(call use-cluster) bin/preview --watches-file=watches.yaml $(if $(CHART_DIR),--chart-dir=$(CHART_DIR)) $(PREVIEW_ARGS) || status=$$?; \
	exit $$status

.PHONY: image
image: $(OCI) ## Build the operator image from the Dockerfile with Go only (no container engine) into bin/images/operator; prints its digest.
	$(PROGRESS) "operator image" 5m $(OCI) build --file Dockerfile --context . --build-arg VERSION=$(VERSION) --out $(IMAGES)/operator

.PHONY: image-push
image-push: image ## Push the operator image to IMG (any registry; REGISTRY_CA adds a CA to trust); prints IMG by digest.
	$(OCI) push $(IMAGES)/operator $(IMG)

.PHONY: docker-build
docker-build: ## Build the operator image with a container engine.
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

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
	$(call render,config/default) | $(KUBECTL) apply --server-side --force-conflicts -f -

.PHONY: undeploy
undeploy: $(KUSTOMIZE) ## Uninstall every MyProxy's release, then remove everything deploy created.
	@# MyProxies go first, while the operator still runs to uninstall their releases: deleting the
	@# CRD under them would leave them stuck on their finalizer, or their releases orphaned.
	@if $(KUBECTL) get crd myproxies.gateway.example.com >/dev/null 2>&1; then \
	  $(KUBECTL) delete myproxies.gateway.example.com --all --all-namespaces --timeout=180s || { \
	    echo "undeploy: MyProxies are still being uninstalled; is the operator running? Nothing else was removed." >&2; exit 1; }; \
	fi
	$(call render,config/default) | $(KUBECTL) delete --ignore-not-found -f -

##@ Publishing

.PHONY: bundle
bundle: manifests $(KUSTOMIZE) $(OPERATOR_SDK) ## Generate the OLM bundle (bundle/, bundle.Dockerfile) and validate it.
	$(OPERATOR_SDK) generate kustomize manifests -q --interactive=false
	$(MAKE) -s --no-print-directory render-bundle

# operator-sdk writes bundle.Dockerfile into its working directory, and reads PROJECT there.
.PHONY: render-bundle
render-bundle: $(KUSTOMIZE) $(OPERATOR_SDK) ## Write the bundle of config/manifests as it stands, for IMG and VERSION, into BUNDLE_CONTEXT (bundle/, bundle.Dockerfile) and validate it.
	@mkdir -p $(BUNDLE_CONTEXT) && { [ "$(abspath $(BUNDLE_CONTEXT))" = "$(ROOT)" ] || cp PROJECT $(BUNDLE_CONTEXT)/; }
	$(MAKE) -s --no-print-directory render-manifests | (cd $(BUNDLE_CONTEXT) && $(OPERATOR_SDK) generate bundle -q --overwrite --version $(VERSION) $(BUNDLE_METADATA_OPTS) >/dev/null)
	$(OPERATOR_SDK) bundle validate $(BUNDLE_CONTEXT)/bundle --select-optional suite=operatorframework

.PHONY: render-manifests
render-manifests: $(KUSTOMIZE) ## Print config/manifests with IMG set (the input of generate bundle).
	@$(call render,config/manifests)

.PHONY: operator-chart
operator-chart: $(KUSTOMIZE) ## Generate dist/chart, a Helm chart of the operator, from config/default.
	$(MAKE) -s --no-print-directory render-default | go run ./hack/operatorchart --out dist/chart --version $(VERSION) --image $(IMAGE_REPO)

.PHONY: render-default
render-default: $(KUSTOMIZE) ## Print config/default with IMG set (what deploy applies).
	@$(call render,config/default)

.PHONY: catalog
catalog: $(OPM) ## Render a file-based catalog of CATALOG_BUNDLES (one channel, DEFAULT_CHANNEL) into CATALOG_CONTEXT/catalog and validate it with opm.
	hack/catalog.sh "$(OPM)" "$(CATALOG_CONTEXT)/catalog" "$(DEFAULT_CHANNEL)" $(CATALOG_BUNDLES)

.PHONY: bundle-build
bundle-build: $(OCI) ## Build the bundle image from BUNDLE_CONTEXT (bundle.Dockerfile, bundle/) with Go only into bin/images/bundle; prints its digest.
	$(OCI) build --file $(BUNDLE_CONTEXT)/bundle.Dockerfile --context $(BUNDLE_CONTEXT) --out $(IMAGES)/bundle

.PHONY: bundle-push
bundle-push: bundle-build ## Push the bundle image to BUNDLE_IMG; prints it by digest.
	$(OCI) push $(IMAGES)/bundle $(BUNDLE_IMG)

.PHONY: catalog-build
catalog-build: $(OCI) ## Build the catalog image (catalog.Dockerfile, CATALOG_CONTEXT/catalog) with Go only into bin/images/catalog; prints its digest.
	$(OCI) build --file catalog.Dockerfile --context $(CATALOG_CONTEXT) --out $(IMAGES)/catalog

.PHONY: catalog-push
catalog-push: catalog-build ## Push the catalog image to CATALOG_IMG; prints it by digest.
	$(OCI) push $(IMAGES)/catalog $(CATALOG_IMG)

##@ Local cluster

.PHONY: cluster-build
cluster-build: ## Build the control-plane binaries into bin/cluster (only what is missing or changed).
	hack/cluster/build.sh

.PHONY: cluster-up
cluster-up: $(if $(filter 1,$(CLUSTER_REGISTRY)),$(OCI)) ## Start the local control plane (reuses a running one); CLUSTER_AUDIT=1 records an audit log, CLUSTER_REGISTRY=1 adds an image registry.
	hack/cluster/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local control plane.
	hack/cluster/cluster.sh down

.PHONY: cluster-env
cluster-env: ## Print the export line that points kubectl (and, with a registry, REGISTRY and REGISTRY_CA) at the local cluster.
	@hack/cluster/cluster.sh env

.PHONY: demo
demo: $(HELM) $(KUSTOMIZE) $(OCI) build ## Start the local cluster with its registry (unless KUBECONFIG is set), run the operator and the samples.
	HELM=$(HELM) KUSTOMIZE=$(KUSTOMIZE) OPERATOR=$(OPERATOR) hack/demo.sh

##@ Tools

.PHONY: tools
tools: $(HELM) $(HELM4) $(KUSTOMIZE) $(GOLANGCI_LINT) $(PROMTOOL) ## Build helm (Helm 3), helm4, kustomize, golangci-lint and promtool from their go.mod files in hack/tools into bin/.

$(HELM) $(KUSTOMIZE): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && $(PROGRESS) "helm and kustomize" 3m go build -o $(BIN)/ helm.sh/helm/v3/cmd/helm sigs.k8s.io/kustomize/kustomize/v5
	@touch $(HELM) $(KUSTOMIZE)

# helm4 is stamped with its version, as Helm's own release build does (`helm4 version`).
HELM4_VERSION := $(shell awk '$$1 == "helm.sh/helm/v4" {print $$2} $$1 == "require" && $$2 == "helm.sh/helm/v4" {print $$3}' hack/tools/helm4/go.mod)
$(HELM4): hack/tools/helm4/go.mod hack/tools/helm4/go.sum
	cd hack/tools/helm4 && $(PROGRESS) helm4 3m go build -ldflags "-X helm.sh/helm/v4/internal/version.version=$(HELM4_VERSION)" \
	  -o $(HELM4) helm.sh/helm/v4/cmd/helm

.PHONY: helm4
helm4: $(HELM4) ## Build bin/helm4, the Helm 4 CLI, from hack/tools/helm4/go.mod.

$(GOLANGCI_LINT): hack/tools/golangci-lint/go.mod hack/tools/golangci-lint/go.sum
	cd hack/tools/golangci-lint && $(PROGRESS) golangci-lint 8m go build -o $(BIN)/ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# promtool checks and unit-tests the alerting rules in config/prometheus (test/monitoring);
# remove_all_sd leaves out the service-discovery plugins, which rule checks never use and which
# are most of its build.
$(PROMTOOL): hack/tools/promtool/go.mod hack/tools/promtool/go.sum
	cd hack/tools/promtool && $(PROGRESS) promtool 4m go build -tags remove_all_sd -o $(BIN)/ github.com/prometheus/prometheus/cmd/promtool

# govulncheck and the vulnerability database come from hack/tools/vulncheck/go.mod: the database
# is golang.org/x/vulndb's data/osv at the pinned version, indexed by its own cmd/indexdb, so
# that the check reads nothing at run time but the Go module proxy.
$(GOVULNCHECK): hack/tools/vulncheck/go.mod hack/tools/vulncheck/go.sum
	cd hack/tools/vulncheck && $(PROGRESS) govulncheck 2m go build -o $(BIN)/ golang.org/x/vuln/cmd/govulncheck golang.org/x/vulndb/cmd/indexdb
	@touch $(GOVULNCHECK)

$(VULNDB): $(GOVULNCHECK)
	rm -rf $(VULNDB) && cd hack/tools/vulncheck && \
	  $(BIN)/indexdb -vulns "$$(go list -m -f '{{.Dir}}' golang.org/x/vulndb)/data/osv" -out $(VULNDB)

.PHONY: olm-tools
olm-tools: $(OPERATOR_SDK) $(OPM) ## Build operator-sdk and opm from hack/tools/operator-sdk/go.mod into bin/.

$(OCI): hack/oci/go.mod hack/oci/go.sum $(wildcard hack/oci/*.go)
	cd hack/oci && $(PROGRESS) oci 1m go build -o $(OCI) .

.PHONY: oci
oci: $(OCI) ## Build bin/oci (hack/oci): images without a container engine, pushes, inspection, the local registry.

# OLM v0 as its own manifests deploy it: the olm and catalog operators (static, as in OLM's
# images), its CRDs, and its Helm chart rendered with the upstream values (namespaces, RBAC, the
# operators' Deployments) beside them. A stamp records the build: it is redone when
# hack/tools/olm/go.mod or go.sum changes.
OLM_MODULE := github.com/operator-framework/operator-lifecycle-manager
OLM_VERSION := $(shell awk '$$1 == "$(OLM_MODULE)" {print $$2} $$1 == "require" && $$2 == "$(OLM_MODULE)" {print $$3}' hack/tools/olm/go.mod)
$(OLM_BIN)/.stamp: hack/tools/olm/go.mod hack/tools/olm/go.sum $(HELM)
	rm -rf $(OLM_BIN) && mkdir -p $(OLM_BIN)
	cd hack/tools/olm && CGO_ENABLED=0 $(PROGRESS) "OLM $(OLM_VERSION): olm and catalog operators" 10m go build -tags json1 \
	  -ldflags "-X $(OLM_MODULE)/pkg/version.OLMVersion=$(OLM_VERSION)" -o $(OLM_BIN)/ $(OLM_MODULE)/cmd/olm $(OLM_MODULE)/cmd/catalog
	cd hack/tools/olm && dir=$$(go list -m -f '{{.Dir}}' $(OLM_MODULE)) && for f in $$dir/deploy/chart/crds/*.yaml; do echo ---; cat $$f; echo; done > $(OLM_BIN)/crds.yaml && \
	  $(HELM) template olm $$dir/deploy/chart -f $$dir/deploy/upstream/values.yaml > $(OLM_BIN)/olm.yaml
	touch $@

.PHONY: olm
olm: $(OLM_BIN)/.stamp ## Build OLM v0 (olm and catalog operators, its install manifests) from hack/tools/olm/go.mod into bin/olm.

# operator-sdk needs the containers_image_openpgp tag (no cgo gpgme), and its version stamped:
# the bundle records which operator-sdk built it.
OPERATOR_SDK_VERSION := $(shell awk '$$1 == "github.com/operator-framework/operator-sdk" {print $$2}' hack/tools/operator-sdk/go.mod)
SDK_VERSION_PKG := github.com/operator-framework/operator-sdk/internal/version
# helm-operator-plugins' own `run` command, at the version this operator builds on (go.mod): a
# peer in the benchmark.
$(HELM_OPERATOR_PLUGINS): go.mod go.sum
	$(PROGRESS) helm-operator-plugins 2m go build -o $@ github.com/operator-framework/helm-operator-plugins

# The stock helm-operator is built from the same pins: the benchmark runs it side by side.
$(OPERATOR_SDK) $(OPM) $(HELM_OPERATOR): hack/tools/operator-sdk/go.mod hack/tools/operator-sdk/go.sum
	cd hack/tools/operator-sdk && $(PROGRESS) "operator-sdk, opm and helm-operator" 6m go build -tags containers_image_openpgp -o $(BIN)/ \
	  -ldflags "-X $(SDK_VERSION_PKG).Version=$(OPERATOR_SDK_VERSION) -X $(SDK_VERSION_PKG).GitVersion=$(OPERATOR_SDK_VERSION) -X $(SDK_VERSION_PKG).ImageVersion=$(OPERATOR_SDK_VERSION)" \
	  github.com/operator-framework/operator-sdk/cmd/operator-sdk github.com/operator-framework/operator-registry/cmd/opm \
	  github.com/operator-framework/operator-sdk/cmd/helm-operator
	@touch $(OPERATOR_SDK) $(OPM) $(HELM_OPERATOR)

# Flux's helm-controller, a peer in the benchmark, from hack/tools/helm-controller/go.mod (upstream
# Helm in place of Flux's fork, which the module proxy does not serve), and beside it the CRDs the
# benchmark installs for it: its HelmRelease, and source-controller's HelmChart and OCIRepository at
# the version of the source API it links (the benchmark runs it without source-controller).
SOURCE_CONTROLLER := github.com/fluxcd/source-controller
$(HELM_CONTROLLER) $(HELM_CONTROLLER_CRDS): hack/tools/helm-controller/go.mod hack/tools/helm-controller/go.sum
	cd hack/tools/helm-controller && $(PROGRESS) helm-controller 8m go build -o $(HELM_CONTROLLER) github.com/fluxcd/helm-controller
	cd hack/tools/helm-controller && hc=$$(go list -m -f '{{.Dir}}' github.com/fluxcd/helm-controller) && \
	  src=$(SOURCE_CONTROLLER)@$$(go list -m -f '{{.Version}}' $(SOURCE_CONTROLLER)/api) && \
	  srcdir=$$(cd "$${TMPDIR:-/tmp}" && go mod download $$src && go list -m -f '{{.Dir}}' $$src) && \
	  for f in $$hc/config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml \
	    $$srcdir/config/crd/bases/source.toolkit.fluxcd.io_helmcharts.yaml $$srcdir/config/crd/bases/source.toolkit.fluxcd.io_ocirepositories.yaml; do \
	    echo ---; cat $$f; done > $(HELM_CONTROLLER_CRDS)
	@touch $(HELM_CONTROLLER) $(HELM_CONTROLLER_CRDS)

.PHONY: helm-controller
helm-controller: $(HELM_CONTROLLER) ## Build Flux's helm-controller (a peer in the benchmark) and its CRDs into bin/.

# render DIR: the kustomization DIR with the manager image set to $(IMG), through a throwaway
# overlay so that no tracked file changes.
define render
mkdir -p $(BIN) && overlay=$$(mktemp -d $(BIN)/overlay.XXXXXX) && trap 'rm -rf "$$overlay"' EXIT && \
  if [ -n "$(SHARDS)" ] && [ "$(1)" = config/default ]; then hack/shards.sh "$$overlay" "$(SHARDS)"; \
  else printf 'resources:\n- ../../$(1)\n' > "$$overlay/kustomization.yaml"; fi && \
  (cd "$$overlay" && $(KUSTOMIZE) edit set image $(IMAGE_REPO)=$(IMG)) && \
  $(KUSTOMIZE) build "$$overlay"
endef

# use-cluster: KUBECONFIG if set, else the local cluster's kubeconfig.
define use-cluster
KUBECONFIG=$${KUBECONFIG:-$(CLUSTER_DIR)/kubeconfig}
endef

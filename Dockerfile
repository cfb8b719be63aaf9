# Build the operator binary with the pinned Go (hack/toolchain.env): its standard library carries
# fixes this code reaches.
FROM docker.io/library/golang:1.27.3-bookworm AS builder
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o myproxy-operator ./cmd

# The smallest runtime there is: a static binary (no cgo; the apiserver's CA comes from the
# ServiceAccount mount), watches.yaml and the chart it maps to, run as a non-root UID. The
# working directory is where the binary looks for ./watches.yaml and the chart paths it names;
# Helm's cache and config go to the /tmp emptyDir that config/manager mounts.
FROM scratch
# VERSION is the Makefile's (make image and make docker-build pass it).
ARG VERSION
LABEL org.opencontainers.image.title="myproxy-operator" \
      org.opencontainers.image.description="Runs nginx reverse proxies from MyProxy resources, one Helm release each" \
      org.opencontainers.image.source="https://github.com/example/myproxy-operator" \
      org.opencontainers.image.version="${VERSION}"
WORKDIR /opt/myproxy-operator
COPY --from=builder /workspace/myproxy-operator /usr/local/bin/myproxy-operator
COPY watches.yaml watches.yaml
COPY helm-charts/ helm-charts/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/myproxy-operator"]

# Build the operator binary with a pinned Go.
FROM docker.io/library/golang:1.26.8-bookworm AS builder
WORKDIR /workspace
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY internal/ internal/
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w" -o myproxy-operator ./cmd

# A minimal, non-root runtime: the binary, watches.yaml and the chart it maps to. The working
# directory is where the binary looks for ./watches.yaml and the chart paths it names.
FROM gcr.io/distroless/static-debian12:nonroot
WORKDIR /opt/myproxy-operator
COPY --from=builder /workspace/myproxy-operator /usr/local/bin/myproxy-operator
COPY watches.yaml watches.yaml
COPY helm-charts/ helm-charts/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/myproxy-operator"]

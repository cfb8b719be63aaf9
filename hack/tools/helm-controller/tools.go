//go:build tools

// Package tools pins Flux's helm-controller, a peer in the benchmark (bench/flux.go). Its own
// go.mod replaces helm.sh/helm/v4 by a Flux fork that the module proxy does not serve; this
// module builds it on the upstream Helm release of the same version instead.
package tools

import _ "github.com/fluxcd/helm-controller"

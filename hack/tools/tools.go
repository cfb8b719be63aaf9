//go:build tools

// Package tools pins the command-line tools the Makefile builds into bin/ (helm, kustomize).
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
	_ "sigs.k8s.io/kustomize/kustomize/v5"
)

//go:build tools

// Package tools pins the Helm 4 CLI, built into bin/helm4 at the helm.sh/helm/v4 version the
// operator links (go.mod): what `helm template -f` renders is compared with what the operator
// installs. It has a module of its own so that the Helm 3 CLI's (../go.mod) stays as it is.
package tools

import _ "helm.sh/helm/v4/cmd/helm"

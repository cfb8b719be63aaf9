//go:build tools

// Package tools pins the Operator Lifecycle Manager (OLM v0) for the publishing tests: its olm
// and catalog operators run against the local cluster and install, upgrade and remove the
// operator's bundle from a catalog, as on a cluster with OLM (make test-publish).
package tools

import (
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/catalog"
	_ "github.com/operator-framework/operator-lifecycle-manager/cmd/olm"
)

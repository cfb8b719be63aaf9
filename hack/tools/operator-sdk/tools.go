//go:build tools

// Package tools pins the OLM tooling: the operator-sdk CLI (bundle generation and validation),
// opm (file-based catalogs), and the stock helm-operator that the benchmark runs side by side
// with this operator. They live in a module of their own: their dependencies differ from the
// operator's.
package tools

import (
	_ "github.com/operator-framework/operator-registry/cmd/opm"
	_ "github.com/operator-framework/operator-sdk/cmd/helm-operator"
	_ "github.com/operator-framework/operator-sdk/cmd/operator-sdk"
)

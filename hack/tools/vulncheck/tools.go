//go:build tools

// Package tools pins govulncheck and the vulnerability database (golang.org/x/vulndb's
// data/osv, indexed by its cmd/indexdb), built into bin/ by `make vulncheck`.
package tools

import (
	_ "golang.org/x/vuln/cmd/govulncheck"
	_ "golang.org/x/vulndb/cmd/indexdb"
)

// Command deps keeps what this project links free of known vulnerabilities:
//
//	deps check  --govulncheck BIN --db DIR --accepted FILE PACKAGES...   (make vulncheck)
//	deps update --govulncheck BIN --db DIR PACKAGES...                   (make update-deps)
//
// check fails, naming each, on the vulnerabilities govulncheck finds the packages reach, unless
// the accepted file accepts one until a date; update raises every pin to its newest served
// patch and the modules a vulnerability is reached in to their fix (docs/development.md).
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "check" && os.Args[1] != "update") {
		fmt.Fprintln(os.Stderr, "usage: deps check|update --govulncheck BIN --db DIR [--accepted FILE] PACKAGES...")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	govulncheck := fs.String("govulncheck", "bin/govulncheck", "the govulncheck binary")
	db := fs.String("db", "bin/vulndb", "the vulnerability database directory")
	accepted := fs.String("accepted", "hack/deps/accepted.yaml", "the accepted findings")
	_ = fs.Parse(os.Args[2:])
	var err error
	if os.Args[1] == "check" {
		err = check(*govulncheck, *db, *accepted, fs.Args())
	} else {
		err = update(*govulncheck, *db, fs.Args())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, os.Args[1]+":", err)
		os.Exit(1)
	}
}

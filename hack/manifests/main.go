// Command manifests writes what `make manifests` generates from watches.yaml and its charts: a
// CRD per entry, the CRD kustomization, the manager's ClusterRole, each kind's user roles and
// PROJECT's resources (see hack/manifests/manifestgen).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/example/myproxy-operator/hack/manifests/manifestgen"
)

func main() {
	watches := flag.String("watches", "watches.yaml", "the watches file")
	config := flag.String("config", "config", "the kustomize config directory to write into")
	flag.Parse()
	files, notes, err := manifestgen.Generate(*watches)
	for _, note := range notes {
		fmt.Println("manifests:", note)
	}
	if err == nil {
		err = manifestgen.Write(*config, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}

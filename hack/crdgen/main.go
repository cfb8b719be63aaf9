// Command crdgen writes the MyProxy CRD: the skeleton's names, columns and subresources, with a
// `spec` schema generated from the chart's values.schema.json (see internal/crdgen).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/example/myproxy-operator/internal/crdgen"
)

func main() {
	skeleton := flag.String("skeleton", "hack/crdgen/myproxies.skeleton.yaml", "CRD without its spec schema")
	schema := flag.String("values-schema", "helm-charts/myproxy/values.schema.json", "the chart's values schema")
	out := flag.String("out", "config/crd/bases/gateway.example.com_myproxies.yaml", "where to write the CRD")
	flag.Parse()

	crd, err := crdgen.Render(*skeleton, *schema)
	if err == nil {
		err = os.WriteFile(*out, crd, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crdgen:", err)
		os.Exit(1)
	}
}

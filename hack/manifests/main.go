// Command manifests writes what `make manifests` generates from watches.yaml and its charts: a
// CRD per entry, the CRD kustomization, the manager's ClusterRole, each kind's user roles, the
// conversion webhook's components and PROJECT's resources (see hack/manifests/manifestgen). Each
// CRD is checked against the one it replaces: the committed file, or with --served the one the
// cluster of $KUBECONFIG serves. With --preview-values it writes nothing, and tells instead
// what the CRDs it would write do to the values of every custom resource the cluster stores
// (make preview).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/hack/manifests/manifestgen"
)

func main() {
	watches := flag.String("watches", "watches.yaml", "the watches file")
	config := flag.String("config", "config", "the kustomize config directory to write into")
	served := flag.Bool("served", false, "check each CRD against the one the cluster of $KUBECONFIG serves, not the committed file")
	chartDir := flag.String("chart-dir", "", "serve the kind whose chart has this chart's name with it (a new chart, before it ships)")
	previewValues := flag.Bool("preview-values", false, "write nothing; tell what the CRDs would do to the values of every custom "+
		"resource the cluster of $KUBECONFIG stores; exit status 1 if one would lose a value")
	flag.Parse()
	o := manifestgen.Options{Previous: manifestgen.Committed(*config), ChartDir: *chartDir}
	if *served || *previewValues {
		c, err := cluster()
		if err != nil {
			fail(err)
		}
		if *previewValues {
			lines, lost, err := manifestgen.PreviewValues(context.Background(), c, *watches, o)
			if err != nil {
				fail(err)
			}
			for _, l := range lines {
				fmt.Println("values:", l)
			}
			if lost {
				os.Exit(1)
			}
			return
		}
		o.Previous = manifestgen.Served(c)
	}
	files, notes, err := manifestgen.Generate(*watches, o)
	for _, note := range notes {
		fmt.Println("manifests:", note)
	}
	if err == nil {
		err = manifestgen.Write(*config, files)
	}
	if err != nil {
		fail(err)
	}
}

// cluster is a client of the cluster of $KUBECONFIG.
func cluster() (client.Client, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, err
	}
	s := scheme.Scheme
	if err := apiextv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "manifests:", err)
	os.Exit(1)
}

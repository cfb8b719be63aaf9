// Package managedlabel marks every object a release creates with one label, so that the
// operator's caches can hold only those objects.
//
// The Helm reconciler watches each kind its releases render (Deployments, Services,
// ConfigMaps...) to correct drift, and controller-runtime caches every object of a watched kind
// in the watched namespaces: all ConfigMaps of the cluster when watching all namespaces. With
// the label on release objects, the cache selects on it (as the stock helm-operator does with
// its chart label), and the operator's memory does not grow with unrelated objects.
package managedlabel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/postrender"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Key and Value of the label on every object of every release.
const (
	Key   = "myproxy-operator.gateway.example.com/managed"
	Value = "true"
)

// Selector selects the labelled objects.
func Selector() labels.Selector { return labels.SelectorFromSet(labels.Set{Key: Value}) }

// PostRenderer is a helm-operator-plugins post-renderer provider that adds the label.
func PostRenderer() helmclient.PostRendererProvider {
	return func(meta.RESTMapper, kube.Interface, client.Object) postrender.PostRenderer { return postRenderer{} }
}

type postRenderer struct{}

// Run labels each object of the rendered manifest.
func (postRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	out := &bytes.Buffer{}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(in))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("labelling rendered objects: %w", err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("labelling rendered objects: %w", err)
		}
		if len(bytes.TrimSpace(j)) == 0 || string(bytes.TrimSpace(j)) == "null" {
			continue // an empty document, or only comments
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil { // keeps integers integers
			return nil, fmt.Errorf("labelling rendered objects: %w", err)
		}
		l := u.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[Key] = Value
		u.SetLabels(l)
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
}

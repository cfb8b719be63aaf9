// Package managedlabel marks every object a release creates with one label, so that the
// operator's caches can hold only those objects.
//
// The Helm reconciler watches each kind its releases render (Deployments, Services,
// ConfigMaps...) to correct drift, and controller-runtime caches every object of a watched kind
// in the watched namespaces: all ConfigMaps of the cluster when watching all namespaces. With
// the label on release objects, the cache selects on it (as the stock helm-operator does with
// its chart label), and the operator's memory does not grow with unrelated objects.
//
// The label is set on the objects Helm's kube client builds from a manifest (package
// helmconfig), not by a post-renderer: helm-operator-plugins' owner-reference post-renderer
// already builds and re-serialises every rendered manifest through that client, so the label
// lands in the manifest stored in the release at no cost, where a post-renderer of its own cost
// a YAML parse and a YAML serialisation of every manifest.
package managedlabel

import (
	"fmt"

	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/cli-runtime/pkg/resource"
)

// Key of the label on every object of every release, and its Value when the operator is not
// sharded (and in the default shard); a named shard's objects carry its name (package shard),
// so that each shard caches only its own.
const (
	Key   = "myproxy-operator.gateway.example.com/managed"
	Value = "true"
)

// Selector selects the objects labelled with value.
func Selector(value string) labels.Selector { return labels.SelectorFromSet(labels.Set{Key: value}) }

// Label sets the label to value on every object of a list built by Helm's kube client.
func Label(objs kube.ResourceList, value string) error {
	return objs.Visit(func(info *resource.Info, err error) error {
		if err != nil {
			return err
		}
		m, err := meta.Accessor(info.Object)
		if err != nil {
			return fmt.Errorf("labelling %s %s: %w", info.Mapping.GroupVersionKind.Kind, info.Name, err)
		}
		l := m.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[Key] = value
		m.SetLabels(l)
		return nil
	})
}

package helmconfig

import (
	"testing"

	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/example/myproxy-operator/internal/names"
)

func labelled(obj runtime.Object) *resource.Info {
	u, _ := obj.(*unstructured.Unstructured)
	i := &resource.Info{Object: obj, Mapping: &meta.RESTMapping{}}
	if u != nil {
		i.Name = u.GetName()
		i.Mapping.GroupVersionKind = u.GroupVersionKind()
	}
	return i
}

func TestLabelMarksEveryObjectAndKeepsTheRest(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "p", "labels": map[string]any{"app.kubernetes.io/name": "myproxy"}},
		"data":     map[string]any{"nginx.conf": "events {}\n"},
	}}
	dep := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "p"},
		"spec": map[string]any{"replicas": int64(2)},
	}}
	if err := label(kube.ResourceList{labelled(cm), labelled(dep)}, names.ManagedValue); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*unstructured.Unstructured{cm, dep} {
		if !names.ManagedSelector(names.ManagedValue).Matches(labels.Set(o.GetLabels())) {
			t.Errorf("%s %s not labelled: %v", o.GetKind(), o.GetName(), o.GetLabels())
		}
	}
	if cm.GetLabels()["app.kubernetes.io/name"] != "myproxy" {
		t.Errorf("the chart's own labels were lost: %v", cm.GetLabels())
	}
	if conf, _, _ := unstructured.NestedString(cm.Object, "data", "nginx.conf"); conf != "events {}\n" {
		t.Errorf("data changed: %q", conf)
	}
	if r, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); r != 2 {
		t.Errorf("spec changed: replicas %d", r)
	}
}

func TestLabelRefusesAnObjectWithoutMetadata(t *testing.T) {
	if err := label(kube.ResourceList{labelled(&runtime.Unknown{})}, names.ManagedValue); err == nil {
		t.Error("an object without metadata was labelled")
	}
}

package caches

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

func TestNewIsTypedForKnownKindsOnly(t *testing.T) {
	tests := []struct {
		name  string
		gvk   schema.GroupVersionKind
		typed bool
	}{
		{name: "built-in kind", gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"), typed: true},
		{name: "custom kind", gvk: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, typed: false},
		{name: "unknown version of a built-in group", gvk: schema.GroupVersionKind{Group: "apps", Version: "v9", Kind: "Deployment"}, typed: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := ReleaseObject(scheme.Scheme, tt.gvk)
			_, isUnstructured := obj.(*unstructured.Unstructured)
			if isUnstructured == tt.typed {
				t.Fatalf("ReleaseObject(%v) is %T; typed wanted: %v", tt.gvk, obj, tt.typed)
			}
			if got := obj.GetObjectKind().GroupVersionKind(); got != tt.gvk {
				t.Fatalf("ReleaseObject(%v) has kind %v", tt.gvk, got)
			}
		})
	}
}

func TestContentOfATypedObjectIsItsJSONForm(t *testing.T) {
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	d := &appsv1.Deployment{ // as a typed cache returns it: no apiVersion, no kind
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
		Status:     appsv1.DeploymentStatus{ReadyReplicas: 2},
	}
	m, err := Content(d, gvk)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GroupVersionKind() != gvk || u.GetName() != "web" {
		t.Fatalf("content names %v %q", u.GroupVersionKind(), u.GetName())
	}
	if r, _, _ := unstructured.NestedInt64(m, "spec", "replicas"); r != 3 {
		t.Fatalf("spec.replicas = %d", r)
	}
	if r, _, _ := unstructured.NestedInt64(m, "status", "readyReplicas"); r != 2 {
		t.Fatalf("status.readyReplicas = %d", r)
	}
}

func TestContentOfAnUnstructuredObjectIsItself(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget"}}
	m, err := Content(u, u.GroupVersionKind())
	if err != nil {
		t.Fatal(err)
	}
	m["probe"] = true
	if u.Object["probe"] != true {
		t.Fatal("content is a copy")
	}
}

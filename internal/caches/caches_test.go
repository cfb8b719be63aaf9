package caches

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/shard"
)

// docs/architecture.md shows the table of every cache as the code declares it.
func TestTheArchitectureShowsEveryCache(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := Markdown(); !strings.Contains(string(doc), want) {
		t.Errorf("docs/architecture.md does not show the table of caches as the code declares it; its section should read:\n%s", want)
	}
	if got, want := len(Table()), len(managerEntries)+len(sides); got != want {
		t.Errorf("%d rows, want %d", got, want)
	}
}

var myProxy = schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"}

// Every kind the manager's cache selects by an option of its own has an event filter declared
// for it; one without is refused, rather than falling under the release objects' filter.
func TestEveryKindSelectedApartHasItsOwnFilter(t *testing.T) {
	opts, newCache := Manager([]watches.Watch{{GroupVersionKind: myProxy}}, nil, shard.Shard{})
	opts.Scheme = scheme.Scheme
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(myProxy, meta.RESTScopeNamespace)
	opts.Mapper = mapper
	if len(opts.ByObject) != 1 {
		t.Fatalf("%d kinds selected apart, want 1 (MyProxy)", len(opts.ByObject))
	}
	if _, err := newCache(&rest.Config{Host: "https://127.0.0.1:1"}, opts); err != nil {
		t.Fatalf("the declared kinds are refused: %v", err)
	}
	undeclared := &unstructured.Unstructured{}
	undeclared.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Other"})
	opts.ByObject[undeclared] = cache.ByObject{}
	if _, err := newCache(&rest.Config{Host: "https://127.0.0.1:1"}, opts); err == nil || !strings.Contains(err.Error(), "Other") {
		t.Errorf("a kind selected apart without a filter of its own: %v, want refused by name", err)
	}
}

func TestIdentityKeepsWhichObjectItIs(t *testing.T) {
	now := metav1.Now()
	full := func() *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "ns", UID: "u", ResourceVersion: "7",
			DeletionTimestamp: &now, Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
			OwnerReferences: []metav1.OwnerReference{{Name: "o"}}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	}
	got, _ := Identity(full())
	m := got.(*metav1.PartialObjectMetadata)
	if m.Name != "n" || m.Namespace != "ns" || m.UID != "u" || m.ResourceVersion != "7" || m.DeletionTimestamp == nil ||
		m.Labels != nil || m.Annotations != nil || m.OwnerReferences != nil || m.ManagedFields != nil {
		t.Errorf("Identity kept %+v", m.ObjectMeta)
	}
	got, _ = IdentityAndLinks(full())
	m = got.(*metav1.PartialObjectMetadata)
	if m.Name != "n" || m.Labels["a"] != "b" || len(m.OwnerReferences) != 1 || m.Annotations != nil || m.ManagedFields != nil {
		t.Errorf("IdentityAndLinks kept %+v", m.ObjectMeta)
	}
	var typed client.Object = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}}}
	if out, _ := Identity(typed); out != typed || typed.GetLabels()["a"] != "b" {
		t.Errorf("Identity changed an object that is not metadata only")
	}
}

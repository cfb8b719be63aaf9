package caches

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestStripManagedFields(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
		"name": "p", "managedFields": []any{map[string]any{"manager": "kubectl"}}}}}
	if _, err := StripManagedFields(u); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "managedFields"); found || u.GetName() != "p" {
		t.Errorf("after stripping: %v", u.Object)
	}
	typed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	if _, err := StripManagedFields(typed); err != nil {
		t.Fatal(err)
	}
	if typed.ManagedFields != nil || typed.Name != "p" {
		t.Errorf("after stripping: %+v", typed.ObjectMeta)
	}
	if _, err := StripManagedFields(&unstructured.Unstructured{Object: map[string]any{}}); err != nil {
		t.Errorf("an object without metadata: %v", err)
	}
}

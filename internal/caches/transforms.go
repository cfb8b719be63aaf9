package caches

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// StripManagedFields drops managed fields, often the larger part of an object, from objects
// entering a cache. It does what cache.TransformStripManagedFields does, but for unstructured
// objects it deletes the field instead of first decoding the whole list to know whether it is
// there: every watch event of every cached custom resource passes through here.
func StripManagedFields(in any) (any, error) {
	if u, ok := in.(*unstructured.Unstructured); ok {
		if meta, ok := u.Object["metadata"].(map[string]any); ok {
			delete(meta, "managedFields")
		}
		return in, nil
	}
	return cache.TransformStripManagedFields()(in)
}

// Identity keeps of an object's metadata only which object it is and whether it changed (name,
// namespace, UID, resourceVersion, deletion): for metadata caches whose readers need nothing
// more, where labels, annotations and managed fields of every object of a kind would otherwise
// stay in memory.
func Identity(obj any) (any, error) { return identity(obj, false), nil }

// IdentityAndLinks is Identity that also keeps labels and owner references, for readers that
// find an object's owner through them.
func IdentityAndLinks(obj any) (any, error) { return identity(obj, true), nil }

func identity(obj any, links bool) any {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj
	}
	kept := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID,
		ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp}
	if links {
		kept.Labels, kept.OwnerReferences = m.Labels, m.OwnerReferences
	}
	m.ObjectMeta = kept
	return m
}

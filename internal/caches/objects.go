package caches

import (
	"strings"

	sdkhandler "github.com/operator-framework/operator-lib/handler"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// StripManagedFields drops managed fields, often the larger part of an object, from objects
// entering a cache. It does what cache.TransformStripManagedFields does, but for unstructured
// objects it deletes the field instead of first decoding the whole list to know whether it is
// there: every watch event of every cached custom resource passes through here.
func StripManagedFields(in any) (any, error) {
	if u, ok := in.(*unstructured.Unstructured); ok {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
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

// The Go type the manager's cache holds the objects of a release in: kinds the scheme knows
// (Deployments, Services, ConfigMaps...) as their typed structs, other kinds as unstructured
// objects. The objects of a fleet's releases are most of what the operator holds in memory, and
// nested maps take about twice the memory of the same object as a struct. Every watch of release
// objects must ask ReleaseObject for its object, so that one kind has one informer.

// ReleaseObject returns an empty object of the kind, in the type the cache holds it in.
func ReleaseObject(scheme *runtime.Scheme, gvk schema.GroupVersionKind) client.Object {
	if o, err := scheme.New(gvk); err == nil {
		if obj, ok := o.(client.Object); ok {
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			return obj
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// Content returns the object as the nested maps of its JSON form, with its apiVersion and kind
// (objects read from a cache of typed objects may have none). An unstructured object's own
// content is returned, not a copy: callers only read it.
func Content(obj client.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		return u.UnstructuredContent(), nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return m, nil
}

// OwnerRequests maps a release object to the custom resource of kind owner it points at, as
// the owner-reference post-renderer points it: its controller reference (in the object's own
// namespace, for a namespaced owner), or, byAnnotations, operator-sdk's owner annotations
// where it carries no reference. It reads as controller-runtime's EnqueueRequestForOwner
// (OnlyControllerOwner) and operator-lib's EnqueueRequestForAnnotation read.
func OwnerRequests(owner schema.GroupKind, namespaced, byAnnotations bool) func(client.Object) []reconcile.Request {
	return func(obj client.Object) []reconcile.Request {
		if ref := metav1.GetControllerOf(obj); ref != nil {
			gv, err := schema.ParseGroupVersion(ref.APIVersion)
			if err != nil || ref.Kind != owner.Kind || gv.Group != owner.Group {
				return nil
			}
			key := types.NamespacedName{Name: ref.Name}
			if namespaced {
				key.Namespace = obj.GetNamespace()
			}
			return []reconcile.Request{{NamespacedName: key}}
		}
		a := obj.GetAnnotations()
		if !byAnnotations || a[sdkhandler.TypeAnnotation] != owner.String() || strings.TrimSpace(a[sdkhandler.NamespacedNameAnnotation]) == "" {
			return nil
		}
		ns, name, found := strings.Cut(a[sdkhandler.NamespacedNameAnnotation], "/")
		if !found {
			ns, name = "", ns
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	}
}

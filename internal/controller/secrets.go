package controller

import (
	"context"
	"slices"

	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/example/myproxy-operator/internal/chartapi"
)

// WatchCheckedSecrets re-reconciles the custom resources whose checked values (paths, from the
// secret checks of kind.yaml) name a Secret when that Secret changes, so that creating a missing
// Secret recovers at once instead of after the backoff. It watches Secret metadata in secrets
// (caches.SecretMetadata) and finds the custom resources in crs (the manager's cache).
// A kind without secret checks gets no watch.
func WatchCheckedSecrets(secrets, crs cache.Cache, gvk schema.GroupVersionKind, checks []chartapi.Check) reconciler.ControllerSetupFunc {
	var paths []string
	for _, c := range checks {
		if c.Secret != nil {
			paths = append(paths, c.Secret.Value)
		}
	}
	return func(ctrl reconciler.ControllerSetup) error {
		if len(paths) == 0 {
			return nil
		}
		return ctrl.Watch(source.Kind(secrets, client.Object(secretMetadata()),
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, secret client.Object) []reconcile.Request {
				return referencing(ctx, crs, gvk, paths, secret)
			})))
	}
}

func secretMetadata() *metav1.PartialObjectMetadata {
	return metadataOf(corev1.SchemeGroupVersion.WithKind("Secret"))
}

func referencing(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, paths []string, secret client.Object) []reconcile.Request {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, &list, client.InNamespace(secret.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var requests []reconcile.Request
	for _, item := range list.Items {
		spec, _ := item.Object["spec"].(map[string]any)
		if slices.ContainsFunc(paths, func(p string) bool { return chartapi.ValueAt(spec, p) == secret.GetName() }) {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&item)})
		}
	}
	return requests
}

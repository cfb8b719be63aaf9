package values

import (
	"context"

	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// WatchTLSSecrets re-reconciles the custom resources whose spec.tls.secretName names a Secret
// when that Secret changes, so that creating a missing Secret recovers at once instead of after
// the backoff. The Secret informer is the one the Helm reconciler already runs.
func WatchTLSSecrets(c cache.Cache, gvk schema.GroupVersionKind) reconciler.ControllerSetupFunc {
	return func(ctrl reconciler.ControllerSetup) error {
		return ctrl.Watch(source.Kind(c, client.Object(&corev1.Secret{}),
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, secret client.Object) []reconcile.Request {
				return referencing(ctx, c, gvk, secret)
			})))
	}
}

func referencing(ctx context.Context, c client.Reader, gvk schema.GroupVersionKind, secret client.Object) []reconcile.Request {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, &list, client.InNamespace(secret.GetNamespace())); err != nil {
		return nil
	}
	var requests []reconcile.Request
	for _, item := range list.Items {
		spec, _, _ := unstructured.NestedMap(item.Object, "spec")
		if TLSSecretName(spec) == secret.GetName() {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&item)})
		}
	}
	return requests
}

package controller

import (
	"context"
	"fmt"

	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/names"
)

// newRecordCache returns the release record cache (caches.ReleaseRecords), indexed by release.
func newRecordCache(mgr manager.Manager, namespaces map[string]cache.Config) (cache.Cache, error) {
	c, err := caches.New(mgr, namespaces, caches.ReleaseRecords)
	if err != nil {
		return nil, err
	}
	if err := c.IndexField(context.Background(), secretMetadata(), helmconfig.RecordReleaseIndex, func(o client.Object) []string {
		if release := o.GetLabels()[names.RecordNameLabel]; release != "" {
			return []string{release}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("indexing release records by release: %w", err)
	}
	return c, nil
}

// watchReleaseRecords reconciles a custom resource when one of its release records is created,
// changed or deleted by anyone but this operator (own): a deleted record of a deployed release
// is then installed again over its objects (Helm adopts them), a hand-edited or corrupted one
// is reported in the Irreconcilable condition, a revision made by hand with `helm upgrade` is
// set back at once. The operator's own record writes wake nothing.
func watchReleaseRecords(records cache.Cache, gvk schema.GroupVersionKind, own *helmconfig.Records, waiters *actionclient.Waiters) reconciler.ControllerSetupFunc {
	wake := func(record client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if name := recordOwner(record, gvk); name != "" {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: record.GetNamespace(), Name: name}})
		}
	}
	h := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			// The initial list brings every record once at start, when every resource is reconciled anyway.
			if !e.IsInInitialList && !own.OwnWrite(client.ObjectKeyFromObject(e.Object), e.Object.GetResourceVersion()) {
				wake(e.Object, q)
			}
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !own.OwnWrite(client.ObjectKeyFromObject(e.ObjectNew), e.ObjectNew.GetResourceVersion()) {
				wake(e.ObjectNew, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !own.OwnDelete(e.Object.GetUID()) {
				wake(e.Object, q)
			}
			waiters.ReleaseGone(e.Object.GetNamespace(), e.Object.GetLabels()[names.RecordNameLabel])
		},
	}
	return func(ctrl reconciler.ControllerSetup) error {
		return ctrl.Watch(source.Kind(records, client.Object(secretMetadata()), h))
	}
}

// recordOwner names the custom resource of kind gvk that a record belongs to: its controller
// (the plugins set one on every record they write), or for a record made by hand with the Helm
// CLI, which has none, the resource named as the release; "" when it is another kind's.
func recordOwner(record client.Object, gvk schema.GroupVersionKind) string {
	if ref := metav1.GetControllerOf(record); ref != nil {
		if schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind) != gvk {
			return ""
		}
		return ref.Name
	}
	return record.GetLabels()[names.RecordNameLabel]
}

package eventfilter

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/example/myproxy-operator/internal/ownwrites"
)

// ownerReadTimeout bounds the cache read of a deleted object's owner.
const ownerReadTimeout = 5 * time.Second

// ReleaseObjectDeletes is the Delete filter of the kinds releases render: a delete reaches the
// reconcilers unless the operator's own Helm action made it (own: an uninstall, the rollback of
// a failed install, an upgrade dropping the object), so that any other delete of a release
// object is corrected at once, whatever the state of the release. The own deletes of a failing
// install are what must not pass: each would start the next attempt at once, and the retries
// would never back off. They do pass while the owning custom resource (of one of the kinds) is
// being deleted, when an uninstall may wait for the objects to go (uninstall-wait).
//
// Objects of kinds the scheme knows may come from their informer without apiVersion and kind
// (the cache holds them typed); their kind is then the scheme's.
func ReleaseObjectDeletes(reader client.Reader, scheme *runtime.Scheme, kinds map[schema.GroupVersionKind]bool, own *ownwrites.Registry) func(obj any) bool {
	return func(obj any) bool {
		var err error
		if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		o, ok := obj.(metav1.Object)
		if !ok {
			return true
		}
		ref := metav1.GetControllerOf(o)
		if ref == nil {
			return true
		}
		gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
		if !kinds[gvk] {
			return true
		}
		ro, ok := obj.(runtime.Object)
		if !ok {
			return true
		}
		kind := ro.GetObjectKind().GroupVersionKind()
		if kind.Empty() {
			if kind, err = apiutil.GVKForObject(ro, scheme); err != nil {
				return true
			}
		}
		if !own.OwnDelete(ownwrites.Key{GroupKind: kind.GroupKind(),
			NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}}) {
			return true // drift: someone else deleted it
		}
		owner := &unstructured.Unstructured{}
		owner.SetGroupVersionKind(gvk)
		ctx, cancel := context.WithTimeout(context.Background(), ownerReadTimeout)
		defer cancel()
		if err = reader.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}, owner); err != nil {
			return false // gone (or unreadable): nothing waits for this object
		}
		return owner.GetDeletionTimestamp() != nil
	}
}

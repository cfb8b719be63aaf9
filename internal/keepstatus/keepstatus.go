// Package keepstatus keeps the status fields that helm-operator-plugins' reconciler does not
// own when it writes status.
//
// The reconciler's status updater rewrites a custom resource's status as exactly
// {conditions, deployedRelease} (its own schema) and sends it with Update, so every other field
// (the chart's declared fields, observedGeneration, written by the status controller) would
// vanish from the resource until the status controller puts it back: a reader of status.url
// would see it disappear on every upgrade. The reconciler takes its client as an option
// (reconciler.WithClient); Client wraps it so that such an Update carries those fields over.
package keepstatus

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
)

// reconcilerOwned are the status fields helm-operator-plugins' status updater writes; it writes
// status as these and nothing else.
var reconcilerOwned = []string{names.StatusConditions, names.StatusDeployedRelease}

// Client returns c, whose status Updates of gvk's objects keep the status fields the updater
// does not own, as cached reads them. They are carried over only from the cached object of the
// same resourceVersion as the one written: an Update is refused unless the stored object is at
// that version, so the fields carried over are exactly the stored ones, and the write changes
// only what the updater meant to change. When the cache holds another version, the Update goes
// out as the updater built it (and the status controller restores the fields, as it would
// without this client).
func Client(c client.Client, cached client.Reader, gvk schema.GroupVersionKind) client.Client {
	return &keeping{Client: c, cached: cached, gvk: gvk}
}

type keeping struct {
	client.Client
	cached client.Reader
	gvk    schema.GroupVersionKind
}

func (k *keeping) Status() client.SubResourceWriter {
	return &statusWriter{SubResourceWriter: k.Client.Status(), k: k}
}

type statusWriter struct {
	client.SubResourceWriter
	k *keeping
}

func (w *statusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if u, ok := obj.(*unstructured.Unstructured); ok && u.GroupVersionKind() == w.k.gvk {
		w.k.carryOver(ctx, u)
	}
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

// carryOver copies into u's status the fields of the cached object's status that the updater
// does not own and u's status lacks, when the cached object is at u's resourceVersion. A cache
// that cannot answer leaves u as it is.
func (k *keeping) carryOver(ctx context.Context, u *unstructured.Unstructured) {
	version := u.GetResourceVersion()
	if version == "" {
		return
	}
	cached := &unstructured.Unstructured{}
	cached.SetGroupVersionKind(k.gvk)
	// Only read: the values carried over are copied.
	if err := k.cached.Get(ctx, client.ObjectKeyFromObject(u), cached, client.UnsafeDisableDeepCopy); err != nil ||
		cached.GetResourceVersion() != version {
		return
	}
	was, _ := cached.Object["status"].(map[string]any)
	now, _ := u.Object["status"].(map[string]any)
	for field, v := range was {
		if slices.Contains(reconcilerOwned, field) {
			continue
		}
		if _, set := now[field]; set {
			continue
		}
		if now == nil {
			now = map[string]any{}
			u.Object["status"] = now
		}
		now[field] = runtime.DeepCopyJSONValue(v)
	}
}

package status

// The writes of helm-operator-plugins' status updater, the other writer of a custom resource's
// status (the Reconciler is the first).
//
// The updater rewrites a custom resource's status as exactly {conditions, deployedRelease}
// (its own schema) and sends it with Update, so every other field (the chart's declared fields,
// observedGeneration, Ready) would vanish from the resource until the Reconciler puts it back:
// a reader of status.url would see it disappear on every upgrade. The plugins' reconciler takes
// its client as an option (reconciler.WithClient), which the operator wraps (package
// controller) so that PluginWrites prepares such an Update: it carries those fields over, and,
// when it is given the Reconciler, brings them up to date in the same write: the release was just installed or upgraded (the post hooks, which run before the
// updater writes, told the Reconciler its objects and generation), and the Reconciler would
// otherwise patch the status a moment later for the same news. One write instead of two.
//
// The updater also puts the release's whole rendered manifest into status.deployedRelease,
// where anyone who may read the custom resource (the view role) would read every object the
// chart renders, Secrets included, and every cached custom resource would hold it. PluginWrites
// leaves it out of every status Update, and the CRD's status schema has no such field. The
// updater decides to write by comparing {name, manifest} with the stored status, which no longer
// holds a manifest; so an Update that, once the manifest is left out, would store exactly the
// status already stored (the cached object at the written resourceVersion) is not sent: the
// apiserver would keep the object unchanged, and the resource would be written at every
// reconcile for nothing.

import (
	"bytes"
	"context"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
)

// PluginWrites prepares the status Updates of gvk's objects: they keep the status fields the
// updater does not own, as cached reads them, and then fill (when not nil) brings them up to
// date. They are carried over only from the cached object of the same resourceVersion as the
// one written: an Update is refused unless the stored object is at that version, so the fields
// carried over are exactly the stored ones. When the cache holds another version, only fill's
// fields go out with the updater's (and the Reconciler restores the rest, as it would without
// them).
type PluginWrites struct {
	Cached client.Reader
	GVK    schema.GroupVersionKind
	// Fill brings a status about to be written up to date with the fields it owns
	// (Reconciler.Fill).
	Fill func(ctx context.Context, u *unstructured.Unstructured)
}

// Prepare makes obj, a status Update of the updater, what is sent, and reports whether it
// changes the stored status: false when it would store exactly the status the cache holds at
// obj's version.
func (p PluginWrites) Prepare(ctx context.Context, obj client.Object) (changes bool) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GroupVersionKind() != p.GVK {
		return true
	}
	unstructured.RemoveNestedField(u.Object, "status", names.StatusDeployedRelease, names.DeployedReleaseManifest)
	// The cached object is shared with the cache: only read it.
	cached := &unstructured.Unstructured{}
	cached.SetGroupVersionKind(p.GVK)
	err := p.Cached.Get(ctx, client.ObjectKeyFromObject(u), cached, client.UnsafeDisableDeepCopy)
	atVersion := err == nil && u.GetResourceVersion() != "" && cached.GetResourceVersion() == u.GetResourceVersion()
	if atVersion {
		carryOver(cached, u)
	}
	if p.Fill != nil {
		p.Fill(ctx, u)
	}
	return !atVersion || !sameStatus(cached, u)
}

// sameStatus reports whether a and b have the same status, as JSON (maps serialise with sorted
// keys, so equal statuses give equal bytes whatever built them).
func sameStatus(a, b *unstructured.Unstructured) bool {
	ja, errA := json.Marshal(a.Object["status"])
	jb, errB := json.Marshal(b.Object["status"])
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// carryOver copies into u's status the fields of the cached object's status that the updater
// does not own and u's status lacks.
func carryOver(cached, u *unstructured.Unstructured) {
	was, _ := cached.Object["status"].(map[string]any)
	now, _ := u.Object["status"].(map[string]any)
	for field, v := range was {
		// u's own fields stay, and conditions and deployedRelease are the plugins' updater's to write.
		if _, set := now[field]; set || field == names.StatusConditions || field == names.StatusDeployedRelease {
			continue
		}
		if now == nil {
			now = map[string]any{}
			u.Object["status"] = now
		}
		now[field] = runtime.DeepCopyJSONValue(v)
	}
}

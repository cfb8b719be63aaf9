package status

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/shard"
)

// AppliedGenerations remembers, per custom resource, the metadata.generation that the Helm reconciler
// last applied successfully, which becomes status.observedGeneration, and the objects of the
// release it applied. It is filled by a post hook of the Helm reconciler, which
// runs after every successful install, upgrade or reconcile, before the reconciler writes its
// Deployed condition. After a restart it fills again: the reconciler reconciles every resource
// on start. The status follows those objects, and a status update follows every change of a
// Deployment's status, so a release's manifest is parsed only when it changes: the manifest
// itself stays in the operator (it is not kept in status, see status.PluginWrites).
type AppliedGenerations struct {
	applied *caches.Store[applied]
	gvk     schema.GroupVersionKind
	// events wake the status controller: the resources some time after each successful Helm
	// action on them, and those nudged (Reconciler.Nudge).
	events chan event.TypedGenericEvent[*unstructured.Unstructured]
	// namespaced tells the scope of the kinds of release objects.
	namespaced func(schema.GroupVersionKind) bool
}

// applied is what was applied last to a custom resource: a generation of one incarnation (UID)
// of it (a resource deleted and created again under its name starts afresh), and the objects of
// the release's manifest, parsed from the manifest of that digest.
type applied struct {
	uid        types.UID
	generation int64
	digest     [sha256.Size]byte
	refs       []Ref
}

// NewAppliedGenerations returns an empty record of the resources of gvk, registered in r;
// namespaced tells the scope of a kind.
func NewAppliedGenerations(r *caches.Remembered, gvk schema.GroupVersionKind, namespaced func(schema.GroupVersionKind) bool) *AppliedGenerations {
	return &AppliedGenerations{
		applied:    caches.NewStore[applied](r, "status_generations", gvk),
		gvk:        gvk,
		events:     make(chan event.TypedGenericEvent[*unstructured.Unstructured], 1024),
		namespaced: namespaced,
	}
}

// Applied records the applied generation and the release's objects, and wakes the status
// controller when either changed: a post hook of the Helm reconciler.
func (o *AppliedGenerations) Applied(obj *unstructured.Unstructured, rel *release.Release) error {
	key := client.ObjectKeyFromObject(obj)
	now := applied{uid: obj.GetUID(), generation: obj.GetGeneration(), digest: sha256.Sum256([]byte(rel.Manifest))}
	was, known := o.last(key)
	now.refs = was.refs
	if !known || was.digest != now.digest {
		// Parsed outside the lock, which holds up no other resource: the Helm reconciler
		// applies to one resource at a time, so no other record of key comes in between.
		var err error
		if now.refs, err = ParseManifest(rel.Manifest, key.Namespace, o.namespaced); err != nil {
			return err
		}
	}
	o.applied.Set(shard.Key{GVK: o.gvk, NamespacedName: key}, now)
	if !known || was.uid != now.uid || was.generation != now.generation || was.digest != now.digest {
		// After the updater's write, which carries most of it (see wakeDelay).
		copied := obj.DeepCopy()
		time.AfterFunc(wakeDelay, func() {
			select {
			case o.events <- event.TypedGenericEvent[*unstructured.Unstructured]{Object: copied}:
			default:
				// The queue is full; the status write that follows a change wakes the controller too.
			}
		})
	}
	return nil
}

// last returns what was last applied to a custom resource, if anything was since the process
// started.
func (o *AppliedGenerations) last(key types.NamespacedName) (applied, bool) {
	return o.applied.Get(shard.Key{GVK: o.gvk, NamespacedName: key})
}

// Forget drops a resource that is being deleted or gone.
func (o *AppliedGenerations) Forget(key types.NamespacedName) {
	o.applied.Delete(shard.Key{GVK: o.gvk, NamespacedName: key})
}

// Len returns the number of resources remembered.
func (o *AppliedGenerations) Len() int { return o.applied.Len() }

// Ref identifies one object of a release.
type Ref struct {
	GVK             schema.GroupVersionKind
	Namespace, Name string
}

func (r Ref) String() string { return r.GVK.Kind + "/" + r.Name }

// Opaque reports whether the operator does not cache objects of this kind: Secrets, whose data
// it never holds. They are taken as ready and expressions see no such object.
func (r Ref) Opaque() bool { return r.GVK.Group == "" && r.GVK.Kind == "Secret" }

// ReleaseObject is a rendered object and its live state (nil when the cluster has none).
type ReleaseObject struct {
	Ref  Ref
	Live map[string]any
	// Unfollowed: the object is outside the namespaces the operator watches, so its live state
	// is unknown (Live is nil) and no change of it wakes a reconcile.
	Unfollowed bool
}

// ParseManifest returns the objects a release manifest creates, in the order Helm installs
// them; a List stands for its items, as Helm builds it. Objects without a namespace are in the
// release's (namespace) unless their kind is cluster-scoped, which namespaced reports.
func ParseManifest(manifest, namespace string, namespaced func(schema.GroupVersionKind) bool) ([]Ref, error) {
	docs := releaseutil.SplitManifests(manifest)
	keys := slices.Collect(maps.Keys(docs))
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	refs := make([]Ref, 0, len(keys))
	for _, k := range keys {
		var doc manifestObject
		if err := yaml.Unmarshal([]byte(docs[k]), &doc); err != nil {
			return nil, fmt.Errorf("release manifest: %w", err)
		}
		for _, h := range doc.objects(nil) {
			ref := Ref{GVK: schema.FromAPIVersionAndKind(h.APIVersion, h.Kind), Namespace: h.Namespace, Name: h.Name}
			switch {
			case !namespaced(ref.GVK):
				ref.Namespace = ""
			case ref.Namespace == "":
				ref.Namespace = namespace
			}
			refs = append(refs, ref)
		}
	}
	return refs, nil
}

// manifestObject is what is read of each object of a manifest: its identity, and a List's items
// (a document whose items field is a list is one, as for Kubernetes' object builder).
type manifestObject struct {
	metav1.PartialObjectMetadata `json:",inline"`
	Items                        []manifestObject `json:"items"`
}

// objects appends to out the objects the document stands for: itself, or a List's items.
func (o manifestObject) objects(out []metav1.PartialObjectMetadata) []metav1.PartialObjectMetadata {
	switch {
	case o.Items != nil:
		for _, item := range o.Items {
			out = item.objects(out)
		}
	case o.Kind != "":
		out = append(out, o.PartialObjectMetadata)
	}
	return out
}

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

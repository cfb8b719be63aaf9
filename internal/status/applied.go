package status

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/names"
)

// AppliedGenerations remembers, per custom resource, the metadata.generation that the Helm reconciler
// last applied successfully, which becomes status.observedGeneration, and the objects of the
// release it applied (in Manifests). It is filled by a post hook of the Helm reconciler, which
// runs after every successful install, upgrade or reconcile, before the reconciler writes its
// Deployed condition. After a restart it fills again: the reconciler reconciles every resource
// on start.
type AppliedGenerations struct {
	mu          sync.Mutex
	generations map[types.NamespacedName]applied
	// events wake the status controller: the resources some time after each successful Helm
	// action on them, and those nudged (Reconciler.Nudge).
	events chan event.TypedGenericEvent[*unstructured.Unstructured]
	// Manifests are the objects of each applied release; namespaced tells their scope.
	Manifests  *ManifestRefs
	namespaced func(schema.GroupVersionKind) bool
}

// applied is a generation applied to one incarnation (UID) of a resource: a resource deleted
// and created again under its name starts afresh.
type applied struct {
	uid        types.UID
	generation int64
}

// NewAppliedGenerations returns an empty record; namespaced tells the scope of a kind.
func NewAppliedGenerations(namespaced func(schema.GroupVersionKind) bool) *AppliedGenerations {
	return &AppliedGenerations{
		generations: map[types.NamespacedName]applied{},
		events:      make(chan event.TypedGenericEvent[*unstructured.Unstructured], 1024),
		Manifests:   NewManifestRefs(),
		namespaced:  namespaced,
	}
}

// Applied records the applied generation and the release's objects, and wakes the status
// controller when either changed: a post hook of the Helm reconciler.
func (o *AppliedGenerations) Applied(obj *unstructured.Unstructured, rel *release.Release) error {
	key, now := client.ObjectKeyFromObject(obj), applied{uid: obj.GetUID(), generation: obj.GetGeneration()}
	objectsChanged, err := o.Manifests.Learn(key, rel.Manifest, o.namespaced)
	if err != nil {
		return err
	}
	o.mu.Lock()
	changed := o.generations[key] != now || objectsChanged
	o.generations[key] = now
	o.mu.Unlock()
	if changed {
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

// Generation returns the last applied generation of a resource, if any.
func (o *AppliedGenerations) Generation(key types.NamespacedName, uid types.UID) (int64, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.generations[key]
	return a.generation, ok && a.uid == uid
}

// Forget drops a resource that is being deleted or gone.
func (o *AppliedGenerations) Forget(key types.NamespacedName) {
	o.mu.Lock()
	delete(o.generations, key)
	o.mu.Unlock()
	o.Manifests.Forget(key)
}

// Len returns the number of resources remembered.
func (o *AppliedGenerations) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.generations)
}

// Ref identifies one object of a release.
type Ref struct {
	GVK             schema.GroupVersionKind
	Namespace, Name string
	// Managed is the object's managed label value in the manifest (names.ManagedLabel).
	Managed string
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

// ManifestRefs parses release manifests into the objects they create, remembering the result
// per custom resource until its manifest changes: the status follows those objects, and a
// status update follows every change of a Deployment's status.
type ManifestRefs struct {
	mu     sync.Mutex
	parsed map[types.NamespacedName]parsedManifest
}

type parsedManifest struct {
	digest [sha256.Size]byte
	refs   []Ref
}

// NewManifestRefs returns an empty memo.
func NewManifestRefs() *ManifestRefs {
	return &ManifestRefs{parsed: map[types.NamespacedName]parsedManifest{}}
}

// Learn remembers the objects of the manifest of the release just applied to a custom resource,
// parsed unless it is the one last parsed for key, and reports whether they changed (it was
// parsed). Objects without a namespace are in the release's unless their kind is cluster-scoped,
// which namespaced reports. The status reads them with Known: the manifest itself stays in the
// operator (it is not kept in status, see status.PluginWrites).
func (m *ManifestRefs) Learn(key types.NamespacedName, manifest string, namespaced func(schema.GroupVersionKind) bool) (bool, error) {
	digest := sha256.Sum256([]byte(manifest))
	m.mu.Lock()
	p, ok := m.parsed[key]
	m.mu.Unlock()
	if ok && p.digest == digest {
		return false, nil
	}
	docs := releaseutil.SplitManifests(manifest)
	keys := slices.Collect(maps.Keys(docs))
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	refs := make([]Ref, 0, len(keys))
	for _, k := range keys {
		var h objectHeader
		if err := yaml.Unmarshal([]byte(docs[k]), &h); err != nil {
			return false, fmt.Errorf("release manifest: %w", err)
		}
		if h.Kind == "" {
			continue
		}
		ref := Ref{GVK: schema.FromAPIVersionAndKind(h.APIVersion, h.Kind), Namespace: h.Metadata.Namespace, Name: h.Metadata.Name,
			Managed: h.Metadata.Labels[names.ManagedLabel]}
		switch {
		case !namespaced(ref.GVK):
			ref.Namespace = ""
		case ref.Namespace == "":
			ref.Namespace = key.Namespace
		}
		refs = append(refs, ref)
	}
	m.mu.Lock()
	m.parsed[key] = parsedManifest{digest: digest, refs: refs}
	m.mu.Unlock()
	return true, nil
}

// Known returns the objects of the release last applied to a custom resource, if any was
// learnt since the process started.
func (m *ManifestRefs) Known(key types.NamespacedName) ([]Ref, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.parsed[key]
	return p.refs, ok
}

// Forget drops what is remembered of a custom resource.
func (m *ManifestRefs) Forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.parsed, key)
}

// Size is how many custom resources have a parsed manifest remembered.
func (m *ManifestRefs) Size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.parsed)
}

// objectHeader is what Learn reads of each object of a manifest.
type objectHeader struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
}

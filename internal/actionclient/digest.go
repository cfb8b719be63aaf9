package actionclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/shard"
)

// Release labels written with every install and upgrade:
//   - DigestLabel: the digest of every input the revision was rendered from (rendering code,
//     chart, values, the capabilities the chart reads);
//   - ChartDigestLabel: the digest of the rendering code and the chart alone;
//   - LookupsLabel: how many objects (or lists) the rendering read through `lookup`;
//   - RevisionLabel: the revision these labels were written for. Helm copies a release's labels
//     into the next revision, also one made by hand (`helm upgrade`, `helm rollback`): labels
//     whose revision is not their own describe another rendering and are not trusted.
const (
	DigestLabel      = "myproxy-operator.gateway.example.com/digest"
	ChartDigestLabel = "myproxy-operator.gateway.example.com/chart-digest"
	LookupsLabel     = "myproxy-operator.gateway.example.com/lookups"
	RevisionLabel    = "myproxy-operator.gateway.example.com/revision"
)

// Digests answers "is an upgrade needed?" from digests of everything a rendering reads, as
// Flux's helm-controller does, instead of a dry-run upgrade on every reconcile. One serves
// every reconcile of a kind.
//
// What a rendering reads besides chart and values:
//   - the rendering code: the running executable (Helm's engine, and the label and owner
//     reference the kube client adds), digested once per process (CodeVersion);
//   - the cluster's capabilities, as far as the chart's templates read them: the parsed
//     templates are searched for references to .Capabilities (AnalyseChart);
//   - every object a template read through `lookup`, whatever the template's spelling: the REST
//     client getter Helm's engine builds its lookup clients from records each read
//     (helmconfig.Recorder), and Lookups watches those objects and wakes the custom resources
//     whose rendering read one that changed.
//
// Every install and upgrade records the digest of all it was rendered from in release labels.
// The deployed revision is known to render from the inputs at hand when it carries the same
// digest (or this process saw it render them) and its rendering looked nothing up: a digest
// says nothing of what a lookup sees, so a rendering that read objects through `lookup` is
// rendered again at every check. The chart digest tells an upgrade that a new chart or new
// rendering code brought from one a spec change brought (the rollout's waves hold the former).
type Digests struct {
	// Lookups follows what renderings read through `lookup`.
	lookups *Lookups
	// stamp is what the operator adds to every object it writes beyond the chart: the managed
	// label value (names.ManagedLabel), which names the shard. The objects written depend on it.
	stamp string
	// known caches, by custom resource, the revision of its release known to render from the
	// inputs with a digest: seen rendered by this process, or read from the labels of a
	// revision written for itself.
	known *caches.Store[knownRendering]
	// chart is what the kind's chart contributes, computed once.
	chart     sync.Once
	chartInfo chartInfo
}

// NewDigests returns the digests of a kind's renderings, which read through lookups (nil: none
// followed) and carry stamp; what it knows is registered in remembered.
func NewDigests(remembered *caches.Remembered, gvk schema.GroupVersionKind, lookups *Lookups, stamp string) *Digests {
	return &Digests{lookups: lookups, stamp: stamp, known: caches.NewStore[knownRendering](remembered, "release_digests", gvk)}
}

// knownRendering: revision Version of a custom resource's release is what the inputs with
// Digest render.
type knownRendering struct {
	Version int
	Digest  string
}

// digests of one rendering: of all its inputs, and of the rendering code and chart alone; ok
// says they could be computed.
type digests struct {
	all, chart string
	ok         bool
}

// Forget drops what is remembered of a custom resource.
func (d *Digests) Forget(key shard.Key) {
	if d == nil {
		return
	}
	d.known.Delete(key)
	d.lookups.Forget(key)
}

// of returns the digests of the rendering of vals for r (not ok without Digests, or for values
// that cannot be encoded).
func (d *Digests) of(r *reconcile, vals map[string]any) digests {
	if d == nil {
		return digests{}
	}
	d.chart.Do(func() { d.chartInfo = chartInfo{sum: digestChart(r.c.o.Chart), use: AnalyseChart(r.c.o.Chart)} })
	valuesJSON, err := json.Marshal(vals) // map keys are encoded sorted
	if err != nil {
		return digests{}
	}
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s\x00", d.chartInfo.sum, d.stamp,
		CapabilitiesDigestInput(r.cfg.Capabilities, d.chartInfo.use.Reads(valuesJSON)))
	_, _ = h.Write(valuesJSON)
	// A label value holds at most 63 characters; 128 bits of SHA-256 make collisions moot.
	return digests{all: hex.EncodeToString(h.Sum(nil))[:32], chart: d.chartInfo.sum[:32], ok: true}
}

// knows reports whether cur is known to render from the inputs with digests dg. What the
// labels of cur prove is cached (known).
func (d *Digests) knows(key shard.Key, cur *release.Release, dg digests) bool {
	if d == nil || !dg.ok {
		return false
	}
	if v, ok := d.known.Get(key); ok && v.Version == cur.Version {
		return v.Digest == dg.all
	}
	// Not seen by this process: the labels tell when they were written for cur, not copied from an
	// earlier revision (RevisionLabel), unless the rendering looked anything up.
	if cur.Labels[RevisionLabel] == strconv.Itoa(cur.Version) && cur.Labels[DigestLabel] == dg.all && cur.Labels[LookupsLabel] == "0" {
		d.known.Set(key, knownRendering{Version: cur.Version, Digest: dg.all})
		return true
	}
	return false
}

// remember records that revision version of r's release renders from r's digests, having read
// reads: known when it read nothing, else followed.
func (d *Digests) remember(r *reconcile, version int, reads []helmconfig.Read) {
	if d == nil || !r.known.dg.ok {
		return
	}
	if len(reads) == 0 {
		d.lookups.Forget(r.key)
		d.known.Set(r.key, knownRendering{Version: version, Digest: r.known.dg.all})
		return
	}
	d.known.Delete(r.key)
	if err := d.lookups.Follow(r.ctx, r.key, reads); err != nil {
		r.log.Error(err, "cannot follow what the rendering looked up; a change of it wakes nothing")
	}
}

// proven returns cur with the digest labels of dg, for a rendering that read lookups objects:
// what the check's dry run proved of the deployed revision, to record on it; nil when it
// carries them already, or there are no digests.
func proven(cur *release.Release, dg digests, lookups int) *release.Release {
	if !dg.ok || cur.Info.Status != rcommon.StatusDeployed {
		return nil
	}
	rel := *cur
	rel.Labels = labels.Merge(cur.Labels, digestLabels(dg, lookups, cur.Version))
	if maps.Equal(rel.Labels, cur.Labels) {
		return nil
	}
	return &rel
}

// recording starts recording what the rendering of an install or upgrade of revision reads,
// and returns the labels the revision is written with (nil without digests). The count of
// lookups follows the rendering: Helm keeps the labels map in the release it renders
// (install), or reads it after rendering (upgrade), and stores the record after rendering
// either way.
func (d *Digests) recording(r *reconcile, revision int) map[string]string {
	if d == nil {
		return nil
	}
	if !r.known.dg.ok {
		d.Forget(r.key)
		return nil
	}
	r.reads.Start()
	labels := digestLabels(r.known.dg, 0, revision)
	r.reads.OnRead(func(n int) { labels[LookupsLabel] = strconv.Itoa(n) })
	return labels
}

// rendered remembers what an install or upgrade rendered from.
func (d *Digests) rendered(r *reconcile, rel *release.Release, err error) {
	if d == nil || !r.known.dg.ok {
		return
	}
	r.reads.OnRead(nil)
	if err != nil || rel == nil {
		d.known.Delete(r.key)
		return
	}
	d.remember(r, rel.Version, r.reads.Reads())
}

// ChartDigest is the digest of a chart and of the rendering code, as releases rendered from them
// carry it in ChartDigestLabel.
func ChartDigest(chrt *chart.Chart) string { return digestChart(chrt)[:32] }

func digestLabels(d digests, lookups, revision int) map[string]string {
	return map[string]string{DigestLabel: d.all, ChartDigestLabel: d.chart, LookupsLabel: strconv.Itoa(lookups),
		RevisionLabel: strconv.Itoa(revision)}
}

// chartInfo is what a loaded chart contributes to digests.
type chartInfo struct {
	sum string // of the rendering code and every file of the chart
	use CapabilityUse
}

// digestChart hashes the rendering code and every file of a chart and of its dependencies, in
// name order.
func digestChart(chrt *chart.Chart) string {
	h := sha256.New()
	_, _ = io.WriteString(h, CodeVersion()+"\x00")
	var walk func(c *chart.Chart)
	walk = func(c *chart.Chart) {
		files := map[string][]byte{}
		for _, f := range c.Raw {
			files[f.Name] = f.Data
		}
		for _, t := range c.Templates {
			files["templates\x00"+t.Name] = t.Data // also for charts built in code, without Raw
		}
		if meta, err := json.Marshal(c.Metadata); err == nil {
			files["metadata\x00"] = meta
		}
		if vals, err := json.Marshal(c.Values); err == nil {
			files["values\x00"] = vals
		}
		for _, name := range slices.Sorted(maps.Keys(files)) {
			_, _ = fmt.Fprintf(h, "%s\x00%d\x00", name, len(files[name]))
			_, _ = h.Write(files[name])
		}
		for _, dep := range c.Dependencies() {
			_, _ = io.WriteString(h, "dependency\x00")
			walk(dep)
		}
	}
	walk(chrt)
	return hex.EncodeToString(h.Sum(nil))
}

// CodeVersion identifies the code that renders: a digest of the running executable, which holds
// Helm's template engine, the kube client and everything else that turns chart and values into
// the objects written. A new build of the operator changes it, so every release is checked once
// against the new code; nobody has to remember to bump a constant. When the executable cannot be
// read, the build information (module versions and sums, build settings) stands in.
var CodeVersion = sync.OnceValue(func() string {
	h := sha256.New()
	if exe, err := os.Executable(); err == nil {
		if f, err := os.Open(exe); err == nil {
			_, err = io.Copy(h, f)
			_ = f.Close()
			if err == nil {
				return hex.EncodeToString(h.Sum(nil))[:32]
			}
			h.Reset()
		}
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		_, _ = io.WriteString(h, info.String())
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
})

// capabilitiesField is the name under which Helm hands templates the cluster's capabilities.
const capabilitiesField = "Capabilities"

// CapabilityUse says which of the cluster's capabilities a chart's rendering may depend on.
// HelmVersion is not listed: it is part of CodeVersion.
type CapabilityUse struct {
	KubeVersion bool // .Capabilities.KubeVersion, or a kubeVersion constraint in Chart.yaml
	APIVersions bool // .Capabilities.APIVersions
	// ThroughTpl: the chart renders strings with `tpl`; whether those strings read
	// .Capabilities depends on the values, and Reads answers per rendering.
	ThroughTpl bool
	// filesMention: a file of the chart (which `tpl` may render) mentions .Capabilities.
	filesMention bool
}

// Any reports whether a change of the cluster's API may change a rendering of this chart.
func (u CapabilityUse) Any() bool { return u.KubeVersion || u.APIVersions || u.ThroughTpl }

// Reads returns the use for one rendering: with `tpl`, a chart file or a value that mentions
// .Capabilities counts as reading all of it (valuesJSON is the values, encoded).
func (u CapabilityUse) Reads(valuesJSON []byte) CapabilityUse {
	if u.ThroughTpl && (u.filesMention || bytes.Contains(valuesJSON, []byte(capabilitiesField))) {
		u.KubeVersion, u.APIVersions = true, true
	}
	return u
}

// AnalyseChart reports which capabilities the templates of a chart and its dependencies refer
// to, from their text. It errs on the side of "reads": a mention of Capabilities that is not
// followed by a field it names (kept in a variable, passed to a function, indexed by name, or in
// a template's plain text) counts as reading all of it, and the word tpl anywhere as rendering
// strings with `tpl`.
func AnalyseChart(chrt *chart.Chart) CapabilityUse {
	var use CapabilityUse
	var walkChart func(c *chart.Chart)
	walkChart = func(c *chart.Chart) {
		use.KubeVersion = use.KubeVersion || c.Metadata != nil && c.Metadata.KubeVersion != ""
		for _, t := range c.Templates {
			for _, field := range capabilityRefs.FindAllStringSubmatch(string(t.Data), -1) {
				switch field[1] {
				case "KubeVersion":
					use.KubeVersion = true
				case "APIVersions":
					use.APIVersions = true
				case "HelmVersion":
				default:
					use.KubeVersion, use.APIVersions = true, true
				}
			}
			use.ThroughTpl = use.ThroughTpl || tplCall.Match(t.Data)
		}
		use.filesMention = use.filesMention ||
			slices.ContainsFunc(c.Files, func(f *common.File) bool { return bytes.Contains(f.Data, []byte(capabilitiesField)) })
		for _, dep := range c.Dependencies() {
			walkChart(dep)
		}
	}
	walkChart(chrt)
	return use
}

var (
	// capabilityRefs finds each mention of the capabilities, and the field that follows it.
	capabilityRefs = regexp.MustCompile(capabilitiesField + `(?:\.([A-Za-z]+))?`)
	tplCall        = regexp.MustCompile(`\btpl\b`)
)

// CapabilitiesDigestInput is the part of caps that a rendering with this use reads, in a
// stable form to hash.
func CapabilitiesDigestInput(caps *common.Capabilities, use CapabilityUse) string {
	if caps == nil {
		return ""
	}
	var b strings.Builder
	if use.KubeVersion {
		fmt.Fprintf(&b, "kube\x00%s\x00", caps.KubeVersion.Version)
	}
	if use.APIVersions {
		b.WriteString("apis\x00")
		for _, v := range slices.Sorted(slices.Values(caps.APIVersions)) {
			b.WriteString(v)
			b.WriteByte(0)
		}
	}
	return b.String()
}

// Lookups watches the metadata of the objects that renderings looked up and wakes the custom
// resources whose rendering read an object that changed, so that they are rendered again.
//
// Its cache holds only the identity of objects of the looked-up kinds, in the watched
// namespaces, and starts a kind's informer at its first lookup. An object outside those
// namespaces wakes nothing when it changes.
type Lookups struct {
	cache  cache.Cache
	mapper meta.RESTMapper
	wake   func(shard.Key)

	mu        sync.Mutex
	followers map[string]map[shard.Key]struct{} // Read.Key() -> custom resources whose rendering read it
	followed  map[shard.Key][]string            // custom resource -> keys it follows
	watched   map[schema.GroupVersionKind]bool
}

// NewLookups creates a Lookups over c, a metadata cache of the watched namespaces
// (caches.Lookups). wake is called, from an informer's goroutine, for each custom resource
// whose rendering read an object that changed.
func NewLookups(c cache.Cache, mapper meta.RESTMapper, wake func(shard.Key)) *Lookups {
	return &Lookups{cache: c, mapper: mapper, wake: wake,
		followers: map[string]map[shard.Key]struct{}{}, followed: map[shard.Key][]string{}, watched: map[schema.GroupVersionKind]bool{}}
}

// syncTimeout bounds the wait for a kind's informer to sync. An informer that cannot list its
// kind (no permission to list or watch it) never syncs; a reconcile must not hang on it.
const syncTimeout = 10 * time.Second

// Follow makes cr follow the objects its latest rendering read (and only those): a change to
// any of them wakes it.
func (t *Lookups) Follow(ctx context.Context, cr shard.Key, reads []helmconfig.Read) error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	t.unfollowLocked(cr)
	for _, rd := range reads {
		k := rd.Key()
		t.followed[cr] = append(t.followed[cr], k)
		if t.followers[k] == nil {
			t.followers[k] = map[shard.Key]struct{}{}
		}
		t.followers[k][cr] = struct{}{}
	}
	t.mu.Unlock()
	for _, rd := range reads {
		if err := t.watch(ctx, rd.Resource); err != nil {
			return fmt.Errorf("watching %s, which the rendering looked up: %w", rd.Resource, err)
		}
	}
	return nil
}

// Forget drops what cr followed (its release is gone).
func (t *Lookups) Forget(cr shard.Key) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.unfollowLocked(cr)
	t.mu.Unlock()
}

// Following returns how many custom resources follow at least one object.
func (t *Lookups) Following() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.followed)
}

func (t *Lookups) unfollowLocked(cr shard.Key) {
	for _, k := range t.followed[cr] {
		delete(t.followers[k], cr)
		if len(t.followers[k]) == 0 {
			delete(t.followers, k)
		}
	}
	delete(t.followed, cr)
}

// watch starts, once per kind, the informer whose events wake followers.
func (t *Lookups) watch(ctx context.Context, gvr schema.GroupVersionResource) error {
	gvk, err := t.mapper.KindFor(gvr)
	if err != nil {
		return err
	}
	t.mu.Lock()
	done := t.watched[gvk]
	t.watched[gvk] = true
	t.mu.Unlock()
	if done {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	inf, err := t.cache.GetInformer(ctx, obj)
	if err == nil {
		_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { t.changed(gvr, o) },
			UpdateFunc: func(_, o any) { t.changed(gvr, o) },
			DeleteFunc: func(o any) { t.changed(gvr, o) },
		})
	}
	if err != nil {
		t.mu.Lock()
		delete(t.watched, gvk)
		t.mu.Unlock()
	}
	return err
}

// changed wakes the followers of an object: those that read it, and those that listed its
// namespace or the whole kind.
func (t *Lookups) changed(gvr schema.GroupVersionResource, obj any) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	keys := []string{
		helmconfig.Read{Resource: gvr, Namespace: o.GetNamespace(), Name: o.GetName()}.Key(),
		helmconfig.Read{Resource: gvr, Namespace: o.GetNamespace()}.Key(),
	}
	if o.GetNamespace() != "" {
		keys = append(keys, helmconfig.Read{Resource: gvr}.Key())
	}
	var woken []shard.Key
	t.mu.Lock()
	for _, k := range keys {
		woken = slices.AppendSeq(woken, maps.Keys(t.followers[k]))
	}
	t.mu.Unlock()
	for _, cr := range woken {
		t.wake(cr)
	}
}

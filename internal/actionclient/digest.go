package actionclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/example/myproxy-operator/internal/renderinputs"
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

// LookupTracker wakes a custom resource when an object its rendering read through `lookup`
// changes (renderinputs.Tracker).
type LookupTracker interface {
	Follow(ctx context.Context, cr renderinputs.CR, reads []renderinputs.Read) error
	Forget(cr renderinputs.CR)
}

// Digests answers "is an upgrade needed?" from digests of everything a rendering reads, as
// Flux's helm-controller does, instead of a dry-run upgrade on every reconcile. One serves
// every reconcile of a kind.
//
// Every install and upgrade records the digest of all it was rendered from (package
// renderinputs) in release labels. The deployed revision is known to render from the inputs at
// hand when it carries the same digest (or this process saw it render them) and its rendering
// looked nothing up: a rendering that read objects through `lookup` is rendered again at every
// check, and those objects are followed (Lookups), so that a change of one wakes its custom
// resource. The chart digest tells an upgrade that a new chart or new rendering code brought
// from one a spec change brought (the rollout's waves hold the former).
type Digests struct {
	// Lookups follows what renderings read through `lookup`.
	Lookups LookupTracker
	// Stamp is what the operator adds to every rendered object beyond the chart: the managed
	// label value (names.ManagedLabel), which names the shard. A rendering depends on it.
	Stamp string

	charts sync.Map // *chart.Chart -> chartInfo
	known  sync.Map // shard.Key -> knownRendering
}

// knownRendering: revision Version of a custom resource's release is what the inputs with
// Digest render.
type knownRendering struct {
	Version int
	Digest  string
}

// digests of one rendering: of all its inputs, and of the rendering code and chart alone.
type digests struct{ all, chart string }

// Forget drops what is remembered of a custom resource.
func (d *Digests) Forget(key shard.Key) {
	if d == nil {
		return
	}
	d.known.Delete(key)
	if d.Lookups != nil {
		d.Lookups.Forget(key)
	}
}

// Len returns the number of custom resources remembered.
func (d *Digests) Len() int {
	n := 0
	d.known.Range(func(any, any) bool { n++; return true })
	return n
}

// of returns the digests of a rendering of chrt with vals on c's Configuration; false when
// there are none (no Digests, a chart that cannot be analysed, values that cannot be encoded).
func (d *Digests) of(c *reconcileClient, chrt *chart.Chart, vals map[string]any) (digests, bool) {
	if d == nil {
		return digests{}, false
	}
	info := d.chartInfo(chrt)
	valuesJSON, err := json.Marshal(vals) // map keys are encoded sorted
	if info.err != nil || err != nil {
		return digests{}, false
	}
	var caps *chartutil.Capabilities
	if cfg := c.Config(); cfg != nil {
		caps = cfg.Capabilities
	}
	h := sha256.New()
	_, _ = io.WriteString(h, info.sum+"\x00")
	_, _ = io.WriteString(h, d.Stamp+"\x00")
	_, _ = io.WriteString(h, renderinputs.CapabilitiesDigestInput(caps, info.use.Reads(valuesJSON))+"\x00")
	_, _ = h.Write(valuesJSON)
	// A label value holds at most 63 characters; 128 bits of SHA-256 make collisions moot.
	return digests{all: hex.EncodeToString(h.Sum(nil))[:32], chart: info.sum[:32]}, true
}

// knows reports whether cur is known to render from the inputs with digests dg.
func (d *Digests) knows(key shard.Key, cur *release.Release, dg digests) bool {
	if v, ok := d.known.Load(key); ok && v.(knownRendering).Version == cur.Version {
		return v.(knownRendering).Digest == dg.all
	}
	// Not seen by this process: the labels tell when they were written for cur, not copied from an
	// earlier revision (RevisionLabel), unless the rendering looked anything up.
	if cur.Labels[RevisionLabel] == strconv.Itoa(cur.Version) && cur.Labels[DigestLabel] == dg.all && cur.Labels[LookupsLabel] == "0" {
		d.known.Store(key, knownRendering{Version: cur.Version, Digest: dg.all})
		return true
	}
	return false
}

// remember records that revision version renders from dg, having read reads: known when it
// read nothing, else followed.
func (d *Digests) remember(c *reconcileClient, version int, dg digests, reads []renderinputs.Read) {
	if len(reads) == 0 {
		d.Forget(c.key)
		d.known.Store(c.key, knownRendering{Version: version, Digest: dg.all})
		return
	}
	d.known.Delete(c.key)
	if d.Lookups == nil {
		return
	}
	if err := d.Lookups.Follow(c.ctx, c.key, reads); err != nil {
		logf.FromContext(c.ctx).Error(err, "cannot follow what the rendering looked up; a change of it wakes nothing")
	}
}

// prove remembers that cur renders from dg (a dry run rendered its manifest, reading reads),
// and returns cur with the digest labels to record on it, nil when it carries them.
func (d *Digests) prove(c *reconcileClient, cur *release.Release, dg digests, reads []renderinputs.Read) *release.Release {
	d.remember(c, cur.Version, dg, reads)
	rel := *cur
	rel.Labels = mergeLabels(cur.Labels, digestLabels(dg, len(reads), cur.Version))
	if maps.Equal(rel.Labels, cur.Labels) {
		return nil
	}
	return &rel
}

// recording is what one install or upgrade records: its digests and what its rendering reads.
type recording struct {
	dg       digests
	revision int
	reads    *renderinputs.Recorder // nil: the configuration records nothing
}

// recording starts recording what an action's rendering reads; nil without digests.
func (d *Digests) recording(c *reconcileClient, chrt *chart.Chart, vals map[string]any, revision int) *recording {
	dg, ok := d.of(c, chrt, vals)
	if !ok {
		d.Forget(c.key)
		return nil
	}
	return &recording{dg: dg, revision: revision, reads: c.recorder()}
}

// labels returns the labels of the revision the action writes. The count of lookups follows the
// rendering: Helm keeps the labels map in the release it renders (install), or reads it after
// rendering (upgrade), and stores the record after rendering either way.
func (r *recording) labels(labels map[string]string) map[string]string {
	out := mergeLabels(labels, digestLabels(r.dg, 0, r.revision))
	if r.reads == nil {
		out[LookupsLabel] = "unknown"
		return out
	}
	r.reads.OnRead(func(n int) { out[LookupsLabel] = strconv.Itoa(n) })
	return out
}

// rendered remembers what an install or upgrade rendered from.
func (d *Digests) rendered(c *reconcileClient, r *recording, rel *release.Release, err error) {
	if d == nil || r == nil {
		return
	}
	if r.reads != nil {
		r.reads.OnRead(nil)
	}
	if err != nil || rel == nil || r.reads == nil {
		d.known.Delete(c.key)
		return
	}
	d.remember(c, rel.Version, r.dg, r.reads.Reads())
}

// ChartDigest is the digest of a chart and of the rendering code, as releases rendered from them
// carry it in ChartDigestLabel.
func ChartDigest(chrt *chart.Chart) string { return digestChart(chrt)[:32] }

func digestLabels(d digests, lookups, revision int) map[string]string {
	return map[string]string{DigestLabel: d.all, ChartDigestLabel: d.chart, LookupsLabel: strconv.Itoa(lookups),
		RevisionLabel: strconv.Itoa(revision)}
}

func mergeLabels(labels, add map[string]string) map[string]string {
	out := make(map[string]string, len(labels)+len(add))
	maps.Copy(out, labels)
	maps.Copy(out, add)
	return out
}

// chartInfo is what a loaded chart contributes to digests; the reconciler loads its chart once.
type chartInfo struct {
	sum string // of the rendering code and every file of the chart
	use renderinputs.CapabilityUse
	err error
}

func (d *Digests) chartInfo(chrt *chart.Chart) chartInfo {
	if v, ok := d.charts.Load(chrt); ok {
		return v.(chartInfo)
	}
	use, err := renderinputs.AnalyseChart(chrt)
	info := chartInfo{sum: digestChart(chrt), use: use, err: err}
	d.charts.Store(chrt, info)
	return info
}

// digestChart hashes the rendering code and every file of a chart and of its dependencies, in
// name order.
func digestChart(chrt *chart.Chart) string {
	h := sha256.New()
	_, _ = io.WriteString(h, renderinputs.CodeVersion()+"\x00")
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

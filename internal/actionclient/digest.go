package actionclient

import (
	"bytes"
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

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	release "helm.sh/helm/v4/pkg/release/v1"

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
//   - the rendering code: the running executable (Helm's engine, the post-renderer, the label
//     added in the kube client), digested once per process (CodeVersion);
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
	Lookups *Lookups
	// Stamp is what the operator adds to every rendered object beyond the chart: the managed
	// label value (names.ManagedLabel), which names the shard. A rendering depends on it.
	Stamp string

	charts    sync.Map // *chart.Chart -> chartInfo
	known     sync.Map // shard.Key -> knownRendering
	following sync.Map // shard.Key -> struct{}: Lookups follows what its rendering read
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
	d.unfollow(key)
}

// unfollow has Lookups forget what key's rendering read, if it followed anything.
func (d *Digests) unfollow(key shard.Key) {
	if _, ok := d.following.LoadAndDelete(key); ok {
		d.Lookups.Forget(key)
	}
}

// Len returns the number of custom resources remembered.
func (d *Digests) Len() int {
	n := 0
	d.known.Range(func(any, any) bool { n++; return true })
	return n
}

// of returns the digests of the rendering of r's values; false when there are none (no
// Digests, values that cannot be encoded).
func (d *Digests) of(r *reconcile) (digests, bool) {
	if d == nil {
		return digests{}, false
	}
	info := d.chartInfo(r.c.o.Chart)
	valuesJSON, err := json.Marshal(r.vals) // map keys are encoded sorted
	if err != nil {
		return digests{}, false
	}
	h := sha256.New()
	_, _ = io.WriteString(h, info.sum+"\x00")
	_, _ = io.WriteString(h, d.Stamp+"\x00")
	_, _ = io.WriteString(h, CapabilitiesDigestInput(r.cfg.Capabilities, info.use.Reads(valuesJSON))+"\x00")
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

// remember records that revision version of r's release renders from r's digests, having read
// reads: known when it read nothing, else followed.
func (d *Digests) remember(r *reconcile, version int, reads []helmconfig.Read) {
	if len(reads) == 0 {
		d.unfollow(r.key)
		d.known.Store(r.key, knownRendering{Version: version, Digest: r.dg.all})
		return
	}
	d.known.Delete(r.key)
	d.following.Store(r.key, struct{}{})
	if err := d.Lookups.Follow(r.ctx, r.key, reads); err != nil {
		r.log.Error(err, "cannot follow what the rendering looked up; a change of it wakes nothing")
	}
}

// prove remembers that the deployed revision renders from r's digests (a dry run rendered its
// manifest, reading reads), and returns it with the digest labels to record on it, nil when it
// carries them.
func (d *Digests) prove(r *reconcile, reads []helmconfig.Read) *release.Release {
	d.remember(r, r.cur.Version, reads)
	rel := *r.cur
	rel.Labels = mergeLabels(r.cur.Labels, digestLabels(r.dg, len(reads), r.cur.Version))
	if maps.Equal(rel.Labels, r.cur.Labels) {
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
	if !r.digested {
		d.Forget(r.key)
		return nil
	}
	r.reads.Start()
	labels := digestLabels(r.dg, 0, revision)
	r.reads.OnRead(func(n int) { labels[LookupsLabel] = strconv.Itoa(n) })
	return labels
}

// rendered remembers what an install or upgrade rendered from.
func (d *Digests) rendered(r *reconcile, rel *release.Release, err error) {
	if d == nil || !r.digested {
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

func mergeLabels(labels, add map[string]string) map[string]string {
	out := make(map[string]string, len(labels)+len(add))
	maps.Copy(out, labels)
	maps.Copy(out, add)
	return out
}

// chartInfo is what a loaded chart contributes to digests; a kind loads its chart once.
type chartInfo struct {
	sum string // of the rendering code and every file of the chart
	use CapabilityUse
}

func (d *Digests) chartInfo(chrt *chart.Chart) chartInfo {
	if v, ok := d.charts.Load(chrt); ok {
		return v.(chartInfo)
	}
	info := chartInfo{sum: digestChart(chrt), use: AnalyseChart(chrt)}
	d.charts.Store(chrt, info)
	return info
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
// Helm's template engine, the post-renderer and everything else that turns chart and values
// into a manifest. A new build of the operator changes it, so every release is checked once
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
		if c.Metadata != nil && c.Metadata.KubeVersion != "" {
			use.KubeVersion = true
		}
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
		if slices.ContainsFunc(c.Files, func(f *common.File) bool { return bytes.Contains(f.Data, []byte(capabilitiesField)) }) {
			use.filesMention = true
		}
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

package actionclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/example/myproxy-operator/internal/renderinputs"
)

// Release labels written by the digesting client:
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

// LookupTracker follows the objects renderings read (renderinputs.Tracker).
type LookupTracker interface {
	Unchanged(ctx context.Context, reads []renderinputs.Read) bool
	Follow(ctx context.Context, cr renderinputs.CR, reads []renderinputs.Read) error
	Forget(cr renderinputs.CR)
}

// DigestOptions configure Digested.
type DigestOptions struct {
	// Lookups follows what renderings read through `lookup`; without it, a release whose
	// rendering read anything is rendered again at every reconcile.
	Lookups LookupTracker
	// DryRunOption is Helm's dry-run mode for the reconciler's "is an upgrade needed?" check
	// (watches.yaml dryRunOption); empty keeps the reconciler's ("server").
	DryRunOption string
	// Stamp is what the operator adds to every rendered object beyond the chart: the managed
	// label value (package managedlabel), which names the shard. A rendering depends on it.
	Stamp string
	// Memo holds what is remembered per custom resource; nil: a memo of its own.
	Memo *Memo
}

// Memo is what Digested remembers per custom resource (the rendering its release is known to
// be), shared by every reconcile of one kind. Uninstalls forget their resource; the owner of
// the memo forgets a resource that went without one (Forget).
type Memo struct {
	charts sync.Map // *chart.Chart -> chartInfo
	known  sync.Map // renderinputs.CR -> knownRendering
}

// Forget drops what is remembered of a custom resource.
func (m *Memo) Forget(cr renderinputs.CR) { m.known.Delete(cr) }

// Len returns the number of custom resources remembered.
func (m *Memo) Len() int {
	n := 0
	m.known.Range(func(any, any) bool { n++; return true })
	return n
}

// Digested returns a getter whose action clients decide "is an upgrade needed?" from digests,
// as Flux's helm-controller does, instead of a dry-run upgrade on every reconcile.
//
// The reconciler runs a dry-run upgrade before each reconcile of an installed release and
// compares manifests. That renders the chart, reads the release history several times and
// costs most of a reconcile's CPU. Every install and upgrade here records the digest of all it
// was rendered from (package renderinputs) in release labels, and the objects its rendering
// looked up are followed. When the deployed revision is known to render from the inputs at
// hand (same digest, and every looked-up object as the rendering saw it), the dry run is
// answered with that revision, which the reconciler reads as "unchanged"; drift of the objects
// is still corrected. Otherwise the dry run runs; when it renders the deployed manifest, that
// is remembered for the new inputs, so the next reconcile is answered again.
//
// The chart digest also tells an upgrade that a new chart or new rendering code brought (an
// operator upgrade) from one that a spec change brought. The former wait for Rollout, so that
// a new chart rolls through a fleet at a bounded rate instead of restarting every proxy at once.
func Digested(next helmclient.ActionClientGetter, o DigestOptions) helmclient.ActionClientGetter {
	if o.Memo == nil {
		o.Memo = &Memo{}
	}
	shared := &digestState{opts: o, Memo: o.Memo}
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		ac, err := next.ActionClientFor(ctx, obj)
		if err != nil {
			return nil, err
		}
		return &digestingClient{ActionInterface: ac, shared: shared, ctx: ctx, cr: crOf(obj)}, nil
	})
}

func crOf(obj client.Object) renderinputs.CR {
	if obj == nil {
		return renderinputs.CR{}
	}
	return renderinputs.CR{GVK: obj.GetObjectKind().GroupVersionKind(), NamespacedName: client.ObjectKeyFromObject(obj)}
}

// digestState is shared by every reconcile of one kind.
type digestState struct {
	opts DigestOptions
	*Memo
}

// knownRendering: revision Version of the custom resource's release is what the inputs with
// Digest render, as long as the objects in Reads are as they were.
type knownRendering struct {
	Version int
	Digest  string
	Reads   []renderinputs.Read
}

// digestingClient serves one reconcile of one resource.
type digestingClient struct {
	helmclient.ActionInterface
	shared *digestState
	ctx    context.Context // the reconcile's
	cr     renderinputs.CR
	// last is what the last Get returned, until an action changes the release. The reconciler
	// reads the release two or three times in a row; each read lists its revisions.
	last *release.Release
}

func (c *digestingClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	if c.last != nil && c.last.Name == name && len(opts) == 0 {
		return c.last, nil
	}
	rel, err := c.ActionInterface.Get(name, opts...)
	c.last = nil
	if err == nil && len(opts) == 0 {
		c.last = rel
	}
	return rel, err
}

func (c *digestingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	c.last = nil
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	if err == nil || errors.Is(err, driver.ErrReleaseNotFound) {
		c.forget()
	}
	return resp, err
}

func (c *digestingClient) forget() {
	c.shared.known.Delete(c.cr)
	if c.shared.opts.Lookups != nil {
		c.shared.opts.Lookups.Forget(c.cr)
	}
}

func (c *digestingClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.InstallOption) (*release.Release, error) {
	c.last = nil
	d, ok := c.digest(chrt, vals)
	if !ok {
		c.forget()
		return c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	}
	withLabels, rec := c.startRecording(d, 1) // an install is always revision 1
	opts = append(opts, func(i *action.Install) error { i.Labels = withLabels(i.Labels); return nil })
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	c.rendered(rel, err, d, rec)
	return rel, err
}

func (c *digestingClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.UpgradeOption) (*release.Release, error) {
	cur := named(c.last, name)
	dryRun := isDryRun(opts)
	if !dryRun {
		c.last = nil
	}
	d, ok := c.digest(chrt, vals)
	if !ok {
		c.forget()
		return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	}
	if dryRun {
		return c.check(cur, d, func(extra ...helmclient.UpgradeOption) (*release.Release, error) {
			return c.ActionInterface.Upgrade(name, namespace, chrt, vals, append(opts, extra...)...)
		})
	}
	next := 0 // unknown: the labels will not be trusted
	if cur != nil {
		next = cur.Version + 1 // Helm's next revision follows the last, which the reconciler read
	}
	withLabels, rec := c.startRecording(d, next)
	opts = append(opts, func(u *action.Upgrade) error { u.Labels = withLabels(u.Labels); return nil })
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	c.rendered(rel, err, d, rec)
	return rel, err
}

// check answers the reconciler's dry-run upgrade: with the deployed revision when it is known
// to render from these inputs, else with a real dry run (dryRun).
func (c *digestingClient) check(cur *release.Release, d digests,
	dryRun func(...helmclient.UpgradeOption) (*release.Release, error)) (*release.Release, error) {
	deployed := cur != nil && cur.Info != nil && cur.Info.Status == release.StatusDeployed
	if deployed && c.knows(cur, d) {
		return cur, nil
	}
	var extra []helmclient.UpgradeOption
	if o := c.shared.opts.DryRunOption; o != "" {
		extra = append(extra, func(u *action.Upgrade) error { u.DryRunOption = o; return nil })
	}
	rec := renderinputs.RecorderOf(c.Config())
	if rec != nil {
		rec.Start()
	}
	rel, err := dryRun(extra...)
	if err != nil || !deployed || rel == nil || rel.Manifest != cur.Manifest || rec == nil {
		return rel, err
	}
	// The deployed revision is what these inputs render: remember it, and say so in its
	// labels, so that a restarted operator knows it too when nothing was looked up.
	reads := rec.Reads()
	c.remember(cur.Version, d, reads)
	if cur.Labels[DigestLabel] != d.all || cur.Labels[ChartDigestLabel] != d.chart || !ownLabels(cur) {
		c.relabel(cur, d, reads)
	}
	return rel, nil
}

// knows reports whether cur is known to render from the inputs with digests d.
func (c *digestingClient) knows(cur *release.Release, d digests) bool {
	if v, ok := c.shared.known.Load(c.cr); ok {
		k := v.(knownRendering)
		if k.Version == cur.Version && k.Digest == d.all {
			return len(k.Reads) == 0 || (c.shared.opts.Lookups != nil && c.shared.opts.Lookups.Unchanged(c.ctx, k.Reads))
		}
		if k.Version == cur.Version {
			return false
		}
	}
	// Not seen by this process: the labels tell, unless the rendering looked anything up
	// (what it read is known only to the process that rendered it).
	if ownLabels(cur) && cur.Labels[DigestLabel] == d.all && cur.Labels[LookupsLabel] == "0" {
		c.shared.known.Store(c.cr, knownRendering{Version: cur.Version, Digest: d.all})
		return true
	}
	return false
}

// ownLabels reports whether cur's labels were written for cur, not copied from an earlier revision.
func ownLabels(cur *release.Release) bool {
	return cur.Labels[RevisionLabel] == strconv.Itoa(cur.Version)
}

func (c *digestingClient) remember(version int, d digests, reads []renderinputs.Read) {
	if len(reads) > 0 {
		if c.shared.opts.Lookups == nil {
			return // nobody would tell when they change
		}
		if err := c.shared.opts.Lookups.Follow(c.ctx, c.cr, reads); err != nil {
			logf.FromContext(c.ctx).Error(err, "cannot follow what the rendering looked up; it is rendered again at every reconcile")
			c.forget()
			return
		}
	} else if c.shared.opts.Lookups != nil {
		c.shared.opts.Lookups.Forget(c.cr)
	}
	c.shared.known.Store(c.cr, knownRendering{Version: version, Digest: d.all, Reads: reads})
}

// relabel records new digests on a revision proven to render from them. A failure costs only
// another dry run after a restart.
func (c *digestingClient) relabel(cur *release.Release, d digests, reads []renderinputs.Read) {
	rel := *cur
	rel.Labels = mergeLabels(cur.Labels, digestLabels(d, len(reads), cur.Version))
	if err := c.Config().Releases.Update(&rel); err != nil {
		logf.FromContext(c.ctx).V(1).Info("cannot record the new digest on the release", "error", err.Error())
		return
	}
	c.last = &rel
}

// startRecording starts recording what an action's rendering reads, and returns what sets the
// labels of the revision it writes. The count of lookups in those labels follows the recording:
// Helm keeps the labels map in the release it renders (install), or reads it after rendering
// (upgrade), and stores the record after rendering either way.
func (c *digestingClient) startRecording(d digests, revision int) (func(map[string]string) map[string]string, *renderinputs.Recorder) {
	rec := renderinputs.RecorderOf(c.Config())
	if rec == nil {
		return func(labels map[string]string) map[string]string {
			out := mergeLabels(labels, digestLabels(d, 0, revision))
			out[LookupsLabel] = "unknown"
			return out
		}, nil
	}
	rec.Start()
	return func(labels map[string]string) map[string]string {
		out := mergeLabels(labels, digestLabels(d, 0, revision))
		rec.OnRead(func(n int) { out[LookupsLabel] = strconv.Itoa(n) })
		return out
	}, rec
}

// rendered remembers what an install or upgrade rendered from.
func (c *digestingClient) rendered(rel *release.Release, err error, d digests, rec *renderinputs.Recorder) {
	if rec != nil {
		rec.OnRead(nil)
	}
	if err != nil || rel == nil || rec == nil {
		c.shared.known.Delete(c.cr)
		return
	}
	c.remember(rel.Version, d, rec.Reads())
}

// ChartDigest is the digest of a chart and of the rendering code, as releases rendered from them
// carry it in ChartDigestLabel.
func ChartDigest(chrt *chart.Chart) string { return digestChart(chrt)[:32] }

// digests of one rendering: of all its inputs, and of the rendering code and chart alone.
type digests struct{ all, chart string }

func digestLabels(d digests, lookups, revision int) map[string]string {
	return map[string]string{DigestLabel: d.all, ChartDigestLabel: d.chart, LookupsLabel: strconv.Itoa(lookups),
		RevisionLabel: strconv.Itoa(revision)}
}

func mergeLabels(labels, add map[string]string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, add)
	return out
}

// digest of the inputs of a rendering of chrt with vals on this client's Configuration; false
// when the chart cannot be analysed or the values cannot be encoded.
func (c *digestingClient) digest(chrt *chart.Chart, vals map[string]any) (digests, bool) {
	info := c.shared.chartInfo(chrt)
	if info.err != nil {
		return digests{}, false
	}
	valuesJSON, err := json.Marshal(vals) // map keys are encoded sorted
	if err != nil {
		return digests{}, false
	}
	var caps *chartutil.Capabilities
	if cfg := c.Config(); cfg != nil {
		caps = cfg.Capabilities
	}
	h := sha256.New()
	_, _ = io.WriteString(h, info.sum+"\x00")
	_, _ = io.WriteString(h, c.shared.opts.Stamp+"\x00")
	_, _ = io.WriteString(h, renderinputs.CapabilitiesDigestInput(caps, info.use.Reads(valuesJSON))+"\x00")
	_, _ = h.Write(valuesJSON)
	// A label value holds at most 63 characters; 128 bits of SHA-256 make collisions moot.
	return digests{all: hex.EncodeToString(h.Sum(nil))[:32], chart: info.sum[:32]}, true
}

// chartInfo is what a loaded chart contributes to digests; the reconciler loads its chart once.
type chartInfo struct {
	sum string // of the rendering code and every file of the chart
	use renderinputs.CapabilityUse
	err error
}

func (s *digestState) chartInfo(chrt *chart.Chart) chartInfo {
	if v, ok := s.charts.Load(chrt); ok {
		return v.(chartInfo)
	}
	use, err := renderinputs.AnalyseChart(chrt)
	info := chartInfo{sum: digestChart(chrt), use: use, err: err}
	s.charts.Store(chrt, info)
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

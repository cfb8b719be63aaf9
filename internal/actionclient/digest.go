package actionclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sync"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"golang.org/x/time/rate"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DigestLabel is the release label holding the digest of the chart and values a revision was
// rendered from; ChartDigestLabel holds the digest of the chart alone.
const (
	DigestLabel      = "myproxy-operator.gateway.example.com/digest"
	ChartDigestLabel = "myproxy-operator.gateway.example.com/chart-digest"
)

// renderingVersion is part of every digest. Change it when the operator changes what a release
// renders to for the same chart and values (post-renderers, install or upgrade options), so
// that every release is checked once more.
const renderingVersion = "1"

// Digested returns a getter whose action clients decide "is an upgrade needed?" from digests,
// as Flux's helm-controller does, instead of a dry-run upgrade on every reconcile.
//
// The reconciler runs a server-side dry-run upgrade before each reconcile of an installed
// release, and compares manifests. That renders the chart, reads the release history several
// times and costs most of a reconcile's CPU. Every install and upgrade here records the digest
// of its chart and values in a release label; when the deployed release carries the digest of
// the chart and values at hand, the dry run is answered with that release, which the
// reconciler reads as "unchanged" (drift of the objects is still corrected).
//
// Charts whose rendering reads the cluster (the lookup function) are always dry-run: their
// output can change with the same chart and values.
//
// The chart digest also tells an upgrade that a new chart brought (an operator upgrade) from
// one that a spec change brought. The former wait for rollout, when it is not nil, so that a new
// chart rolls through a fleet at a bounded rate instead of restarting every proxy at once.
func Digested(next helmclient.ActionClientGetter, rollout *rate.Limiter) helmclient.ActionClientGetter {
	charts := &chartDigests{}
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		ac, err := next.ActionClientFor(ctx, obj)
		if err != nil {
			return nil, err
		}
		return &digestingClient{ActionInterface: ac, charts: charts, ctx: ctx, rollout: rollout}, nil
	})
}

// digestingClient serves one reconcile of one resource.
type digestingClient struct {
	helmclient.ActionInterface
	charts  *chartDigests
	ctx     context.Context // the reconcile's
	rollout *rate.Limiter
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
	return c.ActionInterface.Uninstall(name, opts...)
}

func (c *digestingClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.InstallOption) (*release.Release, error) {
	c.last = nil
	if d, ok := c.digest(chrt, vals); ok {
		opts = append(opts, func(i *action.Install) error { i.Labels = withDigests(i.Labels, d); return nil })
	}
	return c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
}

func (c *digestingClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.UpgradeOption) (*release.Release, error) {
	cur := c.last
	if cur != nil && cur.Name != name {
		cur = nil
	}
	dryRun := isDryRun(opts)
	if !dryRun {
		c.last = nil
	}
	d, ok := c.digest(chrt, vals)
	if !ok {
		return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	}
	if dryRun {
		if cur != nil && cur.Info != nil && cur.Info.Status == release.StatusDeployed && cur.Labels[DigestLabel] == d.all {
			return cur, nil
		}
		return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	}
	if c.rollout != nil && cur != nil && cur.Labels[ChartDigestLabel] != d.chart {
		if err := c.rollout.Wait(c.ctx); err != nil {
			return nil, fmt.Errorf("waiting for the chart rollout rate limit: %w", err)
		}
	}
	opts = append(opts, func(u *action.Upgrade) error { u.Labels = withDigests(u.Labels, d); return nil })
	return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
}

// digests of one rendering: of chart and values, and of the chart alone.
type digests struct{ all, chart string }

func withDigests(labels map[string]string, d digests) map[string]string {
	return withLabel(withLabel(labels, DigestLabel, d.all), ChartDigestLabel, d.chart)
}

func withLabel(labels map[string]string, key, value string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[key] = value
	return out
}

// digest of the chart and values; false when the chart cannot be trusted to render the same
// from the same inputs, or the values cannot be encoded.
func (c *digestingClient) digest(chrt *chart.Chart, vals map[string]any) (digests, bool) {
	cd, ok := c.charts.of(chrt)
	if !ok {
		return digests{}, false
	}
	all, ok := valuesDigest(cd, vals)
	// A label value holds at most 63 characters; 128 bits of SHA-256 make collisions moot.
	return digests{all: all, chart: cd[:32]}, ok
}

func valuesDigest(chartDigest string, vals map[string]any) (string, bool) {
	h := sha256.New()
	_, _ = io.WriteString(h, renderingVersion+"\x00"+chartDigest+"\x00")
	if err := json.NewEncoder(h).Encode(vals); err != nil { // map keys are encoded sorted
		return "", false
	}
	return hex.EncodeToString(h.Sum(nil))[:32], true
}

// chartDigests remembers each loaded chart's digest: the reconciler loads its chart once.
type chartDigests struct {
	m sync.Map // *chart.Chart -> chartDigest
}

type chartDigest struct {
	sum        string
	usesLookup bool
}

func (cd *chartDigests) of(chrt *chart.Chart) (string, bool) {
	if v, ok := cd.m.Load(chrt); ok {
		d := v.(chartDigest)
		return d.sum, !d.usesLookup
	}
	d := digestChart(chrt)
	cd.m.Store(chrt, d)
	return d.sum, !d.usesLookup
}

// lookupCall matches a call of Helm's lookup template function.
var lookupCall = regexp.MustCompile(`\blookup\s+"`)

// digestChart hashes every file of a chart and of its dependencies, in name order.
func digestChart(chrt *chart.Chart) chartDigest {
	h := sha256.New()
	var d chartDigest
	var walk func(c *chart.Chart)
	walk = func(c *chart.Chart) {
		files := map[string][]byte{}
		for _, f := range c.Raw {
			files[f.Name] = f.Data
		}
		for _, t := range c.Templates {
			files["templates\x00"+t.Name] = t.Data // also for charts built in code, without Raw
			if lookupCall.Match(t.Data) {
				d.usesLookup = true
			}
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
	d.sum = hex.EncodeToString(h.Sum(nil))
	return d
}

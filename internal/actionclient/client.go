// Package actionclient is what happens to a custom resource's Helm release. helm-operator-plugins'
// reconciler asks its action client getter for a client at the beginning of every reconcile;
// the getter (Client.begin) gathers what is known of the release once, asks Decide once
// (decide.go), carries out the steps the reconciler does not know that come first (the claim,
// the unlock, the removal of a failed install), and returns one client whose every answer to
// the reconciler is a fact: the record as stored, or a rendering the chart makes of the values
// at hand. Each of the reconciler's calls is carried out as a step of that Decision, one small
// type per step, with Helm 4: install and the removal of a failed install (install.go),
// upgrade, rollback and the rollout's hold (upgrade.go), drift correction (drift.go), uninstall
// (uninstall.go). The reconciler speaks Helm 3's types; seam.go, the one file that knows them,
// converts.
//
// What the upstream client lacks is here too: the upgrade check answered from digests of every
// input of a rendering instead of a dry run (digest.go, lookups.go), releases left pending by a
// crash unlocked, hook objects deleted after an uninstall, uninstall-wait, the chart rollout's
// waves, and Events and metrics of every step (report.go).
package actionclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"helm.sh/helm/v4/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/shard"
)

// Options configure the action client of one kind.
type Options struct {
	// GVK is the kind; Chart its chart; Overrides, the watch's override values, set into every
	// spec.
	GVK       schema.GroupVersionKind
	Chart     *chart.Chart
	Overrides map[string]string
	// Translate turns a custom resource (overrides set) into values, after the chart's checks.
	Translate func(context.Context, *unstructured.Unstructured) (map[string]any, error)
	// Configs gives each custom resource's Helm configuration (helmconfig.Configs).
	Configs Configs
	// MaxHistory bounds the revisions kept per release (0: unbounded).
	MaxHistory int
	// DryRunOption is Helm's dry-run mode of the upgrade check (watches.yaml dryRunOption); ""
	// is the plugins' (server).
	DryRunOption string

	Recorder record.EventRecorder
	Metrics  *Metrics
	Unlock   SoleWriter
	// Shard, Claims, Writer and Running serve claims; a Shard that is not sharded claims nothing.
	Shard   shard.Shard
	Claims  *shard.Claims
	Writer  client.Writer
	Running shard.Liveness
	// Waves, when set, holds back the upgrades a new chart brings until the rollout admits them.
	Waves WaveGate
	// Digests, when set, answers the upgrade check from digests where they know; nil: every
	// check is a dry run (--fast-paths without digests).
	Digests *Digests
	// Remembered registers the client's per-resource stores (nil: none, for tests); Waiters are
	// woken when what blocks their release goes (nil: none, they retry at their backoff).
	Remembered *caches.Remembered
	Waiters    *Waiters
}

// Configs gives each custom resource's Helm configuration, and what records the lookups of its
// renderings; log receives Helm's own log lines.
type Configs interface {
	For(ctx context.Context, obj client.Object, log logr.Logger) (*action.Configuration, *helmconfig.Recorder, error)
}

// Client is the action client of one kind: the reconciler's action client getter (seam.go),
// and what each reconcile's client shares.
type Client struct {
	o Options
	// values are the values each reconcile built when it began, with the resourceVersion of
	// the custom resource they were built from: the reconciler's translator hands them over
	// for the same object at the same version (seam.go).
	values *caches.Store[built]
}

// built is what the values of a custom resource at a resourceVersion came to.
type built struct {
	version string
	vals    map[string]any
	err     error
}

// New returns the action client of a kind.
func New(o Options) *Client {
	return &Client{o: o, values: caches.NewStore[built](o.Remembered, "reconcile_values", o.GVK)}
}

// WaveGate decides which upgrades may go now (package rollout's Gate).
type WaveGate interface {
	// Holds reports whether an upgrade of obj must wait; specChanged says it renders values
	// other than the deployed release's. It writes nothing.
	Holds(obj client.Object, specChanged bool) bool
	// Decided tells that the reconcile of obj decided to upgrade it, or to hold its upgrade back
	// for its wave.
	Decided(obj client.Object, held bool)
	// UpToDate tells that obj's release renders what the chart at hand renders.
	UpToDate(obj client.Object)
	// Upgraded tells the outcome of an upgrade of obj's release.
	Upgraded(obj client.Object, err error)
}

// reconcile is the client of one reconcile of one custom resource: the answers to the
// reconciler's calls and the steps of the Decision, from what was known when it began.
type reconcile struct {
	c     *Client
	ctx   context.Context // the reconcile's
	log   logr.Logger
	obj   *unstructured.Unstructured
	key   shard.Key
	cfg   *action.Configuration
	reads *helmconfig.Recorder

	known    known
	decision Decision
	// stored is the release's last revision as stored (nil: none), as read when the reconcile
	// began, or again after a step wrote it (stale); storedErr what reading it failed with.
	stored    *release.Release
	storedErr error
	stale     bool
	// claimed: this reconcile wrote its shard's claim.
	claimed bool
}

// begin starts a reconcile of obj: it gathers what is known, decides, carries out the steps
// that come before the reconciler's first call (the claim, the unlock, the removal of a failed
// install), and returns the client that carries the rest out; the error of a Refuse decision,
// or of a step that failed.
func (c *Client) begin(ctx context.Context, obj *unstructured.Unstructured) (*reconcile, error) {
	log := logf.FromContext(ctx)
	start := time.Now()
	cfg, reads, err := c.o.Configs.For(ctx, obj, log.V(1))
	if err != nil {
		c.report(obj, Outcome{Action: ActionClient, Err: err}, start)
		return nil, err
	}
	r := &reconcile{c: c, ctx: ctx, obj: obj, log: log, cfg: cfg, reads: reads,
		key: shard.Key{GVK: obj.GroupVersionKind(), NamespacedName: client.ObjectKeyFromObject(obj)}}
	r.known = r.gather()
	r.decision = Decide(r.known.state)
	r.stored, r.storedErr = r.known.cur, r.known.curErr
	for _, o := range r.known.outcomes {
		r.c.report(obj, o, o.start)
	}
	if r.decision.Step == Refuse {
		return nil, r.refusal()
	}
	if r.decision.Claim {
		if err := (claimStep{r}).run(); err != nil {
			return nil, err
		}
	}
	if r.decision.Unlock {
		if err := (unlockStep{r}).run(); err != nil {
			return nil, err
		}
	}
	if r.decision.Remove {
		if err := (removeFailedInstallStep{r: r, failed: errors.New(r.known.cur.Info.Description)}).run(); err != nil {
			return nil, err
		}
		r.stored, r.storedErr = nil, nil // purged: the reconciler reads no record, and installs
	}
	if w := c.o.Waves; w != nil {
		switch r.decision.Step {
		case Install, Unchanged, RecordValues:
			w.UpToDate(obj) // it renders what the chart at hand renders: nothing for a rollout to hold back
		case Hold, Upgrade:
			w.Decided(obj, r.decision.Step == Hold)
		}
	}
	if !r.known.state.Deleting {
		c.values.Set(r.key, built{version: obj.GetResourceVersion(), vals: r.known.vals, err: r.known.err})
	}
	return r, nil
}

// during runs f unless the resource was handed over to another shard since the reconcile began
// (and this reconcile is not about to claim it again: it has claim), counted as in flight: a
// handover waits for it.
func during[T any](r *reconcile, claim Claim, f func() (T, error)) (T, error) {
	if r.c.o.Claims != nil {
		claiming := (claim == Unclaimed || claim == GoneShard) && !r.claimed
		if err := r.c.o.Claims.Begin(r.key, claiming); err != nil {
			var none T
			return none, err
		}
		defer r.c.o.Claims.End(r.key)
	}
	return f()
}

// act runs f as during does, for a step of this reconcile.
func act[T any](r *reconcile, f func() (T, error)) (T, error) {
	return during(r, r.known.state.Claim, f)
}

// last returns the last revision of release name; ErrReleaseNotFound when it has none.
func last(cfg *action.Configuration, name string) (*release.Release, error) {
	rel, err := cfg.Releases.Last(name)
	if err != nil {
		return nil, err
	}
	return asRelease(rel)
}

func asRelease(r any) (*release.Release, error) {
	switch rel := r.(type) {
	case *release.Release:
		return rel, nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("unsupported release type %T", r)
}

// stepFor checks that the reconciler's call is answered by a step of the decision: a Stop
// answers every call with what stopped it.
func (r *reconcile) stepFor(call Action, steps ...Step) error {
	switch {
	case r.decision.Step == Stop:
		return r.known.err
	case slices.Contains(steps, r.decision.Step):
		return nil
	}
	return fmt.Errorf("the reconciler asked to %s release %s, but this reconcile decided %s", call, r.obj.GetName(), r.decision.Step)
}

// get answers the reconciler's read of release name: the last revision as stored, as the
// reconcile read it when it began, or read again once a step wrote it. An uninstalled release
// (uninstall-wait keeps its record while its objects go) holds nothing under its name: not
// found, as after any uninstall. It writes nothing.
func (r *reconcile) get(name string) (*release.Release, error) {
	if name != r.obj.GetName() {
		return act(r, func() (*release.Release, error) { return last(r.cfg, name) })
	}
	if r.stale {
		r.stored, r.storedErr = act(r, func() (*release.Release, error) { return last(r.cfg, name) })
		if errors.Is(r.storedErr, driver.ErrReleaseNotFound) {
			r.storedErr = nil
		}
		r.stale = false
	}
	switch {
	case r.storedErr != nil:
		return nil, r.storedErr
	case r.stored == nil || r.stored.Info.Status == common.StatusUninstalled:
		return nil, driver.ErrReleaseNotFound
	}
	return r.stored, nil
}

// check answers the reconciler's "does the release need an upgrade?" (its dry-run upgrade):
// the rendering of the values at hand (the dry run gather ran), or the deployed revision where
// the digests prove it renders them, or, for a release that is not deployed, its record, whose
// status tells the reconciler to upgrade.
func (r *reconcile) check() (*release.Release, error) {
	switch {
	case r.decision.Step == Stop:
		return nil, r.known.err
	case r.known.rendered != nil:
		return r.known.rendered, nil
	}
	return r.get(r.obj.GetName())
}

// actionOptions are the options of an action that the reconciler chose (seam.go converts
// them from Helm 3's), with the custom resource's annotations that change how it runs.
type actionOptions struct {
	DisableHooks bool
	Description  string
	// Force: upgrade-force, Helm's --force of Helm 3.
	Force bool
}

// install carries out Install (install.go).
func (r *reconcile) install(o actionOptions) (*release.Release, error) {
	if err := r.stepFor(ActionInstall, Install); err != nil {
		return nil, err
	}
	return installStep{r: r, o: o}.run()
}

// upgrade carries out Upgrade or Hold (upgrade.go).
func (r *reconcile) upgrade(o actionOptions) (*release.Release, error) {
	if err := r.stepFor(ActionUpgrade, Upgrade, Hold); err != nil {
		return nil, err
	}
	if r.decision.Step == Hold {
		return holdStep{r}.run()
	}
	return upgradeStep{r: r, o: o, as: ActionUpgrade}.run()
}

// reconcileObjects carries out Unchanged (drift.go) or RecordValues (upgrade.go).
func (r *reconcile) reconcileObjects() error {
	if err := r.stepFor(ActionReconcile, Unchanged, RecordValues); err != nil {
		return err
	}
	if r.decision.Step == RecordValues {
		return recordValuesStep{r}.run()
	}
	return unchangedStep{r}.run()
}

// uninstall carries out Uninstall or UninstallWhenGone (uninstall.go).
func (r *reconcile) uninstall(o actionOptions) (*release.Release, error) {
	if err := r.stepFor(ActionUninstall, Uninstall, UninstallWhenGone); err != nil {
		return nil, err
	}
	return uninstallStep{r: r, o: o}.run()
}

// renderOptions sets what every install and upgrade shares:
//   - no wait for plain releases: Ready is computed from kstatus by the status controller;
//     hooks keep Helm's hook waits;
//   - no post-renderer: the kube client gives every object it builds what the operator adds
//     (the label, the owner reference), so the manifest is the chart's rendering as Helm makes
//     it, without Helm's round trip of every rendering through a post-renderer;
//   - no client-side OpenAPI validation, which downloads and parses the cluster's OpenAPI
//     documents for every action: the apiserver validates every object it is sent, and the
//     chart's rendering is checked against the API by the chart tests.
func renderOptions(wait *kube.WaitStrategy, noValidation *bool) {
	*wait = kube.HookOnlyStrategy
	*noValidation = true
}

// translate builds the values of a custom resource as the plugins' reconciler would: the
// watch's override values set into the spec (environment variables expanded), then the
// kind's translator (the chart's checks). The chart's defaults are not coalesced here: Helm's
// install and upgrade coalesce once, as for `helm install -f`, so that a null in the spec
// deletes a default.
func (c *Client) translate(ctx context.Context, obj *unstructured.Unstructured) (map[string]any, error) {
	obj = obj.DeepCopy()
	spec, ok := obj.Object["spec"].(map[string]any)
	if !ok {
		return nil, errors.New("spec must be a map")
	}
	for k, v := range c.o.Overrides {
		if err := strvals.ParseInto(fmt.Sprintf("%s=%s", k, os.ExpandEnv(v)), spec); err != nil {
			return nil, err
		}
	}
	return c.o.Translate(ctx, obj)
}

// copyChart copies c, its metadata, its dependency entries and, recursively, its subcharts.
//
// Helm edits the chart it renders: it removes the subcharts that the values switch off, with
// their Chart.yaml entries, renames aliased ones and records imported values. Every action of
// a kind starts from one loaded chart, so the first release that switched a subchart off would
// remove it for every later release of the kind, and two concurrent actions would edit it at
// once. The copy is of the structure Helm edits; templates, files and values, which Helm only
// reads, are shared.
func copyChart(c *chart.Chart) *chart.Chart {
	if c == nil {
		return nil
	}
	out := *c
	if c.Metadata != nil {
		md := *c.Metadata
		md.Dependencies = make([]*chart.Dependency, len(c.Metadata.Dependencies))
		for i, d := range c.Metadata.Dependencies {
			if d != nil {
				dep := *d
				md.Dependencies[i] = &dep
			}
		}
		out.Metadata = &md
	}
	subcharts := make([]*chart.Chart, 0, len(c.Dependencies()))
	for _, sub := range c.Dependencies() {
		subcharts = append(subcharts, copyChart(sub))
	}
	out.SetDependencies(subcharts...)
	return &out
}

// dryRunStrategy is the check's: watches.yaml dryRunOption, else the plugins' (server).
func (c *Client) dryRunStrategy() action.DryRunStrategy {
	return action.DryRunStrategy(cmp.Or(c.o.DryRunOption, string(action.DryRunServer)))
}

// SoleWriter says when this process may be the only writer of a release, and so unlock one an
// interrupted action left pending (the operator was killed mid-action, or lost its node): Helm
// refuses every later action on such a release ("another operation is in progress"), so the
// upstream reconciler would fail on it forever.
//   - With leader election, while this replica holds the Lease: reconciles of one resource never
//     overlap, and a former leader stops acting before its Lease can pass to another replica
//     (the renew deadline is shorter than the lease duration; a leader that was paused instead
//     is fenced: Fence).
//   - Without it (`make run`, several unelected replicas, a person's `helm upgrade`), once the
//     pending revision is older than PendingAfter, which no honest action lasts: until then the
//     reconcile fails with a message saying so, and retries with backoff.
type SoleWriter struct {
	// Leading reports whether this replica holds the leader Lease; nil without leader election.
	Leading func() bool
	// PendingAfter is how long a release must have been pending, without leader election,
	// before it is taken as abandoned.
	PendingAfter time.Duration
}

// why returns why a release pending since `since` may be unlocked now, or an error saying why not.
func (w SoleWriter) why(since time.Time) (string, error) {
	if w.Leading != nil {
		if w.Leading() {
			return "this replica holds the leader Lease", nil
		}
		return "", errors.New("this replica does not hold the leader Lease")
	}
	age := time.Since(since) // Helm records when an action began in wall-clock time
	if age >= w.PendingAfter {
		return fmt.Sprintf("leader election is off and it was pending for %s, longer than --unlock-pending-after %s",
			age.Round(time.Second), w.PendingAfter), nil
	}
	return "", fmt.Errorf("leader election is off, so another process may be acting on it; it is taken as "+
		"abandoned once pending for --unlock-pending-after %s (now %s)", w.PendingAfter, age.Round(time.Second))
}

// Fence is a leader election lock that keeps a replica that lost the leader Lease without
// knowing it from writing to the cluster.
//
// Leader election protects against a leader that dies or loses the apiserver: a live leader that
// cannot renew its Lease gives up leadership after the renew deadline, before any other replica
// may take over (after the lease duration). A leader that is frozen instead (a long GC pause, a
// suspended VM, a stalled node, SIGSTOP) notices nothing: when it resumes, its in-flight Helm
// actions go on from where they stopped, possibly minutes after another replica took over and
// finished the same work. Unfenced, a resumed install then failed on the objects the new leader
// had created, and its removal deleted them: they are the same release's.
//
// The Fence times every renewal of the Lease by this replica on the boot clock
// (CLOCK_BOOTTIME), which runs on while the process is stopped and while the machine is
// suspended (Go's monotonic clock stops during a suspend). Wrapped around the transport of the
// manager's clients (WrapTransport), it refuses every request that writes once the last
// renewal is older than the renew deadline: by then a live leader would have stepped down
// itself, and the lease duration leaves the difference for requests already on the wire.
//
// What it cannot close: a request checked just before the freeze and sent just after. Release
// records are also written with optimistic concurrency (helmconfig.Store), so that such a
// straggler cannot overwrite a newer record.
type Fence struct {
	resourcelock.Interface
	// ValidFor is how long writes are allowed after each renewal: the renew deadline. Now is
	// the clock (BootClock); Refused counts the writes refused.
	ValidFor time.Duration
	Now      func() time.Duration
	Refused  func()

	mu      sync.Mutex
	leading bool
	renewed time.Duration // when the last successful write of the Lease naming this replica was sent
}

// Create implements resourcelock.Interface.
func (f *Fence) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return f.write(ctx, ler, f.Interface.Create)
}

// Update implements resourcelock.Interface.
func (f *Fence) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return f.write(ctx, ler, f.Interface.Update)
}

func (f *Fence) write(ctx context.Context, ler resourcelock.LeaderElectionRecord,
	next func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	// The time before sending: the apiserver stores the renewal later, and other replicas count
	// the lease duration from when they see it, later still.
	sent := f.Now()
	err := next(ctx, ler)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case ler.HolderIdentity != f.Identity():
		f.leading = false // releasing the Lease (on shutdown), whether or not that succeeded
	case err == nil:
		f.leading, f.renewed = true, sent
	}
	return err
}

// Leading reports whether this replica holds the Lease, renewed within the renew deadline.
func (f *Fence) Leading() bool { return f.Check() == nil }

// Check returns an error unless this replica holds the Lease, renewed within the renew deadline.
func (f *Fence) Check() error {
	f.mu.Lock()
	leading, renewed := f.leading, f.renewed
	f.mu.Unlock()
	if !leading {
		return fmt.Errorf("this replica does not hold the leader Lease %s", f.Describe())
	}
	if age := f.Now() - renewed; age >= f.ValidFor {
		return fmt.Errorf("this replica last renewed the leader Lease %s %s ago, longer than the renew deadline %s: "+
			"another replica may lead now", f.Describe(), age.Round(time.Millisecond), f.ValidFor)
	}
	return nil
}

// WrapTransport fences the requests of a client that can write: use it as a rest.Config's
// WrapTransport for every client of the manager but the leader election's own.
func (f *Fence) WrapTransport(next http.RoundTripper) http.RoundTripper {
	return promhttp.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if writes(req) {
			if err := f.Check(); err != nil {
				f.Refused()
				return nil, fmt.Errorf("refusing to write (%s %s): %w", req.Method, req.URL.Path, err)
			}
		}
		return next.RoundTrip(req)
	})
}

// writes tells whether a request may change the cluster.
func writes(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	// Token and access reviews ask a question and change nothing; the metrics endpoint of every
	// replica, leader or not, asks them of each scraper.
	p := req.URL.Path
	return !strings.Contains(p, "/apis/authentication.k8s.io/") && !strings.Contains(p, "/apis/authorization.k8s.io/")
}

// BootClock returns the time since boot, suspends included (CLOCK_BOOTTIME).
func BootClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// Linux has had CLOCK_BOOTTIME since 2.6.39; keep time moving rather than freeze the fence open.
		return time.Duration(time.Now().UnixNano())
	}
	return time.Duration(ts.Nano())
}

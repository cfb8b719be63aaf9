package actionclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/example/myproxy-operator/internal/annotations"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/renderinputs"
	"github.com/example/myproxy-operator/internal/shard"
)

// Options configure the action clients the reconciler uses.
type Options struct {
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
	// DryRunOption is Helm's dry-run mode of the upgrade check (watches.yaml dryRunOption); ""
	// is the reconciler's (server).
	DryRunOption string
}

// WaveGate decides which upgrades may go now (package rollout's Gate).
type WaveGate interface {
	// Hold reports whether an upgrade of obj must wait; specChanged says it renders values
	// other than the deployed release's.
	Hold(obj client.Object, specChanged bool) bool
	// UpToDate tells that obj's release renders what the chart at hand renders.
	UpToDate(obj client.Object)
	// Upgraded tells the outcome of an upgrade of obj's release.
	Upgraded(obj client.Object, err error)
}

// ErrHeld is the error of an upgrade the rollout holds back that the reconciler tried
// regardless of the check's answer (it upgrades a failed release whatever the check says).
var ErrHeld = errors.New("held back by the chart rollout: this release waits for its wave")

// New returns the action client getter of the Helm reconciler: over base (the plugins' clients,
// RollbackChoice), each reconcile gets one client that asks Decide at every call and does what
// it says, and tells the observers (Events, metrics) the outcome of every call that reaches Helm.
//
// The reconciler's calls, in its order, and what this client does with each:
//   - ActionClientFor begins the reconcile: the claim of a sharded resource is decided (and
//     written), the release is read once, and a revision an interrupted action left pending is
//     unlocked (marked failed) when this process may be its only writer. Every later read of the
//     release by the reconciler is answered from that read until an action changes it.
//   - the dry-run upgrade (the check) is answered from digests, or by a dry run, and may be held
//     for the rollout's wave;
//   - Install, Upgrade and Uninstall (with uninstall-wait) run as Decide says; Reconcile
//     corrects drift, and records the digests a check proved.
//
// Every call on the release of a sharded resource is bracketed by shard.Claims, so that a
// handover to another shard waits for the calls in flight and none starts after it.
func New(base helmclient.ActionClientGetter, o Options) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		c := &reconcileClient{o: &o, ctx: ctx, obj: obj,
			key: shard.Key{GVK: obj.GetObjectKind().GroupVersionKind(), NamespacedName: client.ObjectKeyFromObject(obj)}}
		if err := c.begin(base); err != nil {
			return nil, err
		}
		return c, nil
	})
}

// reconcileClient serves one reconcile of one custom resource.
type reconcileClient struct {
	helmclient.ActionInterface // the plugins' client
	o                          *Options
	ctx                        context.Context // the reconcile's
	obj                        client.Object
	key                        shard.Key

	// read is the release as last read or written: what the reconciler's reads are answered
	// with (cur, or err) until an action changes it (read false).
	read bool
	cur  *release.Release
	err  error

	// The check's outcome: checked, and held by the rollout; proved, the deployed revision with
	// the digests a dry run proved it renders, written on its record by Reconcile.
	checked, held bool
	proved        *release.Release
}

// begin decides the claim, reads the release and unlocks it if it is pending.
func (c *reconcileClient) begin(base helmclient.ActionClientGetter) error {
	claim, err := c.claim()
	if err != nil {
		return err
	}
	switch Decide(State{Call: Client, Claim: claim}) {
	case Refuse:
		if claim == ForeignRunner {
			return fmt.Errorf("shard %q claims it and runs (its Lease is held), but is not in --shards %v: "+
				"every shard must run with the same --shards", shard.Owner(c.obj), c.o.Shard.Fleet)
		}
		return fmt.Errorf("shard %q acts on it until it hands it over (label %s)", shard.Owner(c.obj), shard.OwnerLabel)
	case ClaimIt: // the update carries the resource version read, so of two claims one fails
		c.obj.SetLabels(mergeLabels(c.obj.GetLabels(), map[string]string{shard.OwnerLabel: c.o.Shard.ID()}))
		if err := c.o.Writer.Update(c.ctx, c.obj); err != nil {
			return fmt.Errorf("claiming it for shard %q: %w", c.o.Shard.ID(), err)
		}
		c.o.Claims.Reclaim(c.key)
	}
	start := time.Now()
	if c.ActionInterface, err = base.ActionClientFor(c.ctx, c.obj); err != nil {
		c.report(Outcome{Action: Client, Err: err}, start)
		return err
	}
	c.reread()
	if c.err != nil || c.cur == nil {
		return nil
	}
	why, notSole := c.o.Unlock.why(c.cur.Info.LastDeployed.Time)
	switch Decide(State{Call: Client, Claim: Mine, Status: c.status(), SoleWriter: notSole == nil}) {
	case Refuse:
		c.cur, c.err = nil, fmt.Errorf("release %s revision %d is %s and is left so: %w", c.cur.Name, c.cur.Version, c.cur.Info.Status, notSole)
	case UnlockIt:
		c.unlock(why)
	}
	return nil
}

// claim is what the resource's owner label says to this shard; Mine when not sharded.
func (c *reconcileClient) claim() (Claim, error) {
	s := c.o.Shard
	switch owner := shard.Owner(c.obj); {
	case !s.Sharded() || owner == s.ID():
		return Mine, nil
	case owner == "":
		return Unclaimed, nil
	case s.InFleet(owner):
		return OtherShard, nil
	case c.o.Running == nil: // no leader election: no shard is known to run
		return GoneShard, nil
	default:
		live, err := c.o.Running(c.ctx, owner)
		if err != nil {
			return "", fmt.Errorf("reading whether shard %q, which claims it, runs: %w", owner, err)
		}
		if live {
			return ForeignRunner, nil
		}
		return GoneShard, nil
	}
}

// unlock marks the pending revision failed, so that the reconciler upgrades from there (Helm
// upgrades a failed release, even one that never deployed), adopting whatever objects the
// interrupted action created.
func (c *reconcileClient) unlock(why string) {
	rel, was := c.cur, c.cur.Info.Status
	rel.Info.Status = release.StatusFailed
	rel.Info.Description = fmt.Sprintf("%s: left %s by an interrupted action (%s)", UnlockedDescription, was, why)
	if err := c.write(rel); err != nil {
		c.cur, c.err = nil, fmt.Errorf("release %s revision %d is %s and could not be marked failed: %w", rel.Name, rel.Version, was, err)
		return
	}
	c.o.Recorder.Eventf(c.obj, corev1.EventTypeWarning, names.ReasonReleaseUnlocked,
		"release %s revision %d was left %s by an interrupted action; marked failed to retry (%s)", rel.Name, rel.Version, was, why)
}

// reread reads the release again.
func (c *reconcileClient) reread() {
	start := time.Now()
	c.cur, c.err = during(c, func() (*release.Release, error) { return c.ActionInterface.Get(c.obj.GetName()) })
	c.report(Outcome{Action: Get, Result: c.cur, Err: c.err}, start)
	c.read = true
}

// recorder returns what records the reads of the next rendering on c's configuration, started;
// nil when the configuration records nothing.
func (c *reconcileClient) recorder() *renderinputs.Recorder {
	rec := renderinputs.RecorderOf(c.Config())
	if rec != nil {
		rec.Start()
	}
	return rec
}

// during runs f unless the resource was handed over to another shard since the reconcile began.
func during[T any](c *reconcileClient, f func() (T, error)) (T, error) {
	if c.o.Shard.Sharded() {
		if err := c.o.Claims.Begin(c.key); err != nil {
			var none T
			return none, err
		}
		defer c.o.Claims.End(c.key)
	}
	return f()
}

// write runs a write of the release record, as during does.
func (c *reconcileClient) write(rel *release.Release) error {
	_, err := during(c, func() (any, error) { return nil, c.Config().Releases.Update(rel) })
	return err
}

func (c *reconcileClient) report(o Outcome, start time.Time) {
	o.Object, o.Duration = c.obj, time.Since(start)
	o.Release = cmp.Or(o.Release, c.obj.GetName()) // the custom resource's, unless the call names another
	Events{Recorder: c.o.Recorder}.Observe(o)
	if c.o.Metrics != nil {
		c.o.Metrics.Observe(o)
	}
}

// status of the release as read; "" when there is none.
func (c *reconcileClient) status() release.Status {
	if c.cur == nil || c.cur.Info == nil {
		return ""
	}
	return c.cur.Info.Status
}

// Get implements helmclient.ActionInterface: the release as this reconcile knows it. One
// uninstalled while its objects go (uninstall-wait) is not found, as after any uninstall.
func (c *reconcileClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	if name != c.obj.GetName() || len(opts) > 0 {
		return during(c, func() (*release.Release, error) { return c.ActionInterface.Get(name, opts...) })
	}
	if !c.read {
		c.reread()
	}
	if c.err == nil && c.status() == release.StatusUninstalled {
		return nil, fmt.Errorf("release %s is uninstalled, waiting for its objects to go: %w", name, driver.ErrReleaseNotFound)
	}
	return c.cur, c.err
}

// Install implements helmclient.ActionInterface.
func (c *reconcileClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.InstallOption) (*release.Release, error) {
	rec := c.o.Digests.recording(c, chrt, vals, 1) // an install is always revision 1
	if rec != nil {
		opts = append(opts, func(i *action.Install) error { i.Labels = rec.labels(i.Labels); return nil })
	}
	start := time.Now()
	rel, err := during(c, func() (*release.Release, error) {
		return c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	})
	c.report(Outcome{Action: Install, Result: rel, Chart: chrt, Err: err}, start)
	c.o.Digests.rendered(c, rec, rel, err)
	c.read = false
	if c.o.Waves != nil {
		// An install renders the chart at hand: nothing for a rollout to hold back. The first
		// wave waits until every resource of the fleet is decided.
		c.o.Waves.UpToDate(c.obj)
	}
	return rel, err
}

// Upgrade implements helmclient.ActionInterface: a dry run is the reconciler's check.
func (c *reconcileClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.UpgradeOption) (*release.Release, error) {
	cur := c.cur
	if !c.read || name != c.obj.GetName() {
		cur = nil
	}
	if isDryRun(opts) {
		return c.check(cur, chrt, vals, func() (*release.Release, error) {
			if o := c.o.DryRunOption; o != "" {
				opts = append(opts, func(u *action.Upgrade) error { u.DryRunOption = o; return nil })
			}
			return during(c, func() (*release.Release, error) {
				return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
			})
		})
	}
	held := c.held
	if !c.checked && cur != nil && c.o.Waves != nil {
		held = c.o.Waves.Hold(c.obj, valuesDiffer(cur.Config, vals))
	}
	if Decide(State{Call: Upgrade, Claim: Mine, Status: c.status(), Held: held}) == Hold {
		return nil, ErrHeld
	}
	next := 0 // unknown: the labels will not be trusted
	if cur != nil {
		next = cur.Version + 1 // Helm's next revision follows the last, which the reconciler read
	}
	rec := c.o.Digests.recording(c, chrt, vals, next)
	if rec != nil {
		opts = append(opts, func(u *action.Upgrade) error { u.Labels = rec.labels(u.Labels); return nil })
	}
	start := time.Now()
	rel, err := during(c, func() (*release.Release, error) {
		return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	})
	c.report(Outcome{Action: Upgrade, Result: rel, Chart: chrt, Err: err}, start)
	c.o.Digests.rendered(c, rec, rel, err)
	c.read = false
	if c.o.Waves != nil {
		c.o.Waves.Upgraded(c.obj, err)
	}
	return rel, err
}

// check answers the reconciler's dry-run upgrade: with the deployed revision (cur) when it is
// unchanged or held, with the dry run's rendering when it needs an upgrade.
func (c *reconcileClient) check(cur *release.Release, chrt *chart.Chart, vals map[string]any,
	dryRun func() (*release.Release, error)) (*release.Release, error) {
	c.checked, c.held = true, false // each check decides anew
	s := State{Call: Check, Claim: Mine, Status: c.status()}
	d, digestible := c.o.Digests.of(c, chrt, vals)
	s.Known = digestible && cur != nil && c.o.Digests.knows(c.key, cur, d)
	var rendered *release.Release
	for {
		switch Decide(s) {
		case RenderIt:
			rec := c.recorder()
			start := time.Now()
			rel, err := dryRun()
			c.report(Outcome{Action: Check, Result: rel, Chart: chrt, Err: err}, start)
			if err != nil || cur == nil || rel == nil {
				return rel, err
			}
			rendered, s.Rendered, s.Same = rel, true, rel.Manifest == cur.Manifest
			if s.Same && digestible && rec != nil && s.Status == release.StatusDeployed {
				c.proved = c.o.Digests.prove(c, cur, d, rec.Reads())
			}
			if !s.Same && c.o.Waves != nil {
				s.Held = c.o.Waves.Hold(c.obj, valuesDiffer(cur.Config, vals))
			}
		case Unchanged:
			if c.o.Waves != nil {
				c.o.Waves.UpToDate(c.obj)
			}
			return cur, nil
		case Hold:
			c.held = true
			return cur, nil
		default: // UpgradeIt
			return rendered, nil
		}
	}
}

// Reconcile implements helmclient.ActionInterface: it writes the digests a check proved on the
// release record (so that a restarted operator knows them too; a failure costs only another dry
// run after a restart), then corrects drift.
func (c *reconcileClient) Reconcile(rel *release.Release) error {
	if c.proved != nil {
		if err := c.write(c.proved); err != nil {
			logf.FromContext(c.ctx).V(1).Info("cannot record the digests proven on the release", "error", err.Error())
		}
	}
	start := time.Now()
	_, err := during(c, func() (any, error) { return nil, c.ActionInterface.Reconcile(rel) })
	c.report(Outcome{Action: Reconcile, Release: rel.Name, Result: rel, Err: err}, start)
	return err
}

// Uninstall implements helmclient.ActionInterface, with the stock operators' uninstall-wait: the
// uninstall succeeds only once every object of the release is gone, the release record (marked
// uninstalled) being the state of the wait, which survives a restart. After each uninstall, the
// release's hook objects are deleted too (deleteHooks).
func (c *reconcileClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	if !c.read {
		c.reread()
	}
	s := State{Call: Uninstall, Claim: Mine, Status: c.status(), Wait: annotations.Bool(c.obj, annotations.UninstallWait, false)}
	start := time.Now()
	var resp *release.UninstallReleaseResponse
	var err error
	for done := false; !done; {
		var waiting error
		if s.Wait && s.Status == release.StatusUninstalled {
			remaining, rerr := c.remaining(c.cur.Manifest)
			if rerr != nil {
				err = fmt.Errorf("%s: cannot tell whether the objects of release %s are deleted: %w", annotations.UninstallWait, name, rerr)
				break
			}
			s.Remaining, waiting = len(remaining) > 0, &WaitingForDeletionError{Release: name, Remaining: remaining}
		}
		switch Decide(s) {
		case WaitForObjects:
			err, done = waiting, true
		case KeepHistory:
			keep := func(u *action.Uninstall) error { u.KeepHistory = true; return nil }
			resp, err = c.uninstall(name, append(slices.Clone(opts), keep)...)
			s.Status, done = release.StatusUninstalled, err != nil
		default: // Proceed: Helm purges the records of a release it finds uninstalled
			resp, err = c.uninstall(name, opts...)
			done = true
		}
	}
	var rel *release.Release
	if resp != nil {
		rel = resp.Release
	}
	c.report(Outcome{Action: Uninstall, Release: name, Result: rel, Err: err}, start)
	c.read = false
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		// The reconciler puts this in the ReleaseFailed condition; Helm's own words alone
		// ("no release provided") do not say what is at stake.
		err = fmt.Errorf("uninstalling release %s failed; the resource keeps its finalizer, and the release "+
			"its objects, until an uninstall succeeds: %w", name, err)
	}
	return resp, err
}

// uninstall runs one Helm uninstall and deletes the hook objects of the release it removed.
func (c *reconcileClient) uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	resp, err := during(c, func() (*release.UninstallReleaseResponse, error) { return c.ActionInterface.Uninstall(name, opts...) })
	if err == nil || errors.Is(err, driver.ErrReleaseNotFound) {
		c.o.Digests.Forget(c.key)
	}
	if err != nil || resp == nil || resp.Release == nil {
		return resp, err
	}
	if err := deleteHooks(c.Config().KubeClient, resp.Release); err != nil {
		return resp, fmt.Errorf("release %s is uninstalled, but not all its hook objects are deleted: %w", name, err)
	}
	return resp, nil
}

// remaining lists the objects of manifest that still exist.
func (c *reconcileClient) remaining(manifest string) ([]string, error) {
	if strings.TrimSpace(manifest) == "" {
		return nil, nil
	}
	objs, err := c.Config().KubeClient.Build(strings.NewReader(manifest), false)
	if err != nil {
		return nil, err
	}
	var left []string
	for _, info := range objs {
		switch err := info.Get(); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, err
		default:
			left = append(left, fmt.Sprintf("%s %s", info.Mapping.GroupVersionKind.Kind, info.Name))
		}
	}
	return left, nil
}

// Package actionclient is what happens to a custom resource's Helm release. helm-operator-plugins'
// reconciler asks its action client getter for a client at the beginning of every reconcile;
// the getter (Client.begin) gathers what is known of the release once (state.go), asks Decide
// once (decide.go), and returns one client whose every answer to the reconciler follows that
// Decision, carried out with Helm 4: the reconciler's reads are answered from what was gathered
// and write nothing; the claim and the unlock Decide asks for are written before the first
// action; install, upgrade, drift correction (drift.go) and uninstall run as it says. The
// reconciler speaks Helm 3's types; seam.go, the one file that knows them, converts.
//
// What the upstream client lacks is here too: the upgrade check answered from digests of every
// input of a rendering instead of a dry run (digest.go, lookups.go), releases left pending by a
// crash unlocked, hook objects deleted after an uninstall, uninstall-wait, the chart rollout's
// waves, and Events and metrics of every Helm action (report.go).
package actionclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/operator-framework/helm-operator-plugins/pkg/manifestutil"
	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/postrenderer"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"helm.sh/helm/v4/pkg/strvals"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/example/myproxy-operator/internal/annotations"
	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/shard"
)

// Options configure the action client of one kind.
type Options struct {
	// Chart is the kind's chart; Overrides, the watch's override values, set into every spec.
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
}

// Configs gives each custom resource's Helm configuration, and what records the lookups of its
// renderings; log receives Helm's own log lines.
type Configs interface {
	For(ctx context.Context, obj client.Object, log logr.Logger) (*action.Configuration, *helmconfig.Recorder, error)
	// OwnerReferences is the post-renderer that points the objects of obj's release at obj.
	OwnerReferences(cfg *action.Configuration, obj client.Object) postrenderer.PostRenderer
}

// Client is the action client of one kind: the reconciler's action client getter (seam.go),
// and what each reconcile's client shares.
type Client struct {
	o Options
	// translated hands the values a reconcile's client built (a translation) to the
	// reconciler's value translator, which the reconciler calls with the same object pointer,
	// later in the reconcile, whenever the resource is not being deleted.
	translated sync.Map
}

// New returns the action client of a kind.
func New(o Options) *Client { return &Client{o: o} }

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

// ErrHeld is the error of an upgrade the rollout holds back that the reconciler tried
// regardless of the check's answer (it upgrades a failed release whatever the check says).
var ErrHeld = errors.New("held back by the chart rollout: this release waits for its wave")

// UnlockedDescription begins the description of a revision that was unlocked (marked failed).
const UnlockedDescription = "marked failed by myproxy-operator"

// reconcile is the client of one reconcile of one custom resource.
type reconcile struct {
	c   *Client
	ctx context.Context // the reconcile's
	log logr.Logger
	obj *unstructured.Unstructured
	key shard.Key

	cfg   *action.Configuration
	reads *helmconfig.Recorder

	// What was gathered (state.go).
	state    State
	decision Decision
	// cur is the release as read when the reconcile began (or as written since: current); err
	// what the read, the values or the check's rendering failed with.
	cur      *release.Release
	current  bool // cur is the release as stored; false after an action changed it
	err      error
	vals     map[string]any
	dg       digests // of the values and chart at hand; digestible says they could be computed
	digested bool
	rendered *release.Release // the check's dry run
	proved   *release.Release // the deployed revision with the digests its rendering proved
	// Writes carried out: the claim and the unlock Decision asked for.
	claimed, unlocked bool
}

// begin starts a reconcile of obj: it gathers the state, decides, and returns the client that
// carries the decision out; the error of a Refuse decision. It writes nothing.
func (c *Client) begin(ctx context.Context, obj *unstructured.Unstructured) (*reconcile, error) {
	r := &reconcile{c: c, ctx: ctx, obj: obj, log: logf.FromContext(ctx),
		key: shard.Key{GVK: obj.GroupVersionKind(), NamespacedName: client.ObjectKeyFromObject(obj)}}
	start := time.Now()
	var err error
	if r.cfg, r.reads, err = c.o.Configs.For(ctx, obj, r.log.V(1)); err != nil {
		r.report(Outcome{Action: ActionClient, Err: err}, start)
		return nil, err
	}
	r.state = r.gather()
	r.decision = Decide(r.state)
	if r.decision.Step == Refuse {
		return nil, r.refusal()
	}
	if !r.state.Deleting {
		c.translated.Store(obj, translation{vals: r.vals, err: r.err})
	}
	return r, nil
}

// refusal says why Decide refused the reconcile.
func (r *reconcile) refusal() error {
	switch {
	case r.err != nil:
		return r.err
	case r.state.Claim == ForeignRunner:
		return fmt.Errorf("shard %q claims it and runs (its Lease is held), but is not in --shards %v: "+
			"every shard must run with the same --shards", shard.Owner(r.obj), r.c.o.Shard.Fleet)
	case r.state.Claim == OtherShard:
		return fmt.Errorf("shard %q acts on it until it hands it over (label %s)", shard.Owner(r.obj), shard.OwnerLabel)
	}
	_, notSole := r.c.o.Unlock.why(r.cur.Info.LastDeployed)
	return fmt.Errorf("release %s revision %d is %s and is left so: %w", r.cur.Name, r.cur.Version, r.cur.Info.Status, notSole)
}

// during runs f unless the resource was handed over to another shard since the reconcile began
// (and this reconcile is not about to claim it again), counted as in flight: a handover waits
// for it.
func during[T any](r *reconcile, f func() (T, error)) (T, error) {
	if r.c.o.Claims != nil {
		claiming := (r.state.Claim == Unclaimed || r.state.Claim == GoneShard) && !r.claimed
		if err := r.c.o.Claims.Begin(r.key, claiming); err != nil {
			var none T
			return none, err
		}
		defer r.c.o.Claims.End(r.key)
	}
	return f()
}

// read reads the release's last revision: nil when it has none.
func (r *reconcile) read() {
	start := time.Now()
	rel, err := during(r, func() (*release.Release, error) { return last(r.cfg, r.obj.GetName()) })
	r.cur, r.err, r.current = rel, err, true
	if errors.Is(err, driver.ErrReleaseNotFound) {
		r.err = nil
	}
	r.report(Outcome{Action: ActionGet, Result: r.cur, Err: r.err}, start)
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

// carryOut writes what Decide asked for before the step, the claim then the unlock, when the
// reconciler's call is one of the step's; else it says why the call is not made.
func (r *reconcile) carryOut(call Action, steps ...Step) error {
	switch {
	case r.decision.Step == Stop:
		return r.err
	case !slices.Contains(steps, r.decision.Step):
		return fmt.Errorf("the reconciler asked to %s release %s, but this reconcile decided %s", call, r.obj.GetName(), r.decision.Step)
	}
	if r.decision.Claim && !r.claimed {
		// The update carries the resource version read, so of two claims one fails.
		claimed := r.obj.DeepCopy()
		claimed.SetLabels(mergeLabels(claimed.GetLabels(), map[string]string{shard.OwnerLabel: r.c.o.Shard.ID()}))
		if err := r.c.o.Writer.Update(r.ctx, claimed); err != nil {
			return fmt.Errorf("claiming it for shard %q: %w", r.c.o.Shard.ID(), err)
		}
		r.obj.SetLabels(claimed.GetLabels())
		r.obj.SetResourceVersion(claimed.GetResourceVersion())
		r.c.o.Claims.Reclaim(r.key)
		r.claimed = true
	}
	if r.decision.Unlock && !r.unlocked {
		why, _ := r.c.o.Unlock.why(r.cur.Info.LastDeployed)
		rel, was := *r.cur, r.cur.Info.Status
		info := *r.cur.Info
		rel.Info = &info
		rel.Info.Status = common.StatusFailed
		rel.Info.Description = fmt.Sprintf("%s: left %s by an interrupted action (%s)", UnlockedDescription, was, why)
		if _, err := during(r, func() (any, error) { return nil, r.cfg.Releases.Update(&rel) }); err != nil {
			return fmt.Errorf("release %s revision %d is %s and could not be marked failed: %w", rel.Name, rel.Version, was, err)
		}
		r.c.o.Recorder.Eventf(r.obj, corev1.EventTypeWarning, names.ReasonReleaseUnlocked,
			"release %s revision %d was left %s by an interrupted action; marked failed to retry (%s)", rel.Name, rel.Version, was, why)
		r.cur, r.unlocked = &rel, true
	}
	return nil
}

// get answers the reconciler's read of release name: as gathered, until an action changes it.
// A release Decide unlocks reads as failed; one uninstalled while its objects go
// (uninstall-wait) is not found, as after any uninstall. It writes nothing.
func (r *reconcile) get(name string) (*release.Release, error) {
	if name != r.obj.GetName() {
		return during(r, func() (*release.Release, error) { return last(r.cfg, name) })
	}
	if !r.current {
		r.read()
	}
	switch {
	case r.err != nil:
		return nil, r.err
	case r.cur == nil || r.cur.Info.Status == common.StatusUninstalled:
		return nil, driver.ErrReleaseNotFound
	case r.decision.Unlock && !r.unlocked:
		rel, info := *r.cur, *r.cur.Info
		info.Status = common.StatusFailed
		rel.Info = &info
		return &rel, nil
	}
	return r.cur, nil
}

// check answers the reconciler's "does the release need an upgrade?" (its dry-run upgrade) as
// Decide said, from what was gathered.
func (r *reconcile) check() (*release.Release, error) {
	if w := r.c.o.Waves; w != nil {
		switch r.decision.Step {
		case Unchanged:
			w.UpToDate(r.obj)
		case Hold, Upgrade:
			w.Decided(r.obj, r.decision.Step == Hold)
		}
	}
	switch r.decision.Step {
	case Stop:
		return nil, r.err
	case Upgrade:
		if r.rendered != nil {
			return r.rendered, nil
		}
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

// install carries out Install.
func (r *reconcile) install(o actionOptions) (*release.Release, error) {
	if err := r.carryOut(ActionInstall, Install); err != nil {
		return nil, err
	}
	labels := r.c.o.Digests.recording(r, 1) // an install is always revision 1
	start := time.Now()
	rel, err := during(r, func() (*release.Release, error) {
		i := r.newInstall()
		i.DisableHooks, i.Description = o.DisableHooks, o.Description
		i.Labels = labels
		done := helmconfig.SetAction(r.cfg, helmconfig.Action{ServerSide: true, Answers: helmconfig.FromCacheOrAbsent}) // Helm 4 installs server-side
		out, err := i.Run(copyChart(r.c.o.Chart), r.vals)
		done()
		rel, _ := asRelease(out)
		if err != nil && rel != nil {
			// Uninstall the failed install, so that the next reconcile installs afresh (the
			// plugins' failure rollback); a release Helm did not record is not found.
			if _, uerr := r.helmUninstall(actionOptions{}, false); uerr != nil && !errors.Is(uerr, driver.ErrReleaseNotFound) {
				return nil, fmt.Errorf("uninstall failed: %v: original install error: %w", uerr, err)
			}
		}
		return rel, err
	})
	r.report(Outcome{Action: ActionInstall, Result: rel, Err: err}, start)
	r.c.o.Digests.rendered(r, rel, err)
	r.current = false
	if r.c.o.Waves != nil {
		// An install renders the chart at hand: nothing for a rollout to hold back. The first
		// wave waits until every resource of the fleet is decided.
		r.c.o.Waves.UpToDate(r.obj)
	}
	return rel, err
}

// upgrade carries out Upgrade.
func (r *reconcile) upgrade(o actionOptions) (*release.Release, error) {
	if err := r.carryOut(ActionUpgrade, Upgrade, Hold); err != nil {
		return nil, err
	}
	if r.decision.Step == Hold {
		return nil, ErrHeld
	}
	labels := r.c.o.Digests.recording(r, r.cur.Version+1) // Helm's next revision follows the last, which was read
	start := time.Now()
	rel, err := during(r, func() (*release.Release, error) {
		u := r.newUpgrade()
		u.DisableHooks, u.Description = o.DisableHooks, o.Description
		u.ServerSideApply, u.ForceReplace, u.ForceConflicts = force(r.cur.ApplyMethod, o.Force)
		u.Labels = labels
		done := helmconfig.SetAction(r.cfg, helmconfig.Action{ServerSide: u.ForceConflicts, Answers: helmconfig.FromCacheOrAbsent})
		out, err := u.Run(r.obj.GetName(), copyChart(r.c.o.Chart), r.vals)
		done()
		rel, _ := asRelease(out)
		if err != nil && rel != nil {
			// The failed revision was recorded: roll back to the last one that deployed, as the
			// stock operators do, with --force unless rollback-force is false.
			if rerr := r.rollback(rel.Name); rerr != nil {
				return nil, fmt.Errorf("rollback failed: %v: original upgrade error: %w", rerr, err)
			}
		}
		return rel, err
	})
	r.report(Outcome{Action: ActionUpgrade, Result: rel, Err: err}, start)
	r.c.o.Digests.rendered(r, rel, err)
	r.current = false
	if r.c.o.Waves != nil {
		r.c.o.Waves.Upgraded(r.obj, err)
	}
	return rel, err
}

// newInstall is the install of the release, as the install and a preview run it.
func (r *reconcile) newInstall() *action.Install {
	i := action.NewInstall(r.cfg)
	i.ReleaseName, i.Namespace = r.obj.GetName(), r.obj.GetNamespace()
	r.renderOptions(&i.WaitStrategy, &i.PostRenderer, &i.PostRenderStrategy, &i.DisableOpenAPIValidation)
	i.ForceConflicts = true // objects it adopts (its record was lost) take the chart's fields
	i.SkipCRDs = true       // a chart's crds/ are installed with the kind (make install), never by a tenant's release
	return i
}

// newUpgrade is the upgrade of the release, as the check and the upgrade run it.
func (r *reconcile) newUpgrade() *action.Upgrade {
	u := action.NewUpgrade(r.cfg)
	// The values are the custom resource's, whole: an empty spec is not "the last values again".
	u.Namespace, u.MaxHistory, u.ResetValues = r.obj.GetNamespace(), r.c.o.MaxHistory, true
	r.renderOptions(&u.WaitStrategy, &u.PostRenderer, &u.PostRenderStrategy, &u.DisableOpenAPIValidation)
	return u
}

// renderOptions sets what every install and upgrade shares:
//   - no wait for plain releases: Ready is computed from kstatus by the status controller;
//     hooks keep Helm's hook waits;
//   - the owner-reference post-renderer, which hooks do not see;
//   - no client-side OpenAPI validation, which downloads and parses the cluster's OpenAPI
//     documents for every action: the apiserver validates every object it is sent, and the
//     chart's rendering is checked against the API by the chart tests.
func (r *reconcile) renderOptions(wait *kube.WaitStrategy, post *postrenderer.PostRenderer, strategy *action.PostRenderStrategy, noValidation *bool) {
	*wait = kube.HookOnlyStrategy
	*post = r.c.o.Configs.OwnerReferences(r.cfg, r.obj)
	*strategy = action.PostRenderStrategyNoHooks
	*noValidation = true
}

// force is how an upgrade or a rollback of a release applied by method applies its objects, as
// Flux's helm-controller does: server-side when the release is (Helm's auto), taking every
// conflicting field, so that the chart wins as a three-way merge makes it win client-side, and
// forced or not, so that a release applied server-side stays so; a release applied
// client-side, asked to force as the stock operators' --force does, has its objects replaced.
func force(method string, forced bool) (serverSide string, replace, conflicts bool) {
	ssa := method == string(release.ApplyMethodServerSideApply)
	return "auto", forced && !ssa, ssa
}

// rollback rolls release name back after a failed upgrade.
func (r *reconcile) rollback(name string) error {
	rb := action.NewRollback(r.cfg)
	rb.MaxHistory, rb.WaitStrategy = r.c.o.MaxHistory, kube.HookOnlyStrategy
	rb.ServerSideApply, rb.ForceReplace, rb.ForceConflicts = force(r.cur.ApplyMethod, annotations.Bool(r.obj, annotations.RollbackForce, true))
	defer helmconfig.SetAction(r.cfg, helmconfig.Action{ServerSide: rb.ForceConflicts})() // Helm checks no owner on rollback
	return rb.Run(name)
}

// dryRun renders the upgrade of the release as the check does, writing nothing.
func (r *reconcile) dryRun() (*release.Release, error) {
	u := r.newUpgrade()
	u.DryRunStrategy = r.dryRunStrategy()
	u.ServerSideApply, u.ForceReplace, u.ForceConflicts = force(r.cur.ApplyMethod, false)
	out, err := u.Run(r.obj.GetName(), copyChart(r.c.o.Chart), r.vals)
	rel, cerr := asRelease(out)
	return rel, cmp.Or(err, cerr)
}

// Rendering is what the kind's chart would make of a custom resource's release, found the way
// the upgrade check finds it, writing nothing (myproxy-operator preview).
type Rendering struct {
	// Current is the release's last revision, nil when it has none; Rendered the dry run of
	// its upgrade (of an install, without one).
	Current, Rendered *release.Release
	// Kube is the release's Helm client: it builds objects as the release's actions do.
	Kube kube.Interface
}

// Render renders obj's release as its next reconcile would, with a dry run.
func (c *Client) Render(ctx context.Context, obj *unstructured.Unstructured) (Rendering, error) {
	r := &reconcile{c: c, ctx: ctx, obj: obj, log: logf.FromContext(ctx)}
	var err error
	if r.cfg, r.reads, err = c.o.Configs.For(ctx, obj, r.log.V(1)); err != nil {
		return Rendering{}, fmt.Errorf("helm: %w", err)
	}
	if r.vals, err = r.values(); err != nil {
		return Rendering{}, fmt.Errorf("values: %w", err)
	}
	if r.cur, err = last(r.cfg, obj.GetName()); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return Rendering{}, fmt.Errorf("reading the release: %w", err)
	}
	out := Rendering{Current: r.cur, Kube: r.cfg.KubeClient}
	if r.cur != nil {
		out.Rendered, err = r.dryRun()
	} else {
		i := r.newInstall()
		i.DryRunStrategy = r.dryRunStrategy()
		var rel any
		rel, err = i.Run(copyChart(c.o.Chart), r.vals)
		out.Rendered, _ = asRelease(rel)
	}
	if err != nil {
		return out, fmt.Errorf("rendering: %w", err)
	}
	return out, nil
}

// dryRunStrategy is the check's: watches.yaml dryRunOption, else the plugins' (server).
func (r *reconcile) dryRunStrategy() action.DryRunStrategy {
	return action.DryRunStrategy(cmp.Or(r.c.o.DryRunOption, string(action.DryRunServer)))
}

// reconcileObjects carries out the drift correction that follows Unchanged (and Hold): it
// writes the digests a check proved on the release record (so that a restarted operator knows
// them too; a failure costs only another dry run after a restart), then sets back drifted
// objects (drift.go).
func (r *reconcile) reconcileObjects() error {
	if err := r.carryOut(ActionReconcile, Unchanged, Hold); err != nil {
		return err
	}
	if r.proved != nil {
		if _, err := during(r, func() (any, error) { return nil, r.cfg.Releases.Update(r.proved) }); err != nil {
			r.log.V(1).Info("cannot record the digests proven on the release", "error", err.Error())
		}
	}
	start := time.Now()
	_, err := during(r, func() (any, error) { return nil, r.correctDrift(r.cur) })
	r.report(Outcome{Action: ActionReconcile, Release: r.cur.Name, Result: r.cur, Err: err}, start)
	return err
}

// uninstall carries out Uninstall or UninstallWhenGone. After each uninstall, the release's hook
// objects are deleted too.
func (r *reconcile) uninstall(o actionOptions) (*release.Release, error) {
	if err := r.carryOut(ActionUninstall, Uninstall, UninstallWhenGone); err != nil {
		return nil, err
	}
	name := r.obj.GetName()
	start := time.Now()
	rel, err := r.cur, error(nil)
	if r.decision.Step == UninstallWhenGone {
		if r.cur.Info.Status != common.StatusUninstalled {
			rel, err = r.helmUninstall(o, true)
		}
		if err == nil {
			err = r.waitForObjects(r.cur.Manifest)
		}
	}
	if err == nil {
		// Helm purges the records of a release it finds uninstalled.
		rel, err = r.helmUninstall(o, false)
	}
	r.report(Outcome{Action: ActionUninstall, Release: name, Result: rel, Err: err}, start)
	r.current = false
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		var waiting *WaitingForDeletionError
		if !errors.As(err, &waiting) {
			// The reconciler puts this in the ReleaseFailed condition; Helm's own words alone
			// ("no release provided") do not say what is at stake.
			err = fmt.Errorf("uninstalling release %s failed; the resource keeps its finalizer, and the release "+
				"its objects, until an uninstall succeeds: %w", name, err)
		}
	}
	return rel, err
}

// helmUninstall runs one Helm uninstall and deletes the hook objects of the release it removed.
func (r *reconcile) helmUninstall(o actionOptions, keepHistory bool) (*release.Release, error) {
	resp, err := during(r, func() (*release.Release, error) {
		u := action.NewUninstall(r.cfg)
		u.DisableHooks, u.Description, u.KeepHistory = o.DisableHooks, o.Description, keepHistory
		u.WaitStrategy = kube.HookOnlyStrategy
		done := helmconfig.SetAction(r.cfg, helmconfig.Action{Answers: helmconfig.FromCache})
		resp, err := u.Run(r.obj.GetName())
		done()
		if resp == nil {
			return nil, err
		}
		rel, cerr := asRelease(resp.Release)
		return rel, cmp.Or(err, cerr)
	})
	if err == nil || errors.Is(err, driver.ErrReleaseNotFound) {
		r.c.o.Digests.Forget(r.key)
	}
	if err != nil || resp == nil {
		return resp, err
	}
	if err := r.deleteHooks(resp); err != nil {
		return resp, fmt.Errorf("release %s is uninstalled, but not all its hook objects are deleted: %w", resp.Name, err)
	}
	return resp, nil
}

// deleteHooks deletes the hook objects of an uninstalled release that its chart does not keep
// (helm.sh/resource-policy: keep), through Helm's own client (the release's reach and identity
// apply); absent ones are skipped. Helm's uninstall leaves hooks to their delete policy; the
// stock operator-sdk helm-operator gives them an owner reference to the custom resource, so the
// garbage collector takes them after it; helm-operator-plugins owns only the manifest. This does
// not depend on the garbage collector.
func (r *reconcile) deleteHooks(rel *release.Release) error {
	var manifests []string
	for _, h := range rel.Hooks {
		manifests = append(manifests, h.Manifest)
	}
	if len(manifests) == 0 {
		return nil
	}
	objs, err := r.cfg.KubeClient.Build(strings.NewReader(strings.Join(manifests, "\n---\n")), false)
	if err != nil {
		return err
	}
	objs = objs.Filter(func(info *resource.Info) bool {
		a, err := meta.NewAccessor().Annotations(info.Object)
		return err == nil && !manifestutil.HasResourcePolicyKeep(a)
	})
	if len(objs) == 0 {
		return nil
	}
	_, errs := r.cfg.KubeClient.Delete(objs, metav1.DeletePropagationBackground)
	return errors.Join(errs...)
}

// waitForObjects fails with WaitingForDeletionError while an object of manifest exists.
func (r *reconcile) waitForObjects(manifest string) error {
	if strings.TrimSpace(manifest) == "" {
		return nil
	}
	objs, err := r.cfg.KubeClient.Build(strings.NewReader(manifest), false)
	if err != nil {
		return fmt.Errorf("%s: cannot tell whether the objects of release %s are deleted: %w", annotations.UninstallWait, r.obj.GetName(), err)
	}
	var left []string
	for _, info := range objs {
		switch err := info.Get(); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("%s: cannot tell whether the objects of release %s are deleted: %w", annotations.UninstallWait, r.obj.GetName(), err)
		default:
			left = append(left, fmt.Sprintf("%s %s", info.Mapping.GroupVersionKind.Kind, info.Name))
		}
	}
	if len(left) > 0 {
		return &WaitingForDeletionError{Release: r.obj.GetName(), Remaining: left}
	}
	return nil
}

// WaitingForDeletionError says that an uninstall is done but objects of the release are still
// being deleted, and the custom resource keeps its finalizer until they are gone.
type WaitingForDeletionError struct {
	Release   string
	Remaining []string
}

func (e *WaitingForDeletionError) Error() string {
	return fmt.Sprintf("%s=true: release %s is uninstalled; waiting until all its objects are deleted (still present: %s)",
		annotations.UninstallWait, e.Release, strings.Join(e.Remaining, ", "))
}

// values builds the values of the custom resource as the plugins' reconciler would: the
// watch's override values set into the spec (environment variables expanded), then the
// kind's translator (the chart's checks). The chart's defaults are not coalesced here: Helm's
// install and upgrade coalesce once, as for `helm install -f`, so that a null in the spec
// deletes a default.
func (r *reconcile) values() (map[string]any, error) {
	obj := r.obj.DeepCopy()
	spec, ok := obj.Object["spec"].(map[string]any)
	if !ok {
		return nil, errors.New("spec must be a map")
	}
	for k, v := range r.c.o.Overrides {
		if err := strvals.ParseInto(fmt.Sprintf("%s=%s", k, os.ExpandEnv(v)), spec); err != nil {
			return nil, err
		}
	}
	return r.c.o.Translate(r.ctx, obj)
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

// SoleWriter says when this process may be the only writer of a release, and so unlock one an
// interrupted action left pending (the operator was killed mid-action, or lost its node): Helm
// refuses every later action on such a release ("another operation is in progress"), so the
// upstream reconciler would fail on it forever.
//   - With leader election, while this replica holds the Lease: reconciles of one resource never
//     overlap, and a former leader stops acting before its Lease can pass to another replica
//     (the renew deadline is shorter than the lease duration; a leader that was paused instead
//     is fenced by the operator's lease fence).
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

// translation is what the values of a custom resource came to.
type translation struct {
	vals map[string]any
	err  error
}

package actionclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/names"
)

// upgradeStep upgrades the release with Helm 4, applied as its last revision was (force); an
// upgrade that fails after Helm recorded it is rolled back (rollbackStep).
type upgradeStep struct {
	r *reconcile
	o actionOptions
	// as is the action it is reported as: ActionUpgrade, or ActionRecordValues (recordValuesStep).
	as Action
}

func (s upgradeStep) run() (*release.Release, error) {
	r, cur := s.r, s.r.known.cur
	labels := r.c.o.Digests.recording(r, cur.Version+1) // Helm's next revision follows the last, which was read
	start := time.Now()
	rel, err := act(r, func() (*release.Release, error) {
		u := r.newUpgrade()
		u.DisableHooks, u.Description, u.Labels = s.o.DisableHooks, s.o.Description, labels
		u.ServerSideApply, u.ForceReplace, u.ForceConflicts = force(cur.ApplyMethod, s.o.Force)
		defer helmconfig.SetAction(r.cfg, helmconfig.Action{ServerSide: u.ForceConflicts, Answers: helmconfig.FromCacheOrAbsent})()
		out, err := u.Run(r.obj.GetName(), copyChart(r.c.o.Chart), r.known.vals)
		rel, _ := asRelease(out)
		return rel, err
	})
	r.c.report(r.obj, Outcome{Action: s.as, Result: rel, Err: err}, start)
	r.c.o.Digests.rendered(r, rel, err)
	r.stale = true
	if err != nil && rel != nil {
		if rerr := (rollbackStep{r: r, failed: rel}).run(); rerr != nil {
			err = fmt.Errorf("rollback failed: %v: original upgrade error: %w", rerr, err)
		}
	}
	if r.c.o.Waves != nil && s.as == ActionUpgrade {
		r.c.o.Waves.Upgraded(r.obj, err)
	}
	return rel, err
}

// recordValuesStep upgrades a release whose values render its deployed manifest but are not
// those its record holds, so that the record holds them: an upgrade under its own name, run
// when the reconciler asks for the drift correction (it upgrades only on a new manifest), with
// the options the resource's annotations give an upgrade but upgrade-force (the objects render
// the same: nothing to replace). What the reconciler then reports of the release (its name and
// manifest, for the post hooks and status) is the same for both revisions.
type recordValuesStep struct{ r *reconcile }

func (s recordValuesStep) run() error {
	o := actionOptions{DisableHooks: annotation(s.r.obj, names.UpgradeDisableHooks, false),
		Description: s.r.obj.GetAnnotations()[names.UpgradeDescription]}
	_, err := upgradeStep{r: s.r, o: o, as: ActionRecordValues}.run()
	return err
}

// rollbackStep rolls the release back to the last revision that deployed, as the stock
// operators do after a failed upgrade, applied as that revision was: server-side, taking the
// fields others changed, or client-side, with --force (replacing objects) unless the custom
// resource's rollback-force annotation is false.
type rollbackStep struct {
	r      *reconcile
	failed *release.Release
}

func (s rollbackStep) run() error {
	r := s.r
	start := time.Now()
	_, err := act(r, func() (any, error) {
		rb := action.NewRollback(r.cfg)
		rb.MaxHistory, rb.WaitStrategy = r.c.o.MaxHistory, kube.HookOnlyStrategy
		rb.ServerSideApply, rb.ForceReplace, rb.ForceConflicts = rollbackForce(r.known.cur.ApplyMethod, annotation(r.obj, names.RollbackForce, true))
		defer helmconfig.SetAction(r.cfg, helmconfig.Action{ServerSide: rb.ForceConflicts})() // Helm checks no owner on rollback
		return nil, rb.Run(s.failed.Name)
	})
	rel, _ := last(r.cfg, s.failed.Name)
	r.c.report(r.obj, Outcome{Action: ActionRollback, Result: rel, Err: err}, start)
	return err
}

// holdStep keeps the deployed revision while the rollout holds the new chart's upgrade back:
// its drift is corrected, as an unchanged release's is, and the reconciler's upgrade is
// answered with it, as stored. A release that is not deployed (the reconciler upgrades a
// failed one whatever the check says) is answered ErrHeld.
type holdStep struct{ r *reconcile }

// ErrHeld is the answer to an upgrade of a release that is not deployed, which the rollout
// holds back.
var ErrHeld = errors.New("held back by the chart rollout: this release waits for its wave")

func (s holdStep) run() (*release.Release, error) {
	r, cur := s.r, s.r.known.cur
	start := time.Now()
	err := ErrHeld
	if cur.Info.Status == common.StatusDeployed {
		_, err = act(r, func() (any, error) { return nil, r.correctDrift(cur) })
	}
	r.c.report(r.obj, Outcome{Action: ActionHold, Result: cur, Err: err}, start)
	if err != nil {
		return nil, err
	}
	return cur, nil
}

// newUpgrade is the upgrade of the release, as the check and the upgrade run it.
func (r *reconcile) newUpgrade() *action.Upgrade {
	u := action.NewUpgrade(r.cfg)
	// The values are the custom resource's, whole: an empty spec is not "the last values again".
	u.Namespace, u.MaxHistory, u.ResetValues = r.obj.GetNamespace(), r.c.o.MaxHistory, true
	renderOptions(&u.WaitStrategy, &u.DisableOpenAPIValidation)
	return u
}

// force is how an upgrade of a release applied by method applies its objects: server-side when
// the release is (Helm's auto), taking every conflicting field, so that the chart wins as a
// three-way merge makes it win client-side; asked to force, as the stock operators'
// upgrade-force does, replacing them, which Helm 4 does client-side only (the release is
// client-side applied from that revision on).
func force(method string, forced bool) (serverSide string, replace, conflicts bool) {
	if forced {
		return "false", true, false
	}
	return "auto", false, method == string(release.ApplyMethodServerSideApply)
}

// rollbackForce is how a rollback applies its objects, as Flux's helm-controller rolls back: a
// release applied server-side stays so, taking every conflicting field, forced or not; one
// applied client-side, asked to force as the stock operators' rollback-force does, has its
// objects replaced.
func rollbackForce(method string, forced bool) (serverSide string, replace, conflicts bool) {
	ssa := method == string(release.ApplyMethodServerSideApply)
	return "auto", forced && !ssa, ssa
}

// dryRun renders the upgrade of cur with vals as the check does, writing nothing.
func (r *reconcile) dryRun(cur *release.Release, vals map[string]any) (*release.Release, error) {
	u := r.newUpgrade()
	u.DryRunStrategy = r.c.dryRunStrategy()
	u.ServerSideApply, u.ForceReplace, u.ForceConflicts = force(cur.ApplyMethod, false)
	out, err := u.Run(r.obj.GetName(), copyChart(r.c.o.Chart), vals)
	rel, cerr := asRelease(out)
	return rel, cmp.Or(err, cerr)
}

// Rendering is what the kind's chart would make of a custom resource's release, found the way
// the upgrade check finds it, writing nothing (make preview, hack/preview).
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
	vals, err := c.translate(ctx, obj)
	if err != nil {
		return Rendering{}, fmt.Errorf("values: %w", err)
	}
	cur, err := last(r.cfg, obj.GetName())
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return Rendering{}, fmt.Errorf("reading the release: %w", err)
	}
	out := Rendering{Current: cur, Kube: r.cfg.KubeClient}
	if cur != nil {
		out.Rendered, err = r.dryRun(cur, vals)
	} else {
		i := r.newInstall()
		i.DryRunStrategy = c.dryRunStrategy()
		var rel any
		rel, err = i.Run(copyChart(c.o.Chart), vals)
		out.Rendered, _ = asRelease(rel)
	}
	if err != nil {
		return out, fmt.Errorf("rendering: %w", err)
	}
	return out, nil
}

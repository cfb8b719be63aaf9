package actionclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/shard"
)

// Claim is what the shard owner label of a custom resource says to this shard.
type Claim string

// The claims a custom resource can carry, for this shard (package shard).
const (
	Mine          Claim = "mine"           // this shard's, or not sharded
	Unclaimed     Claim = "unclaimed"      // no shard's yet
	OtherShard    Claim = "other shard"    // another shard of the fleet acts on it
	GoneShard     Claim = "gone shard"     // a shard outside --shards that does not run
	ForeignRunner Claim = "foreign runner" // a shard outside --shards that runs: the fleet disagrees
)

// Step is one thing that happens to a release in a reconcile. A Decision names the steps of
// one reconcile; each is carried out by a type of its own (steps.go names them), reported
// under its own name in Events and metrics (report.go), and, where it writes a revision, in the
// release history.
type Step string

// The steps.
const (
	// Refuse: the action client is refused (the reconciler reports it); nothing is written.
	Refuse Step = "refuse"
	// Stop: nothing happens; the call that would act fails with what stopped it (values that
	// cannot be built, a rendering that failed), which the reconciler reports.
	Stop Step = "stop"
	// Claim: this shard writes itself into the custom resource's owner label (conditional on
	// the resourceVersion read, so of two claims one fails), before anything else.
	ClaimStep Step = "claim"
	// Unlock: the revision an interrupted action left pending (or uninstalling) is marked
	// failed, conditional on the record's version read, before the reconciler reads it: it
	// reads the record as stored, failed, and upgrades it.
	Unlock Step = "unlock"
	// Install: the release has no record; Helm installs it.
	Install Step = "install"
	// RemoveFailedInstall: an install failed after Helm recorded it; the release is
	// uninstalled, its records purged, so that the next reconcile installs afresh (the
	// plugins' failure rollback). A failed install found when a reconcile begins (its removal
	// failed, or another process's install failed and is not yet removed) is removed before
	// the reconciler reads it: it reads no record, and installs.
	RemoveFailedInstall Step = "remove failed install"
	// Upgrade: the values or the chart render another manifest, or the last revision failed;
	// the check is answered with the rendering (or the failed record), and Helm upgrades.
	Upgrade Step = "upgrade"
	// Rollback: an upgrade failed after Helm recorded it; the release is rolled back to the
	// last revision that deployed, as the stock operators do.
	Rollback Step = "rollback"
	// Unchanged: the deployed revision renders from the inputs at hand; the check is answered
	// with that rendering, and the reconciler corrects drift, which also records the digests a
	// rendering proved.
	Unchanged Step = "unchanged"
	// RecordValues: the values render the deployed manifest, but the record holds other values
	// (a value a new version of the kind renamed or moved, or one the chart does not render).
	// The check is answered with the rendering, so the reconciler asks for the drift correction
	// (it upgrades only on a new manifest), and Helm upgrades the release instead: the record
	// then holds the resource's values (`helm get values`; the rollout tells a user's change by
	// them), and every object is applied as the upgrade writes it.
	RecordValues Step = "record values"
	// Hold: the change is a new chart's, and waits for the rollout's wave: the check is
	// answered with the rendering, the reconciler asks for the upgrade, and the deployed
	// revision stays, its drift corrected; the reconciler is answered with it, as stored.
	Hold Step = "hold"
	// Uninstall: the custom resource is being deleted; Helm uninstalls, then the hook objects
	// are deleted.
	Uninstall Step = "uninstall"
	// UninstallWhenGone: uninstall-wait. Helm uninstalls keeping the record (marked
	// uninstalled); the uninstall succeeds, and the record goes, only once every object of the
	// release is gone; until then it fails with WaitingForDeletionError, and the custom
	// resource keeps its finalizer.
	UninstallWhenGone Step = "uninstall, when its objects are gone"
)

// State is what is known of one custom resource's release when its reconcile begins: gathered
// once, before anything is written.
type State struct {
	Claim Claim
	// Deleting: the custom resource is being deleted. Wait: it asks to keep its finalizer until
	// the release's objects are gone (uninstall-wait).
	Deleting, Wait bool
	// Status is the status of the release's last revision; "" when it has none. FirstRevision:
	// that revision is the release's first, its install, which never deployed unless Status says so.
	Status        common.Status
	FirstRevision bool
	// SoleWriter: this process may be the only writer of the release (SoleWriter).
	SoleWriter bool
	// Failed: what an action needs could not be had (the record, the values, or the rendering
	// of the upgrade check).
	Failed bool
	// The upgrade check. Known: the deployed revision is known to render from the inputs at
	// hand (digests, and nothing looked up). Rendered: a dry run of the inputs ran; Same: it
	// rendered the deployed manifest; NewValues: from values other than the record's. Held:
	// the chart rollout holds this change back.
	Known, Rendered, Same, NewValues, Held bool
}

// Decision is Decide's answer: the steps of one reconcile, in order. Before the reconciler's
// first call: the claim, the unlock, the removal of a failed install (Remove); the step that
// answers its calls; and the step that follows when that one fails.
type Decision struct {
	Claim, Unlock, Remove bool
	Step                  Step
	// OnFailure follows Step when it fails after Helm recorded a revision; "" for none.
	OnFailure Step
}

// Decide is the one place that says what happens to a release. Like Flux's
// DetermineReleaseState followed by its actionForState, it reads and writes nothing itself; it
// is asked once per reconcile, and the client carries its Decision out (TestDecide lists every
// State and what may be read and written for it).
func Decide(s State) Decision {
	var d Decision
	switch s.Claim {
	case OtherShard, ForeignRunner:
		return Decision{Step: Refuse}
	case Unclaimed, GoneShard:
		d.Claim = true
	}
	status := s.Status
	if status.IsPending() || status == common.StatusUninstalling && !s.Deleting {
		// An interrupted action left it so (uninstalling: the uninstall of a failed install,
		// while the resource stays); Helm refuses every later action on it but an uninstall.
		if !s.SoleWriter {
			return Decision{Step: Refuse}
		}
		d.Unlock, status = true, common.StatusFailed
	}
	switch {
	case s.Deleting && s.Wait && status != "":
		d.Step = UninstallWhenGone
	case s.Deleting:
		d.Step = Uninstall
	case s.Failed:
		d.Step = Stop
	case status == "" || status == common.StatusUninstalled:
		d.Step, d.OnFailure = Install, RemoveFailedInstall
	case status == common.StatusFailed && s.FirstRevision:
		// A failed install: removed, then installed afresh. An upgrade over it would write
		// revisions over a release that another process may be removing, and fail and roll back
		// to nothing for as long as another release owns its objects.
		d.Remove, d.Step, d.OnFailure = true, Install, RemoveFailedInstall
	case status == common.StatusDeployed && s.Same && s.NewValues && !s.Known:
		d.Step, d.OnFailure = RecordValues, Rollback
	case status == common.StatusDeployed && (s.Known || s.Same):
		d.Step = Unchanged
	case status != common.StatusDeployed && !s.Rendered, s.Same:
		d.Step, d.OnFailure = Upgrade, Rollback // a retry of a failed or interrupted revision, whatever the chart renders
	case s.Held:
		d.Step = Hold
	default:
		d.Step, d.OnFailure = Upgrade, Rollback
	}
	return d
}

// known is what a reconcile learnt when it began (gather): never changed after.
type known struct {
	state State
	// cur is the release's last revision as read (nil: none), curErr what the read failed
	// with; err why the reconcile stops (the read, the values, or the check's rendering failed).
	cur         *release.Release
	curErr, err error
	// vals are the values, dg their digests; rendered is the check's dry run.
	vals     map[string]any
	dg       digests
	rendered *release.Release
	// outcomes are the reads to report (the record, the check).
	outcomes []Outcome
}

// gather learns, once, what Decide needs of the release: the claim, the last revision (one read
// of the record), whether this process may unlock it, the values, and whether the deployed
// revision renders from them (the digests, else a dry run) and the rollout holds the change.
// Each fact is learnt only where Decide reads it. It writes nothing but the caches it reads
// through (the digests known, the record store's): what is not the resource's to read (another
// shard's release), or cannot be learnt (the rendering of a pending or uninstalling release,
// which Helm refuses), is left out.
func (r *reconcile) gather() known {
	k := known{state: State{Deleting: r.obj.GetDeletionTimestamp() != nil, Wait: annotation(r.obj, names.UninstallWait, false)}}
	s := &k.state
	if s.Claim, k.err = r.claim(); k.err != nil {
		s.Claim = ForeignRunner // whether its shard runs is unknown: refused, naming why
		return k
	}
	if s.Claim == OtherShard || s.Claim == ForeignRunner {
		return k
	}
	start := time.Now()
	k.cur, k.curErr = during(r, s.Claim, func() (*release.Release, error) { return last(r.cfg, r.obj.GetName()) })
	if errors.Is(k.curErr, driver.ErrReleaseNotFound) {
		k.curErr = nil
	}
	k.outcomes, k.err = append(k.outcomes, Outcome{Action: ActionGet, Result: k.cur, Err: k.curErr, start: start}), k.curErr
	if k.cur != nil {
		s.Status, s.FirstRevision = k.cur.Info.Status, k.cur.Version == 1
		_, notSole := r.c.o.Unlock.why(k.cur.Info.LastDeployed)
		s.SoleWriter = notSole == nil
	}
	if s.Deleting {
		k.err = nil // the uninstall reads the history again, and reports
		return k
	}
	if k.err == nil {
		k.vals, k.err = r.c.translate(r.ctx, r.obj)
	}
	if k.err != nil {
		s.Failed = true
		return k
	}
	k.dg = r.c.o.Digests.of(r, k.vals)
	if k.cur == nil || s.Status == common.StatusUninstalled || s.Status == common.StatusUninstalling || s.Status.IsPending() ||
		s.Status == common.StatusFailed && s.FirstRevision {
		return k // nothing to render against: Helm refuses the rendering, or the release is removed first
	}
	s.Known = s.Status == common.StatusDeployed && r.c.o.Digests.knows(r.key, k.cur, k.dg)
	if !s.Known {
		r.reads.Start()
		start := time.Now()
		k.rendered, k.err = during(r, s.Claim, func() (*release.Release, error) { return r.dryRun(k.cur, k.vals) })
		k.outcomes = append(k.outcomes, Outcome{Action: ActionCheck, Result: k.rendered, Err: k.err, start: start})
		if k.err != nil {
			s.Failed = true
			return k
		}
		s.Rendered, s.Same = true, k.rendered.Manifest == k.cur.Manifest
		s.NewValues = s.Same && valuesDiffer(k.cur.Config, k.vals)
	}
	if !s.Known && !s.Same && r.c.o.Waves != nil {
		s.Held = r.c.o.Waves.Holds(r.obj, valuesDiffer(k.cur.Config, k.vals))
	}
	return k
}

// claim is what the resource's owner label says to this shard; Mine when not sharded.
func (r *reconcile) claim() (Claim, error) {
	if r.c.o.Claims == nil {
		return Mine, nil
	}
	switch owner := shard.Owner(r.obj); {
	case owner == r.c.o.Shard.ID():
		return Mine, nil
	case owner == "":
		return Unclaimed, nil
	case r.c.o.Shard.InFleet(owner):
		return OtherShard, nil
	case r.c.o.Running == nil: // no leader election: no shard is known to run
		return GoneShard, nil
	default:
		live, err := r.c.o.Running(r.ctx, owner)
		if err != nil {
			return "", fmt.Errorf("reading whether shard %q, which claims it, runs: %w", owner, err)
		}
		if live {
			return ForeignRunner, nil
		}
		return GoneShard, nil
	}
}

// refusal says why Decide refused the reconcile.
func (r *reconcile) refusal() error {
	switch {
	case r.known.err != nil:
		return r.known.err
	case r.known.state.Claim == ForeignRunner:
		return fmt.Errorf("shard %q claims it and runs (its Lease is held), but is not in --shards %v: "+
			"every shard must run with the same --shards", shard.Owner(r.obj), r.c.o.Shard.Fleet)
	case r.known.state.Claim == OtherShard:
		return fmt.Errorf("shard %q acts on it until it hands it over (label %s)", shard.Owner(r.obj), shard.OwnerLabel)
	}
	cur := r.known.cur
	_, notSole := r.c.o.Unlock.why(cur.Info.LastDeployed)
	return fmt.Errorf("release %s revision %d is %s and is left so: %w", cur.Name, cur.Version, cur.Info.Status, notSole)
}

// valuesDiffer reports whether two sets of values differ, as JSON (a release's values are
// read back from JSON, where every number is a float).
func valuesDiffer(deployed, next map[string]any) bool {
	if len(deployed) == 0 && len(next) == 0 {
		return false
	}
	a, errA := json.Marshal(deployed)
	b, errB := json.Marshal(next)
	return errA != nil || errB != nil || string(a) != string(b)
}

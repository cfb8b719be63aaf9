package actionclient

import "helm.sh/helm/v4/pkg/release/common"

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

// Step is what happens to a release in one reconcile: the answer to every call the
// reconciler makes in it.
type Step string

// The steps Decide yields.
const (
	// Refuse: the action client is refused (the reconciler reports it); nothing is written.
	Refuse Step = "refuse"
	// Stop: nothing happens; the call that would act fails with what stopped it (values that
	// cannot be built, a rendering that failed), which the reconciler reports.
	Stop Step = "stop"
	// Install: the release has no record; Helm installs it.
	Install Step = "install"
	// Upgrade: the values or the chart render another manifest, or the last revision failed;
	// the check is answered with the rendering, and Helm upgrades.
	Upgrade Step = "upgrade"
	// Unchanged: the deployed revision renders from the inputs at hand; the check is answered
	// with it, and the reconciler only corrects drift (Reconcile), which also records the
	// digests a rendering proved.
	Unchanged Step = "unchanged"
	// Hold: the change is a new chart's, and waits for the rollout's wave: the check is
	// answered with the deployed revision, and an upgrade is refused (ErrHeld).
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
// once (state.go), before anything is written.
type State struct {
	Claim Claim
	// Deleting: the custom resource is being deleted. Wait: it asks to keep its finalizer until
	// the release's objects are gone (uninstall-wait).
	Deleting, Wait bool
	// Status is the status of the release's last revision; "" when it has none.
	Status common.Status
	// SoleWriter: this process may be the only writer of the release (SoleWriter).
	SoleWriter bool
	// Failed: what an action needs could not be had (the values, or the rendering of the
	// upgrade check).
	Failed bool
	// The upgrade check. Known: the deployed revision is known to render from the inputs at
	// hand (digests, and nothing looked up). Rendered: a dry run of the inputs ran; Same: it
	// rendered the deployed manifest. Held: the chart rollout holds this change back.
	Known, Rendered, Same, Held bool
}

// Decision is Decide's answer: the step, and the writes that come before it.
type Decision struct {
	Step Step
	// Claim: this shard writes itself into the custom resource's owner label first (conditional
	// on the resourceVersion read, so of two claims one fails).
	Claim bool
	// Unlock: the revision an interrupted action left pending is marked failed first
	// (conditional on the record's version read); the reconciler sees it failed.
	Unlock bool
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
		d.Step = Install
	case status == common.StatusDeployed && (s.Known || s.Same):
		d.Step = Unchanged
	case status != common.StatusDeployed && !s.Rendered, s.Same:
		d.Step = Upgrade // a retry of a failed or interrupted revision, whatever the chart renders
	case s.Held:
		d.Step = Hold
	default:
		d.Step = Upgrade
	}
	return d
}

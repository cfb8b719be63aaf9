package actionclient

import "helm.sh/helm/v3/pkg/release"

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

// State is what the operator knows of one custom resource's release when the reconciler makes
// a call (Call): the facts Decide needs, gathered by the client before it acts.
type State struct {
	Call Action // Client (the reconcile begins), Check, Install, Upgrade, Uninstall or Reconcile

	Claim Claim
	// Status is the status of the release's last revision; "" when it has none.
	Status release.Status
	// SoleWriter: this process may be the only writer of the release (package doc, Unlocked).
	SoleWriter bool

	// The upgrade check. Known: the deployed revision is known to render from the inputs at
	// hand (digests, and nothing looked up). Rendered: a dry run of the inputs ran; Same: it
	// rendered the deployed manifest. Held: the chart rollout holds this change back.
	Known, Rendered, Same, Held bool

	// The uninstall. Wait: the resource asks to keep its finalizer until the release's objects
	// are gone (uninstall-wait); Remaining: some still exist.
	Wait, Remaining bool
}

// Step is what to do next: the answer to one call, or a write that must come first (after
// which the client decides again).
type Step string

// The steps Decide yields.
const (
	// Refuse fails the call: nothing is read or written.
	Refuse Step = "refuse"
	// ClaimIt writes this shard into the custom resource's owner label (conditional on the
	// resource version read), then decides again as Mine.
	ClaimIt Step = "claim"
	// UnlockIt marks the pending revision failed (conditional on the record's version read),
	// then decides again with the failed status.
	UnlockIt Step = "unlock"
	// Proceed passes the call to Helm as the reconciler made it: the begun reconcile reads
	// the release; an install or upgrade renders and writes, recording its digests; an
	// uninstall deletes.
	Proceed Step = "proceed"
	// RenderIt runs the upgrade check's dry run (renders, reads the release's history, writes
	// nothing), then decides again with what it rendered.
	RenderIt Step = "render"
	// Unchanged answers the check with the deployed revision: the reconciler only corrects
	// drift. After a dry run that proved it, the revision's digest labels are written by the
	// drift correction that follows (Reconcile), not by the check.
	Unchanged Step = "unchanged"
	// Upgrade answers the check with the dry run's rendering: the reconciler upgrades.
	UpgradeIt Step = "upgrade"
	// Hold answers the check with the deployed revision, and refuses an upgrade: the change
	// waits for the chart rollout's wave.
	Hold Step = "hold"
	// KeepHistory uninstalls but keeps the release record, marked uninstalled, while the
	// objects go (uninstall-wait); the next reconcile decides again.
	KeepHistory Step = "uninstall, keeping the record"
	// WaitForObjects fails the uninstall with WaitingForDeletionError: the resource keeps its
	// finalizer until the objects are gone.
	WaitForObjects Step = "wait for the objects"
)

// Decide is the one place that says what happens to a release: every layer of Helm calls the
// reconciler makes asks it, with what is known at that call, and does what it says. Like Flux's
// DetermineReleaseState followed by its actionForState, it reads and writes nothing itself;
// each Step says what the client may read and write to carry it out (TestDecide lists them).
func Decide(s State) Step {
	switch s.Claim {
	case OtherShard, ForeignRunner:
		return Refuse
	case Unclaimed, GoneShard:
		if s.Call == Client {
			return ClaimIt
		}
		return Refuse // a claim lost since the reconcile began
	}
	if s.Status.IsPending() {
		// An interrupted action left it so; Helm refuses every later action on it.
		if s.SoleWriter {
			return UnlockIt
		}
		return Refuse
	}
	switch s.Call {
	case Check:
		// The reconciler's "does the release need an upgrade?" (a dry-run upgrade, after which it
		// upgrades when the manifest differs or the release is not deployed).
		switch {
		case s.Status == release.StatusDeployed && s.Known:
			return Unchanged
		case !s.Rendered:
			return RenderIt
		case s.Same:
			return Unchanged // a failed release is upgraded whatever the answer: a retry
		case s.Held:
			return Hold
		}
		return UpgradeIt
	case Upgrade:
		if s.Held {
			return Hold
		}
	case Uninstall:
		switch {
		case !s.Wait || s.Status == "":
			return Proceed
		case s.Status != release.StatusUninstalled:
			return KeepHistory
		case s.Remaining:
			return WaitForObjects
		}
	}
	return Proceed
}

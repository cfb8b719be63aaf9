package actionclient

import (
	"fmt"
	"testing"

	"helm.sh/helm/v3/pkg/release"
)

// The decision, state by state: what the reconciler asks (the call), what is known, what to do,
// and what doing it may read and write. Every step is yielded by some state; a state the table
// does not list is a change of behaviour to add here first.
func TestDecide(t *testing.T) {
	const (
		deployed    = release.StatusDeployed
		failed      = release.StatusFailed
		superseded  = release.StatusSuperseded
		pending     = release.StatusPendingUpgrade
		installing  = release.StatusPendingInstall
		uninstalled = release.StatusUninstalled
		none        = release.Status("")
	)
	for _, tc := range []struct {
		state State
		want  Step
		may   string // what carrying the step out may read and write
	}{
		// The reconcile begins (ActionClientFor): the claim, then the release as read.
		{State{Call: Client, Claim: OtherShard}, Refuse, "nothing"},
		{State{Call: Client, Claim: ForeignRunner}, Refuse, "nothing (the claiming shard's Lease was read)"},
		{State{Call: Client, Claim: Unclaimed}, ClaimIt, "write the resource's owner label, conditional on its version"},
		{State{Call: Client, Claim: GoneShard}, ClaimIt, "write the resource's owner label, conditional on its version"},
		{State{Call: Client, Claim: Mine, Status: none}, Proceed, "read the release"},
		{State{Call: Client, Claim: Mine, Status: deployed}, Proceed, "read the release"},
		{State{Call: Client, Claim: Mine, Status: pending, SoleWriter: true}, UnlockIt, "write the pending record as failed, conditional on its version"},
		{State{Call: Client, Claim: Mine, Status: installing, SoleWriter: true}, UnlockIt, "write the pending record as failed, conditional on its version"},
		{State{Call: Client, Claim: Mine, Status: pending}, Refuse, "nothing: the release is left pending"},
		// A claim lost after the reconcile began refuses every later call.
		{State{Call: Check, Claim: Unclaimed, Status: deployed}, Refuse, "nothing"},
		{State{Call: Install, Claim: OtherShard}, Refuse, "nothing"},

		// The upgrade check (a dry-run upgrade).
		{State{Call: Check, Claim: Mine, Status: deployed, Known: true}, Unchanged, "nothing"},
		{State{Call: Check, Claim: Mine, Status: deployed}, RenderIt, "read the release history; render (lookups read)"},
		{State{Call: Check, Claim: Mine, Status: failed, Known: true}, RenderIt, "read the release history; render (lookups read)"},
		{State{Call: Check, Claim: Mine, Status: superseded}, RenderIt, "read the release history; render (lookups read)"},
		{State{Call: Check, Claim: Mine, Status: deployed, Rendered: true, Same: true}, Unchanged, "nothing (the digests proved are written by Reconcile)"},
		{State{Call: Check, Claim: Mine, Status: failed, Rendered: true, Same: true}, Unchanged, "nothing (the reconciler retries a failed release)"},
		{State{Call: Check, Claim: Mine, Status: deployed, Rendered: true}, UpgradeIt, "nothing"},
		{State{Call: Check, Claim: Mine, Status: deployed, Rendered: true, Held: true}, Hold, "nothing"},

		// The actions.
		{State{Call: Install, Claim: Mine, Status: none}, Proceed, "render; write the objects and the record with its digests"},
		{State{Call: Upgrade, Claim: Mine, Status: deployed}, Proceed, "render; write the objects and the record with its digests"},
		{State{Call: Upgrade, Claim: Mine, Status: failed, Held: true}, Hold, "nothing: the upgrade waits for its wave"},
		{State{Call: Reconcile, Claim: Mine, Status: deployed}, Proceed, "write drifted objects; the record's proven digests"},
		{State{Call: Uninstall, Claim: Mine, Status: deployed}, Proceed, "delete the objects, the hooks and the records"},
		{State{Call: Uninstall, Claim: Mine, Status: none, Wait: true}, Proceed, "nothing to delete"},
		{State{Call: Uninstall, Claim: Mine, Status: deployed, Wait: true}, KeepHistory, "delete the objects and hooks; write the record as uninstalled"},
		{State{Call: Uninstall, Claim: Mine, Status: uninstalled, Wait: true, Remaining: true}, WaitForObjects, "read the objects of the manifest"},
		{State{Call: Uninstall, Claim: Mine, Status: uninstalled, Wait: true}, Proceed, "delete the records"},
		{State{Call: Uninstall, Claim: Mine, Status: pending, SoleWriter: true}, UnlockIt, "write the pending record as failed"},
	} {
		t.Run(fmt.Sprintf("%s %+v", tc.state.Call, tc.state), func(t *testing.T) {
			if got := Decide(tc.state); got != tc.want {
				t.Errorf("Decide = %q, want %q (%s)", got, tc.want, tc.may)
			}
		})
	}
}

// Every step is some state's answer: a step the table does not reach is dead.
func TestEveryStepIsDecided(t *testing.T) {
	reached := map[Step]bool{}
	for _, call := range []Action{Client, Check, Install, Upgrade, Uninstall, Reconcile} {
		for _, claim := range []Claim{Mine, Unclaimed, OtherShard, GoneShard, ForeignRunner} {
			for _, status := range []release.Status{"", release.StatusDeployed, release.StatusFailed,
				release.StatusPendingUpgrade, release.StatusUninstalled} {
				for bits := range 1 << 7 {
					s := State{Call: call, Claim: claim, Status: status, SoleWriter: bits&1 != 0, Known: bits&2 != 0,
						Rendered: bits&4 != 0, Same: bits&8 != 0, Held: bits&16 != 0, Wait: bits&32 != 0, Remaining: bits&64 != 0}
					reached[Decide(s)] = true
				}
			}
		}
	}
	for _, step := range []Step{Refuse, ClaimIt, UnlockIt, Proceed, RenderIt, Unchanged, UpgradeIt, Hold, KeepHistory, WaitForObjects} {
		if !reached[step] {
			t.Errorf("no state yields %q", step)
		}
	}
}

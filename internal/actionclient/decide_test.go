package actionclient

import (
	"fmt"
	"testing"

	"helm.sh/helm/v4/pkg/release/common"
)

// The decision, state by state: what is known when the reconcile begins, the steps that happen,
// and what carrying them out may read and write. Every step is named by some row; a state the
// table does not list is a change of behaviour to add here first.
func TestDecide(t *testing.T) {
	const (
		deployed    = common.StatusDeployed
		failed      = common.StatusFailed
		superseded  = common.StatusSuperseded
		pending     = common.StatusPendingUpgrade
		installing  = common.StatusPendingInstall
		uninstalled = common.StatusUninstalled
		cleaning    = common.StatusUninstalling
		none        = common.Status("")
	)
	// The step that answers the reconciler, with what follows it when it fails.
	step := func(s Step) Decision {
		return Decision{Step: s, OnFailure: map[Step]Step{Install: RemoveFailedInstall, Upgrade: Rollback, RecordValues: Rollback}[s]}
	}
	claimed := func(s Step) Decision { d := step(s); d.Claim = true; return d }
	unlocked := func(s Step) Decision { d := step(s); d.Unlock = true; return d }
	removed := func(d Decision) Decision { d.Remove = true; return d }
	covered := map[Step]bool{}
	for _, tc := range []struct {
		state State
		want  Decision
		may   string // what carrying the decision out may read and write
	}{
		// The claim.
		{State{Claim: OtherShard, Status: deployed}, Decision{Step: Refuse}, "nothing: another shard acts on it"},
		{State{Claim: ForeignRunner}, Decision{Step: Refuse}, "nothing (the claiming shard's Lease was read)"},
		{State{Claim: Unclaimed}, claimed(Install), "write the resource's owner label, conditional on its version; then install"},
		{State{Claim: GoneShard, Status: deployed, Known: true}, claimed(Unchanged), "write the owner label; then correct drift"},
		{State{Claim: Unclaimed, Deleting: true, Status: deployed}, claimed(Uninstall), "write the owner label; then uninstall"},

		// A release an interrupted action left pending.
		{State{Claim: Mine, Status: pending, SoleWriter: true}, unlocked(Upgrade), "write the pending record as failed, conditional on its version; then upgrade"},
		{State{Claim: Mine, Status: installing, FirstRevision: true, SoleWriter: true}, removed(unlocked(Install)),
			"write the pending record as failed; delete the objects it names that are its own, and its record; then install"},
		{State{Claim: Mine, Status: pending}, Decision{Step: Refuse}, "nothing: the release is left pending"},
		{State{Claim: Mine, Status: pending, SoleWriter: true, Deleting: true}, unlocked(Uninstall), "write the record as failed; then uninstall"},
		// The uninstall of a failed install, interrupted: the resource still wants its release.
		{State{Claim: Mine, Status: cleaning, FirstRevision: true, SoleWriter: true}, removed(unlocked(Install)),
			"write the uninstalling record as failed; finish its removal; then install"},
		{State{Claim: Mine, Status: cleaning, SoleWriter: true}, unlocked(Upgrade), "write the uninstalling record as failed; then upgrade over it"},
		{State{Claim: Mine, Status: cleaning}, Decision{Step: Refuse}, "nothing: another process may be uninstalling it"},
		{State{Claim: Mine, Status: cleaning, Deleting: true}, step(Uninstall), "finish the uninstall"},

		// What the values and the chart render.
		{State{Claim: Mine, Status: none}, step(Install), "render; write the record with its digests and the objects"},
		{State{Claim: Mine, Status: uninstalled}, step(Install), "render; write the record and the objects"},
		{State{Claim: Mine, Failed: true, Status: deployed}, step(Stop), "nothing: the reconciler reports what failed"},
		{State{Claim: Mine, Status: deployed, Known: true}, step(Unchanged), "write drifted objects"},
		{State{Claim: Mine, Status: deployed, Rendered: true, Same: true}, step(Unchanged), "write drifted objects; the record's proven digests"},
		{State{Claim: Mine, Status: deployed, Rendered: true, Same: true, NewValues: true}, step(RecordValues),
			"render; write the record of the new values with its digests, and the objects (the reconciler asked for the drift correction)"},
		{State{Claim: Mine, Status: deployed, Known: true, Same: true, NewValues: true}, step(Unchanged), "write drifted objects (digests prove the values the record's)"},
		{State{Claim: Mine, Status: deployed, Rendered: true}, step(Upgrade), "render; write the record with its digests and the objects"},
		{State{Claim: Mine, Status: deployed, Rendered: true, Held: true}, step(Hold),
			"write drifted objects; tell the rollout it waits; answer the upgrade with the deployed record"},
		{State{Claim: Mine, Status: failed, Rendered: true, Same: true}, step(Upgrade), "render; write (a retry of a failed release)"},
		{State{Claim: Mine, Status: failed, FirstRevision: true}, removed(step(Install)),
			"delete the objects the failed install's record names that are its own, and its record; then install"},
		{State{Claim: Mine, Status: deployed, FirstRevision: true, Known: true}, step(Unchanged), "write drifted objects"},
		{State{Claim: Mine, Status: failed, Rendered: true, Same: true, NewValues: true}, step(Upgrade), "render; write (a retry, with the new values)"},
		{State{Claim: Mine, Status: superseded, Rendered: true, Same: true}, step(Upgrade), "render; write (a retry)"},
		{State{Claim: Mine, Status: failed, Rendered: true, Held: true}, step(Hold), "nothing: the reconciler's upgrade is answered ErrHeld"},

		// The uninstall.
		{State{Claim: Mine, Deleting: true, Status: deployed}, step(Uninstall), "delete the objects, the hooks and the records"},
		{State{Claim: Mine, Deleting: true, Status: none, Wait: true}, step(Uninstall), "nothing to delete"},
		{State{Claim: Mine, Deleting: true, Status: deployed, Wait: true}, step(UninstallWhenGone),
			"delete the objects and hooks; write the record as uninstalled; read the objects; delete the records once none is left"},
		{State{Claim: Mine, Deleting: true, Status: uninstalled, Wait: true}, step(UninstallWhenGone),
			"read the objects of the manifest; delete the records once none is left"},
	} {
		t.Run(fmt.Sprintf("%+v", tc.state), func(t *testing.T) {
			if got := Decide(tc.state); got != tc.want {
				t.Errorf("Decide = %+v, want %+v (%s)", got, tc.want, tc.may)
			}
		})
		for _, s := range all(tc.want) {
			covered[s] = true
		}
	}
	for _, s := range steps {
		if !covered[s] {
			t.Errorf("step %q is in no row of the table", s)
		}
	}
}

// Every step is some state's answer: a step no state reaches is dead.
func TestEveryStepIsDecided(t *testing.T) {
	reached := map[Step]bool{}
	for _, claim := range []Claim{Mine, Unclaimed, OtherShard, GoneShard, ForeignRunner} {
		for _, status := range []common.Status{"", common.StatusDeployed, common.StatusFailed,
			common.StatusPendingUpgrade, common.StatusUninstalling, common.StatusUninstalled} {
			for bits := range 1 << 10 {
				s := State{Claim: claim, Status: status, SoleWriter: bits&1 != 0, Known: bits&2 != 0,
					Rendered: bits&4 != 0, Same: bits&8 != 0, Held: bits&16 != 0, Wait: bits&32 != 0,
					Deleting: bits&64 != 0, Failed: bits&128 != 0, NewValues: bits&256 != 0, FirstRevision: bits&512 != 0}
				for _, step := range all(Decide(s)) {
					reached[step] = true
				}
			}
		}
	}
	for _, step := range steps {
		if !reached[step] {
			t.Errorf("no state yields %q", step)
		}
	}
}

// steps lists every step.
var steps = []Step{Refuse, Stop, ClaimStep, Unlock, Install, RemoveFailedInstall, Upgrade, Rollback, Unchanged, RecordValues,
	Hold, Uninstall, UninstallWhenGone}

// all lists the decision's steps in the order they may run.
func all(d Decision) []Step {
	var out []Step
	if d.Claim {
		out = append(out, ClaimStep)
	}
	if d.Unlock {
		out = append(out, Unlock)
	}
	if d.Remove {
		out = append(out, RemoveFailedInstall)
	}
	out = append(out, d.Step)
	if d.OnFailure != "" {
		out = append(out, d.OnFailure)
	}
	return out
}

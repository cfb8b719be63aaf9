package actionclient

import (
	"encoding/json"
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/release/common"

	"github.com/example/myproxy-operator/internal/annotations"
	"github.com/example/myproxy-operator/internal/shard"
)

// gather learns, once, what Decide needs of the release: the claim, the last revision (one read
// of the record), whether this process may unlock it, the values, and whether the deployed
// revision renders from them (the digests, else a dry run) and the rollout holds the change.
// Each fact is learnt only where Decide reads it, and nothing is written: what is not the
// resource's to read (another shard's release), or cannot be learnt (the rendering of a pending or
// uninstalling release, which Helm refuses), is left out.
func (r *reconcile) gather() State {
	s := State{Deleting: r.obj.GetDeletionTimestamp() != nil, Wait: annotations.Bool(r.obj, annotations.UninstallWait, false)}
	if s.Claim, r.err = r.claim(); r.err != nil {
		s.Claim = ForeignRunner // whether its shard runs is unknown: refused, naming why
		return s
	}
	if s.Claim == OtherShard || s.Claim == ForeignRunner {
		return s
	}
	r.state.Claim = s.Claim // what the reads below may do (during)
	r.read()
	if r.cur != nil {
		s.Status = r.cur.Info.Status
		_, notSole := r.c.o.Unlock.why(r.cur.Info.LastDeployed)
		s.SoleWriter = notSole == nil
	}
	if s.Deleting {
		r.err = nil // the uninstall reads the history again, and reports
		return s
	}
	if r.err == nil {
		r.vals, r.err = r.values()
	}
	if r.err != nil {
		s.Failed = true
		return s
	}
	r.dg, r.digested = r.c.o.Digests.of(r)
	if r.cur == nil || s.Status == common.StatusUninstalled || s.Status == common.StatusUninstalling || s.Status.IsPending() {
		return s
	}
	s.Known = r.digested && s.Status == common.StatusDeployed && r.c.o.Digests.knows(r.key, r.cur, r.dg)
	if !s.Known {
		r.reads.Start()
		start := time.Now()
		r.rendered, r.err = during(r, r.dryRun)
		r.report(Outcome{Action: ActionCheck, Result: r.rendered, Err: r.err}, start)
		if r.err != nil {
			s.Failed = true
			return s
		}
		s.Rendered, s.Same = true, r.rendered.Manifest == r.cur.Manifest
		if s.Same && r.digested && s.Status == common.StatusDeployed {
			r.proved = r.c.o.Digests.prove(r, r.reads.Reads())
		}
	}
	if !s.Known && !s.Same && r.c.o.Waves != nil {
		s.Held = r.c.o.Waves.Holds(r.obj, valuesDiffer(r.cur.Config, r.vals))
	}
	return s
}

// claim is what the resource's owner label says to this shard; Mine when not sharded.
func (r *reconcile) claim() (Claim, error) {
	s := r.c.o.Shard
	if r.c.o.Claims == nil {
		return Mine, nil
	}
	switch owner := shard.Owner(r.obj); {
	case owner == s.ID():
		return Mine, nil
	case owner == "":
		return Unclaimed, nil
	case s.InFleet(owner):
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

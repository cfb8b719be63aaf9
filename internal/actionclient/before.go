package actionclient

import (
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/release/common"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/shard"
)

// The steps that come before the reconciler's first call, in begin.

// claimStep writes this shard into the custom resource's owner label. The update carries the
// resource version read, so of two claims one fails.
type claimStep struct{ r *reconcile }

func (s claimStep) run() error {
	r := s.r
	start := time.Now()
	claimed := r.obj.DeepCopy()
	claimed.SetLabels(labels.Merge(claimed.GetLabels(), labels.Set{shard.OwnerLabel: r.c.o.Shard.ID()}))
	err := r.c.o.Writer.Update(r.ctx, claimed)
	if err != nil {
		err = fmt.Errorf("claiming it for shard %q: %w", r.c.o.Shard.ID(), err)
	} else {
		r.obj.SetLabels(claimed.GetLabels())
		r.obj.SetResourceVersion(claimed.GetResourceVersion())
		r.c.o.Claims.Reclaim(r.key)
		r.claimed = true
	}
	r.c.report(r.obj, Outcome{Action: ActionClaim, Err: err}, start)
	return err
}

// UnlockedDescription begins the description of a revision that was unlocked (marked failed).
const UnlockedDescription = "marked failed by myproxy-operator"

// unlockStep marks failed the revision an interrupted action left pending (or uninstalling),
// conditional on the record's version read, so that the reconciler reads it failed, as
// stored, and upgrades it (or uninstalls it).
type unlockStep struct{ r *reconcile }

func (s unlockStep) run() error {
	r := s.r
	start := time.Now()
	why, _ := r.c.o.Unlock.why(r.known.cur.Info.LastDeployed)
	rel, was := *r.known.cur, r.known.cur.Info.Status
	info := *rel.Info
	info.Status, info.Description = common.StatusFailed, fmt.Sprintf("%s: left %s by an interrupted action (%s)", UnlockedDescription, was, why)
	rel.Info = &info
	_, err := act(r, func() (any, error) { return nil, r.cfg.Releases.Update(&rel) })
	if err != nil {
		err = fmt.Errorf("release %s revision %d is %s and could not be marked failed: %w", rel.Name, rel.Version, was, err)
	} else {
		r.stored = &rel
		r.c.o.Recorder.Eventf(r.obj, corev1.EventTypeWarning, names.ReasonReleaseUnlocked,
			"release %s revision %d was left %s by an interrupted action; marked failed to retry (%s)", rel.Name, rel.Version, was, why)
	}
	r.c.report(r.obj, Outcome{Action: ActionUnlock, Result: r.stored, Err: err}, start)
	return err
}

// Package actionclient is what happens to a custom resource's Helm release: the action clients
// helm-operator-plugins' reconciler uses, through its ActionClientGetter seam (New, client.go),
// and the one function that decides, at every call the reconciler makes, what to do (Decide,
// decide.go): claim, unlock, answer the upgrade check from digests (digest.go), render, hold for
// the rollout's wave, upgrade, uninstall, wait for the objects to go. Every call that reaches
// Helm is reported to Events (events.go) and metrics (metrics.go), which the upstream reconciler
// lacks. Below it are the plugins' clients, one per rollback choice, each handing Helm a copy of
// the chart (base.go).
package actionclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Action names a Helm action, and the reconciler's call a decision answers.
type Action string

// The actions. Client is the beginning of a reconcile (the action client is made); Check is the
// dry-run upgrade the reconciler runs to decide whether an upgrade is needed; Reconcile
// restores drifted objects.
const (
	Client    Action = "client"
	Get       Action = "get"
	Check     Action = "check"
	Install   Action = "install"
	Upgrade   Action = "upgrade"
	Uninstall Action = "uninstall"
	Reconcile Action = "reconcile"
)

// Outcome is what one Helm action did.
type Outcome struct {
	Object   client.Object // the custom resource
	Action   Action
	Release  string           // release name
	Result   *release.Release // nil when the action returns none
	Chart    *chart.Chart     // for install, upgrade and check
	Err      error
	Duration time.Duration
}

// UnlockedDescription begins the description of a revision that was unlocked (marked failed).
const UnlockedDescription = "marked failed by myproxy-operator"

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

// isDryRun applies the upgrade options to a scratch action to learn whether this is a dry run.
func isDryRun(opts []helmclient.UpgradeOption) bool {
	var u action.Upgrade
	for _, o := range opts {
		if err := o(&u); err != nil {
			return false
		}
	}
	return u.DryRun
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

package actionclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
)

// Unlocked returns a getter whose action clients repair a release that an interrupted action
// left pending (pending-install, pending-upgrade, pending-rollback): the operator was killed
// mid-action, or lost its node. Helm refuses every later action on such a release ("another
// operation is in progress"), so the upstream reconciler would fail on it forever.
//
// A pending release is unlocked only when this process may be its only writer (SoleWriter):
//   - with leader election, while this replica holds the Lease: reconciles of one resource never
//     overlap, and a former leader stops acting before its Lease can pass to another replica
//     (the renew deadline is shorter than the lease duration; a leader that was paused instead
//     is fenced by package leasefence);
//   - without it (`make run`, several unelected replicas, a person's `helm upgrade`), once the
//     pending revision is older than PendingAfter, which no honest action lasts: until then the
//     reconcile fails with a message saying so, and retries with backoff.
//
// The pending revision is then marked failed, with a description saying why, and the reconciler
// goes on as after any failed action: it upgrades from there (Helm upgrades a failed release,
// even one that never deployed), adopting whatever objects the interrupted action created.
func Unlocked(next helmclient.ActionClientGetter, recorder record.EventRecorder, w SoleWriter) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		ac, err := next.ActionClientFor(ctx, obj)
		if err != nil {
			return nil, err
		}
		return &unlockingClient{ActionInterface: ac, obj: obj, recorder: recorder, writer: w}, nil
	})
}

// UnlockedDescription begins the description of a revision that Unlocked marked failed.
const UnlockedDescription = "marked failed by myproxy-operator"

// SoleWriter says when this process may be the only writer of a release.
type SoleWriter struct {
	// Leading reports whether this replica holds the leader Lease; nil without leader election.
	Leading func() bool
	// PendingAfter is how long a release must have been pending, without leader election,
	// before it is taken as abandoned.
	PendingAfter time.Duration
	// Now is the wall clock (Helm records when an action began in wall-clock time).
	Now func() time.Time
}

// why returns why a release pending since `since` may be unlocked now, or an error saying why not.
func (w SoleWriter) why(since time.Time) (string, error) {
	if w.Leading != nil {
		if w.Leading() {
			return "this replica holds the leader Lease", nil
		}
		return "", errors.New("this replica does not hold the leader Lease")
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	age := now().Sub(since)
	if age >= w.PendingAfter {
		return fmt.Sprintf("leader election is off and it was pending for %s, longer than --unlock-pending-after %s",
			age.Round(time.Second), w.PendingAfter), nil
	}
	return "", fmt.Errorf("leader election is off, so another process may be acting on it; it is taken as "+
		"abandoned once pending for --unlock-pending-after %s (now %s)", w.PendingAfter, age.Round(time.Second))
}

type unlockingClient struct {
	helmclient.ActionInterface
	obj      client.Object
	recorder record.EventRecorder
	writer   SoleWriter
}

func (c *unlockingClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	if err != nil || rel.Info == nil || !rel.Info.Status.IsPending() {
		return rel, err
	}
	was := rel.Info.Status
	why, err := c.writer.why(rel.Info.LastDeployed.Time)
	if err != nil {
		return nil, fmt.Errorf("release %s revision %d is %s and is left so: %w", name, rel.Version, was, err)
	}
	rel.Info.Status = release.StatusFailed
	rel.Info.Description = fmt.Sprintf("%s: left %s by an interrupted action (%s)", UnlockedDescription, was, why)
	if err := c.Config().Releases.Update(rel); err != nil {
		return nil, fmt.Errorf("release %s revision %d is %s and could not be marked failed: %w", name, rel.Version, was, err)
	}
	c.recorder.Eventf(c.obj, corev1.EventTypeWarning, names.ReasonReleaseUnlocked,
		"release %s revision %d was left %s by an interrupted action; marked failed to retry (%s)", name, rel.Version, was, why)
	return rel, nil
}

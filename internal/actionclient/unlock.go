package actionclient

import (
	"context"
	"fmt"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReasonReleaseUnlocked is the Event reason for a release freed from a pending state.
const ReasonReleaseUnlocked = "ReleaseUnlocked"

// Unlocked returns a getter whose action clients repair a release that an interrupted action
// left pending (pending-install, pending-upgrade, pending-rollback): the operator was killed
// mid-action, or lost its node. Helm refuses every later action on such a release ("another
// operation is in progress"), so the upstream reconciler would fail on it forever.
//
// When a reconcile reads a pending release, nothing else can be acting on it: reconciles of one
// resource never overlap, and with leader election a former leader stops acting before its
// Lease can pass to another replica (the renew deadline is shorter than the lease duration; a
// leader that was paused instead is fenced by package leasefence).
// So the pending revision is marked failed, with a description saying why, and the reconciler
// goes on as after any failed action: it upgrades from there (Helm upgrades a failed release,
// even one that never deployed), adopting whatever objects the interrupted action created.
func Unlocked(next helmclient.ActionClientGetter, recorder record.EventRecorder) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		ac, err := next.ActionClientFor(ctx, obj)
		if err != nil {
			return nil, err
		}
		return &unlockingClient{ActionInterface: ac, obj: obj, recorder: recorder}, nil
	})
}

type unlockingClient struct {
	helmclient.ActionInterface
	obj      client.Object
	recorder record.EventRecorder
}

func (c *unlockingClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	if err != nil || rel.Info == nil || !rel.Info.Status.IsPending() {
		return rel, err
	}
	was := rel.Info.Status
	rel.Info.Status = release.StatusFailed
	rel.Info.Description = fmt.Sprintf("marked failed by myproxy-operator: left %s by an interrupted action", was)
	if err := c.Config().Releases.Update(rel); err != nil {
		return nil, fmt.Errorf("release %s revision %d is %s and could not be marked failed: %w", name, rel.Version, was, err)
	}
	c.recorder.Eventf(c.obj, corev1.EventTypeWarning, ReasonReleaseUnlocked,
		"release %s revision %d was left %s by an interrupted action; marked failed to retry", name, rel.Version, was)
	return rel, nil
}

package actionclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/annotations"
)

// RollbackChoice is an action client getter that hands out Forced's action clients, whose
// failed upgrades roll back with --force as the stock operators' do, unless the custom
// resource's rollback-force annotation is false: then Unforced's. The plugins fix rollback
// options per getter, so each choice is a getter of its own.
type RollbackChoice struct {
	Forced, Unforced helmclient.ActionClientGetter
}

// ActionClientFor implements helmclient.ActionClientGetter.
func (r RollbackChoice) ActionClientFor(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
	if annotations.Bool(obj, annotations.RollbackForce, true) {
		return r.Forced.ActionClientFor(ctx, obj)
	}
	return r.Unforced.ActionClientFor(ctx, obj)
}

// WaitingForDeletionError says that an uninstall is done but objects of the release are still
// being deleted, and the custom resource keeps its finalizer until they are gone.
type WaitingForDeletionError struct {
	Release   string
	Remaining []string
}

func (e *WaitingForDeletionError) Error() string {
	return fmt.Sprintf("%s=true: release %s is uninstalled; waiting until all its objects are deleted (still present: %s)",
		annotations.UninstallWait, e.Release, strings.Join(e.Remaining, ", "))
}

// UninstallWaiting returns a getter whose uninstalls, for a custom resource annotated
// uninstall-wait=true, succeed only once every object of the release is gone from the cluster,
// as in the stock operator: objects with finalizers of their own, or a foreground deletion,
// keep the custom resource (and its finalizer) until they are deleted. The wait reads the
// objects from the release record: the uninstall keeps its history (the record, marked
// uninstalled, is the state of the wait, and survives a restart), and the records are purged
// once nothing remains. To the reconciler, such a release is gone, as after any uninstall.
func UninstallWaiting(next helmclient.ActionClientGetter) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		ac, err := next.ActionClientFor(ctx, obj)
		if err != nil || !annotations.Bool(obj, annotations.UninstallWait, false) {
			return ac, err
		}
		return &waitingClient{ActionInterface: ac}, nil
	})
}

type waitingClient struct {
	helmclient.ActionInterface
}

// keepHistory keeps the record of an uninstalled release, marked uninstalled.
func keepHistory(u *action.Uninstall) error {
	u.KeepHistory = true
	return nil
}

func uninstalled(rel *release.Release) bool {
	return rel != nil && rel.Info != nil && rel.Info.Status == release.StatusUninstalled
}

// Get implements helmclient.ActionInterface: a release uninstalled while its objects go is not
// found, as it would be without the wait.
func (c *waitingClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	if err == nil && uninstalled(rel) {
		return nil, fmt.Errorf("release %s is uninstalled, waiting for its objects to go: %w", name, driver.ErrReleaseNotFound)
	}
	return rel, err
}

// Uninstall implements helmclient.ActionInterface.
func (c *waitingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	rel, err := c.ActionInterface.Get(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return c.ActionInterface.Uninstall(name, opts...) // nothing to wait for
	}
	if err != nil {
		return nil, err
	}
	var resp *release.UninstallReleaseResponse
	if !uninstalled(rel) {
		if resp, err = c.ActionInterface.Uninstall(name, append(slices.Clone(opts), keepHistory)...); err != nil {
			return resp, err
		}
	}
	remaining, err := c.remaining(rel.Manifest)
	if err != nil {
		return resp, fmt.Errorf("%s: cannot tell whether the objects of release %s are deleted: %w",
			annotations.UninstallWait, name, err)
	}
	if len(remaining) > 0 {
		return resp, &WaitingForDeletionError{Release: name, Remaining: remaining}
	}
	// Helm purges the records of a release it finds uninstalled.
	return c.ActionInterface.Uninstall(name, opts...)
}

// remaining lists the objects of manifest that still exist.
func (c *waitingClient) remaining(manifest string) ([]string, error) {
	if strings.TrimSpace(manifest) == "" {
		return nil, nil
	}
	objs, err := c.Config().KubeClient.Build(strings.NewReader(manifest), false)
	if err != nil {
		return nil, err
	}
	var left []string
	for _, info := range objs {
		err := info.Get()
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, err
		default:
			left = append(left, fmt.Sprintf("%s %s", info.Mapping.GroupVersionKind.Kind, info.Name))
		}
	}
	return left, nil
}

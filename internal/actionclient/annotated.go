package actionclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/annotations"
	"github.com/example/myproxy-operator/internal/names"
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
// keep the custom resource (and its finalizer) until they are deleted. A later reconcile, when
// the release record is gone already, checks the manifest the plugins keep in
// status.deployedRelease.
func UninstallWaiting(next helmclient.ActionClientGetter) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		ac, err := next.ActionClientFor(ctx, obj)
		if err != nil || !annotations.Bool(obj, annotations.UninstallWait, false) {
			return ac, err
		}
		return &waitingClient{ActionInterface: ac, obj: obj}, nil
	})
}

type waitingClient struct {
	helmclient.ActionInterface
	obj client.Object
}

func (c *waitingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	manifest := deployedManifest(c.obj)
	if rel, err := c.Get(name); err == nil {
		manifest = rel.Manifest
	}
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return resp, err
	}
	remaining, checkErr := c.remaining(manifest)
	if checkErr != nil {
		return resp, fmt.Errorf("%s: cannot tell whether the objects of release %s are deleted: %w",
			annotations.UninstallWait, name, checkErr)
	}
	if len(remaining) > 0 {
		return resp, &WaitingForDeletionError{Release: name, Remaining: remaining}
	}
	return resp, err
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

// deployedManifest is the manifest the plugins keep in status.deployedRelease.
func deployedManifest(obj client.Object) string {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	m, _, _ := unstructured.NestedString(u.Object, "status", names.StatusDeployedRelease, names.DeployedReleaseManifest)
	return m
}

package actionclient

import (
	"context"
	"errors"
	"fmt"
	"strings"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"github.com/operator-framework/helm-operator-plugins/pkg/manifestutil"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// HooksUninstalled returns a getter whose uninstalls also delete the release's hook objects.
//
// Helm's uninstall deletes the objects of the release's manifest and leaves its hooks (a
// post-install Job, a PodDisruptionBudget a chart makes a hook) to their delete policy. The
// stock operator-sdk helm-operator gives hooks an owner reference to the custom resource, so
// the garbage collector takes them after it; helm-operator-plugins owns only the manifest. So
// once an uninstall has succeeded, the objects of every hook of the uninstalled release that
// still exist are deleted too, through Helm's own client (the release's reach and identity
// apply), except those the chart keeps (helm.sh/resource-policy: keep), as Helm keeps such
// objects of the manifest. This does not depend on the garbage collector.
func HooksUninstalled(next helmclient.ActionClientGetter) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		ac, err := next.ActionClientFor(ctx, obj)
		if err != nil {
			return nil, err
		}
		return &hookCleaningClient{ActionInterface: ac}, nil
	})
}

type hookCleaningClient struct {
	helmclient.ActionInterface
}

// Uninstall implements helmclient.ActionInterface.
func (c *hookCleaningClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	if err != nil || resp == nil || resp.Release == nil {
		return resp, err
	}
	if err := deleteHooks(c.Config().KubeClient, resp.Release); err != nil {
		return resp, fmt.Errorf("release %s is uninstalled, but not all its hook objects are deleted: %w", name, err)
	}
	return resp, nil
}

// deleteHooks deletes the hook objects of rel that its chart does not keep; absent ones are
// skipped.
func deleteHooks(kc kube.Interface, rel *release.Release) error {
	var manifests []string
	for _, h := range rel.Hooks {
		manifests = append(manifests, h.Manifest)
	}
	if len(manifests) == 0 {
		return nil
	}
	objs, err := kc.Build(strings.NewReader(strings.Join(manifests, "\n---\n")), false)
	if err != nil {
		return err
	}
	objs = objs.Filter(func(info *resource.Info) bool {
		a, err := meta.NewAccessor().Annotations(info.Object)
		return err == nil && !manifestutil.HasResourcePolicyKeep(a)
	})
	if len(objs) == 0 {
		return nil
	}
	_, errs := kc.Delete(objs)
	return errors.Join(errs...)
}

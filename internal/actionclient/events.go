// Package actionclient wraps helm-operator-plugins' Helm action client (its ActionClientGetter
// seam) so that every Helm action the reconciler performs on a custom resource is recorded as a
// Kubernetes Event on that resource, with the chart, the revision and, on failure, the reason.
// The upstream reconciler emits almost no Events; users read these with `kubectl describe`.
package actionclient

import (
	"context"
	"errors"
	"fmt"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Event reasons, one per outcome of a Helm action.
const (
	ReasonInstalled             = "Installed"
	ReasonInstallFailed         = "InstallFailed"
	ReasonUpgraded              = "Upgraded"
	ReasonUpgradeFailed         = "UpgradeFailed"
	ReasonReleaseCheckFailed    = "ReleaseCheckFailed"
	ReasonUninstalled           = "Uninstalled"
	ReasonUninstallFailed       = "UninstallFailed"
	ReasonDriftCorrectionFailed = "DriftCorrectionFailed"
	ReasonReleaseLookupFailed   = "ReleaseLookupFailed"
	ReasonActionClientFailed    = "ActionClientFailed"
)

// WithEvents returns a getter whose action clients record an Event on the custom resource for
// every install, upgrade and uninstall, and for every failure of a Helm action.
func WithEvents(next helmclient.ActionClientGetter, recorder record.EventRecorder) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		ac, err := next.ActionClientFor(ctx, obj)
		if err != nil {
			recorder.Eventf(obj, corev1.EventTypeWarning, ReasonActionClientFailed, "cannot create a Helm client: %v", err)
			return nil, err
		}
		return &eventingClient{ActionInterface: ac, obj: obj, recorder: recorder}, nil
	})
}

type eventingClient struct {
	helmclient.ActionInterface
	obj      client.Object
	recorder record.EventRecorder
}

func (c *eventingClient) warn(reason, format string, args ...any) {
	c.recorder.Eventf(c.obj, corev1.EventTypeWarning, reason, format, args...)
}

func (c *eventingClient) normal(reason, format string, args ...any) {
	c.recorder.Eventf(c.obj, corev1.EventTypeNormal, reason, format, args...)
}

func (c *eventingClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		c.warn(ReasonReleaseLookupFailed, "cannot read Helm release %s: %v", name, err)
	}
	return rel, err
}

func (c *eventingClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.InstallOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	if err != nil {
		c.warn(ReasonInstallFailed, "install of chart %s failed: %v", chartRef(chrt), err)
		return rel, err
	}
	c.normal(ReasonInstalled, "installed release %s revision %d (chart %s)", rel.Name, rel.Version, chartRef(chrt))
	return rel, nil
}

func (c *eventingClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.UpgradeOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	// The reconciler also calls Upgrade as a server-side dry run to decide whether an upgrade is
	// needed; that is a check, not an upgrade, and only its failure is worth an Event.
	if isDryRun(opts) {
		if err != nil {
			c.warn(ReasonReleaseCheckFailed, "cannot render chart %s for the current spec: %v", chartRef(chrt), err)
		}
		return rel, err
	}
	if err != nil {
		c.warn(ReasonUpgradeFailed, "upgrade to chart %s failed: %v", chartRef(chrt), err)
		return rel, err
	}
	c.normal(ReasonUpgraded, "upgraded release %s to revision %d (chart %s)", rel.Name, rel.Version, chartRef(chrt))
	return rel, nil
}

func (c *eventingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		// Nothing was installed, or an earlier attempt already uninstalled it.
	case err != nil:
		c.warn(ReasonUninstallFailed, "uninstall of release %s failed: %v", name, err)
	default:
		c.normal(ReasonUninstalled, "uninstalled release %s", name)
	}
	return resp, err
}

func (c *eventingClient) Reconcile(rel *release.Release) error {
	err := c.ActionInterface.Reconcile(rel)
	if err != nil {
		c.warn(ReasonDriftCorrectionFailed, "cannot restore the objects of release %s revision %d: %v", rel.Name, rel.Version, err)
	}
	return err
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

func chartRef(chrt *chart.Chart) string {
	if chrt == nil || chrt.Metadata == nil {
		return "<unknown>"
	}
	return fmt.Sprintf("%s-%s", chrt.Metadata.Name, chrt.Metadata.Version)
}

package actionclient

import (
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
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

// Events records an Event on the custom resource for every install, upgrade and uninstall, and
// for every failure of a Helm action. A missing release is not a failure.
type Events struct {
	Recorder record.EventRecorder
}

// Observe implements Observer.
func (e Events) Observe(o Outcome) {
	warn := func(reason, format string, args ...any) {
		e.Recorder.Eventf(o.Object, corev1.EventTypeWarning, reason, format, args...)
	}
	normal := func(reason, format string, args ...any) {
		e.Recorder.Eventf(o.Object, corev1.EventTypeNormal, reason, format, args...)
	}
	if errors.Is(o.Err, driver.ErrReleaseNotFound) {
		return // nothing installed yet, or already uninstalled
	}
	switch o.Action {
	case Client:
		warn(ReasonActionClientFailed, "cannot create a Helm client: %v", o.Err)
	case Get:
		if o.Err != nil {
			warn(ReasonReleaseLookupFailed, "cannot read Helm release %s: %v", o.Release, o.Err)
		}
	case Install:
		if o.Err != nil {
			warn(ReasonInstallFailed, "install of chart %s failed: %v", chartRef(o.Chart), o.Err)
		} else {
			normal(ReasonInstalled, "installed release %s revision %d (chart %s)", o.Result.Name, o.Result.Version, chartRef(o.Chart))
		}
	case Upgrade:
		if o.Err != nil {
			warn(ReasonUpgradeFailed, "upgrade to chart %s failed: %v", chartRef(o.Chart), o.Err)
		} else {
			normal(ReasonUpgraded, "upgraded release %s to revision %d (chart %s)", o.Result.Name, o.Result.Version, chartRef(o.Chart))
		}
	case Check:
		// A check that passes changes nothing and is not worth an Event.
		if o.Err != nil {
			warn(ReasonReleaseCheckFailed, "cannot render chart %s for the current spec: %v", chartRef(o.Chart), o.Err)
		}
	case Uninstall:
		if o.Err != nil {
			warn(ReasonUninstallFailed, "uninstall of release %s failed: %v", o.Release, o.Err)
		} else {
			normal(ReasonUninstalled, "uninstalled release %s", o.Release)
		}
	case Reconcile:
		if o.Err != nil {
			warn(ReasonDriftCorrectionFailed, "cannot restore the objects of release %s revision %d: %v",
				o.Release, o.Result.Version, o.Err)
		}
	}
}

func chartRef(chrt *chart.Chart) string {
	if chrt == nil || chrt.Metadata == nil {
		return "<unknown>"
	}
	return fmt.Sprintf("%s-%s", chrt.Metadata.Name, chrt.Metadata.Version)
}

package actionclient

import (
	"errors"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/example/myproxy-operator/internal/annotations"
	"github.com/example/myproxy-operator/internal/names"
)

// Events records an Event on the custom resource for every install, upgrade and uninstall, and
// for every failure of a Helm action. A missing release is not a failure.
type Events struct {
	Recorder record.EventRecorder
}

// Observe records the outcome of one Helm action.
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
	var waiting *WaitingForDeletionError
	if errors.As(o.Err, &waiting) {
		normal(names.ReasonUninstallWaiting, "%s", waiting.Error())
		return
	}
	if o.Err != nil {
		switch o.Action {
		case Client:
			warn(names.ReasonActionClientFailed, "cannot create a Helm client: %v", o.Err)
		case Get:
			warn(names.ReasonReleaseLookupFailed, "cannot read Helm release %s: %v", o.Release, o.Err)
		case Install:
			warn(names.ReasonInstallFailed, "install of chart %s failed%s: %v", chartRef(o.Chart), with(o, annotations.ForInstall), o.Err)
		case Upgrade:
			warn(names.ReasonUpgradeFailed, "upgrade to chart %s failed%s: %v", chartRef(o.Chart), with(o, annotations.ForUpgrade), o.Err)
		case Check:
			warn(names.ReasonReleaseCheckFailed, "cannot render chart %s for the current spec: %v", chartRef(o.Chart), o.Err)
		case Uninstall:
			warn(names.ReasonUninstallFailed, "uninstall of release %s failed%s: %v", o.Release, with(o, annotations.ForUninstall), o.Err)
		case Reconcile:
			warn(names.ReasonDriftCorrectionFailed, "cannot restore the objects of release %s revision %d: %v",
				o.Release, o.Result.Version, o.Err)
		}
		return
	}
	// A read, a check or a drift correction that passes changes nothing worth an Event.
	switch o.Action {
	case Install:
		normal(names.ReasonInstalled, "installed release %s revision %d (chart %s)%s", o.Result.Name, o.Result.Version,
			chartRef(o.Chart), with(o, annotations.ForInstall))
	case Upgrade:
		normal(names.ReasonUpgraded, "upgraded release %s to revision %d (chart %s)%s", o.Result.Name, o.Result.Version,
			chartRef(o.Chart), with(o, annotations.ForUpgrade))
	case Uninstall:
		normal(names.ReasonUninstalled, "uninstalled release %s%s", o.Release, with(o, annotations.ForUninstall))
	}
}

// with names the annotations that changed how the action ran.
func with(o Outcome, action annotations.Action) string {
	set := annotations.InEffect(o.Object, action)
	if len(set) == 0 {
		return ""
	}
	return " with " + strings.Join(set, ", ")
}

func chartRef(chrt *chart.Chart) string {
	if chrt == nil || chrt.Metadata == nil {
		return "<unknown>"
	}
	return fmt.Sprintf("%s-%s", chrt.Metadata.Name, chrt.Metadata.Version)
}

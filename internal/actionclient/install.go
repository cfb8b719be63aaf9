package actionclient

import (
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v4/pkg/action"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"

	"github.com/example/myproxy-operator/internal/helmconfig"
)

// installStep installs the release: Helm 4's install, server-side, the revision labelled with
// its digests and what its rendering looks up recorded. An install that fails after Helm
// recorded it is removed (removeFailedInstallStep).
type installStep struct {
	r *reconcile
	o actionOptions
}

func (s installStep) run() (*release.Release, error) {
	r := s.r
	labels := r.c.o.Digests.recording(r, 1) // an install is always revision 1
	start := time.Now()
	rel, err := act(r, func() (*release.Release, error) {
		i := r.newInstall()
		i.DisableHooks, i.Description, i.Labels = s.o.DisableHooks, s.o.Description, labels
		defer helmconfig.SetAction(r.cfg, helmconfig.Action{ServerSide: true, Answers: helmconfig.FromCacheOrAbsent})()
		out, err := i.Run(copyChart(r.c.o.Chart), r.known.vals)
		rel, _ := asRelease(out)
		return rel, err
	})
	r.c.report(r.obj, Outcome{Action: ActionInstall, Result: rel, Err: err}, start)
	r.c.o.Digests.rendered(r, rel, err)
	r.stale = true
	if err != nil && rel != nil {
		if rerr := (removeFailedInstallStep{r: r, failed: err}).run(); rerr != nil {
			return nil, fmt.Errorf("uninstall failed: %v: original install error: %w", rerr, err)
		}
	}
	return rel, err
}

// newInstall is the install of the release, as the install and a preview run it.
func (r *reconcile) newInstall() *action.Install {
	i := action.NewInstall(r.cfg)
	i.ReleaseName, i.Namespace = r.obj.GetName(), r.obj.GetNamespace()
	renderOptions(&i.WaitStrategy, &i.DisableOpenAPIValidation)
	i.ForceConflicts = true // objects it adopts (its record was lost) take the chart's fields
	i.SkipCRDs = true       // a chart's crds/ are installed with the kind (make install), never by a tenant's release
	return i
}

// removeFailedInstallStep uninstalls a release whose install failed after Helm recorded it,
// purging its records, so that the next install starts afresh (the plugins' failure rollback):
// right after the install, or when a reconcile begins and finds one; a release Helm did not
// record is not found.
type removeFailedInstallStep struct {
	r      *reconcile
	failed error
}

func (s removeFailedInstallStep) run() error {
	r := s.r
	start := time.Now()
	rel, err := r.helmUninstall(actionOptions{Description: fmt.Sprintf("uninstalled after a failed install: %v", s.failed)}, false)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		err = nil
	}
	r.c.report(r.obj, Outcome{Action: ActionRemoveFailedInstall, Result: rel, Err: err}, start)
	return err
}

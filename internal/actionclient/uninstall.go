package actionclient

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/manifestutil"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/tenancy"
)

// uninstallStep uninstalls the release of a custom resource being deleted, then deletes its
// hook objects; with uninstall-wait (UninstallWhenGone), it keeps the record, marked
// uninstalled, until every object of the release is gone.
type uninstallStep struct {
	r *reconcile
	o actionOptions
}

func (s uninstallStep) run() (*release.Release, error) {
	r, cur := s.r, s.r.known.cur
	start := time.Now()
	if err := helmconfig.Unaccounted(r.cfg); err != nil {
		// Nothing may act for the tenant any more: the uninstall finds no release, the reconciler
		// lets the custom resource go, and the garbage collector removes the release's objects and
		// records through their owner references.
		r.c.o.Recorder.Eventf(r.obj, corev1.EventTypeWarning, tenancy.ReasonUninstallSkipped,
			"%v; the custom resource is deleted without an uninstall, and the garbage collector removes its release through owner references", err)
	}
	rel, err := cur, error(nil)
	if r.decision.Step == UninstallWhenGone {
		if cur.Info.Status != common.StatusUninstalled {
			rel, err = r.helmUninstall(s.o, true)
		}
		if err == nil {
			err = r.waitForObjects(cur.Manifest)
		}
	}
	if err == nil {
		// Helm purges the records of a release it finds uninstalled.
		rel, err = r.helmUninstall(s.o, false)
	}
	r.c.report(r.obj, Outcome{Action: ActionUninstall, Result: rel, Err: err}, start)
	r.stale = true
	var waiting *WaitingForDeletionError
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) && !errors.As(err, &waiting) {
		// The reconciler puts this in the ReleaseFailed condition; Helm's own words alone
		// ("no release provided") do not say what is at stake.
		err = fmt.Errorf("uninstalling release %s failed; the resource keeps its finalizer, and the release "+
			"its objects, until an uninstall succeeds: %w", r.obj.GetName(), err)
	}
	return rel, err
}

// helmUninstall runs one Helm uninstall and deletes the hook objects of the release it removed.
func (r *reconcile) helmUninstall(o actionOptions, keepHistory bool) (*release.Release, error) {
	resp, err := act(r, func() (*release.Release, error) {
		u := action.NewUninstall(r.cfg)
		u.DisableHooks, u.Description, u.KeepHistory = o.DisableHooks, o.Description, keepHistory
		u.WaitStrategy = kube.HookOnlyStrategy
		defer helmconfig.SetAction(r.cfg, helmconfig.Action{Answers: helmconfig.FromCache})()
		resp, err := u.Run(r.obj.GetName())
		if resp == nil {
			return nil, err
		}
		rel, cerr := asRelease(resp.Release)
		return rel, cmp.Or(err, cerr)
	})
	if err == nil || errors.Is(err, driver.ErrReleaseNotFound) {
		r.c.o.Digests.Forget(r.key)
	}
	if err != nil || resp == nil {
		return resp, err
	}
	if err := r.deleteHooks(resp); err != nil {
		return resp, fmt.Errorf("release %s is uninstalled, but not all its hook objects are deleted: %w", resp.Name, err)
	}
	return resp, nil
}

// deleteHooks deletes the hook objects of an uninstalled release that its chart does not keep
// (helm.sh/resource-policy: keep), through Helm's own client (the release's reach and identity
// apply); absent ones are skipped. Helm's uninstall leaves hooks to their delete policy; the
// stock operator-sdk helm-operator gives them an owner reference to the custom resource, so the
// garbage collector takes them after it; helm-operator-plugins owns only the manifest. This does
// not depend on the garbage collector.
func (r *reconcile) deleteHooks(rel *release.Release) error {
	var manifests []string
	for _, h := range rel.Hooks {
		manifests = append(manifests, h.Manifest)
	}
	if len(manifests) == 0 {
		return nil
	}
	objs, err := r.cfg.KubeClient.Build(strings.NewReader(strings.Join(manifests, "\n---\n")), false)
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
	_, errs := r.cfg.KubeClient.Delete(objs, metav1.DeletePropagationBackground)
	return errors.Join(errs...)
}

// waitForObjects fails with WaitingForDeletionError while an object of manifest exists.
func (r *reconcile) waitForObjects(manifest string) error {
	if strings.TrimSpace(manifest) == "" {
		return nil
	}
	objs, err := r.cfg.KubeClient.Build(strings.NewReader(manifest), false)
	if err != nil {
		return fmt.Errorf("%s: cannot tell whether the objects of release %s are deleted: %w", names.UninstallWait, r.obj.GetName(), err)
	}
	var left []string
	for _, info := range objs {
		switch err := info.Get(); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("%s: cannot tell whether the objects of release %s are deleted: %w", names.UninstallWait, r.obj.GetName(), err)
		default:
			left = append(left, fmt.Sprintf("%s %s", info.Mapping.GroupVersionKind.Kind, info.Name))
		}
	}
	if len(left) > 0 {
		return &WaitingForDeletionError{Release: r.obj.GetName(), Remaining: left}
	}
	return nil
}

// WaitingForDeletionError says that an uninstall is done but objects of the release are still
// being deleted, and the custom resource keeps its finalizer until they are gone.
type WaitingForDeletionError struct {
	Release   string
	Remaining []string
}

func (e *WaitingForDeletionError) Error() string {
	return fmt.Sprintf("%s=true: release %s is uninstalled; waiting until all its objects are deleted (still present: %s)",
		names.UninstallWait, e.Release, strings.Join(e.Remaining, ", "))
}

package controller

// The custom resource annotations (names.Domain): the plugins' option sets, the pause handler,
// their validation, and the reconcile period.

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/annotation"
	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
)

// The plugins' option sets, for reconciler.WithInstallAnnotations and its siblings.
var (
	InstallAnnotations   = []annotation.Install{annotation.InstallDescription{}, annotation.InstallDisableHooks{}}
	UpgradeAnnotations   = []annotation.Upgrade{annotation.UpgradeDescription{}, annotation.UpgradeDisableHooks{}, annotation.UpgradeForce{}}
	UninstallAnnotations = []annotation.Uninstall{annotation.UninstallDescription{}, annotation.UninstallDisableHooks{}}
)

// booleans are the annotations whose value is true or false.
var booleans = []string{names.UpgradeForce, names.RollbackForce, names.UninstallWait, names.InstallDisableHooks, names.UpgradeDisableHooks,
	names.UninstallDisableHooks, names.PauseReconcile}

// ValidateAnnotations returns an error naming the first annotation whose value cannot be used. The stock
// operators read such a value as false (or ignore the period) with at most a log line; here the
// custom resource says why it is not reconciled until the value is fixed. A reconcile period
// is a tenant's request for the operator's time: one shorter than minPeriod (but for 0, which
// asks for none) is refused, so that no resource keeps a worker busy for everyone else.
func ValidateAnnotations(obj client.Object, minPeriod time.Duration) error {
	a := obj.GetAnnotations()
	for _, name := range booleans {
		if v, ok := a[name]; ok {
			if _, err := strconv.ParseBool(v); err != nil {
				return fmt.Errorf("metadata.annotations[%s]: %q is not a boolean (true or false)", name, v)
			}
		}
	}
	if v, ok := a[names.ReconcilePeriod]; ok {
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return fmt.Errorf("metadata.annotations[%s]: %q is not a duration of zero or more (such as 30s or 5m)", names.ReconcilePeriod, v)
		} else if d > 0 && d < minPeriod {
			return fmt.Errorf("metadata.annotations[%s]: %q is shorter than the operator's --min-reconcile-period %s (0 turns periodic reconciles off)",
				names.ReconcilePeriod, v, minPeriod)
		}
	}
	return nil
}

// period returns the reconcile period of obj: its annotation, else fallback. An annotation
// that Validate refuses (shorter than minPeriod included) counts as absent.
func period(obj client.Object, fallback, minPeriod time.Duration) time.Duration {
	if d, err := time.ParseDuration(obj.GetAnnotations()[names.ReconcilePeriod]); err == nil && (d == 0 || d >= minPeriod) {
		return d
	}
	return fallback
}

// PauseHandler pauses every action on a custom resource whose names.PauseReconcile annotation is
// "true" (the plugins then set Paused=True and return before reading the release), and records
// an Event when a resource becomes paused or resumes.
func PauseHandler(recorder record.EventRecorder) reconciler.PauseReconcileHandlerFunc {
	return func(_ context.Context, obj *unstructured.Unstructured) (bool, error) {
		paused := obj.GetAnnotations()[names.PauseReconcile] == "true"
		was := pausedCondition(obj)
		switch {
		case paused && !was:
			recorder.Eventf(obj, corev1.EventTypeNormal, names.ReasonReconcilePaused,
				"%s=true: no install, upgrade, drift correction or uninstall until it is removed", names.PauseReconcile)
		case !paused && was:
			recorder.Eventf(obj, corev1.EventTypeNormal, names.ReasonReconcileResumed, "%s removed: reconciling again", names.PauseReconcile)
		}
		return paused, nil
	}
}

func pausedCondition(obj *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", names.StatusConditions)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == names.ConditionPaused {
			return m["status"] == string(corev1.ConditionTrue)
		}
	}
	return false
}

// CheckedTranslator validates the annotations before next translates the values: a value that
// cannot be used stops the reconcile with an error naming the annotation (the plugins put it
// in the Irreconcilable condition), before any action runs.
func CheckedTranslator(next Translator, recorder record.EventRecorder, minPeriod time.Duration) Translator {
	return func(ctx context.Context, obj *unstructured.Unstructured) (map[string]any, error) {
		if err := ValidateAnnotations(obj, minPeriod); err != nil {
			recorder.Event(obj, corev1.EventTypeWarning, names.ReasonInvalidAnnotation, err.Error())
			return nil, err
		}
		return next(ctx, obj)
	}
}

// Translator turns a custom resource into its chart's values.
type Translator = func(ctx context.Context, obj *unstructured.Unstructured) (map[string]any, error)

// PeriodHook schedules the next reconcile of a custom resource after its reconcile-period
// annotation, or after fallback (the watch's reconcilePeriod) without one; zero schedules none:
// requeue puts the resource back in its queue after a period. It runs after every successful
// reconcile, as the stock operator's requeue does.
func PeriodHook(requeue func(key types.NamespacedName, after time.Duration), fallback, minPeriod time.Duration) func(*unstructured.Unstructured, *release.Release) error {
	return func(obj *unstructured.Unstructured, _ *release.Release) error {
		if d := period(obj, fallback, minPeriod); d > 0 {
			requeue(types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, d)
		}
		return nil
	}
}

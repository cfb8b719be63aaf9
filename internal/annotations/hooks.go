package annotations

import (
	"context"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/example/myproxy-operator/internal/names"
)

// PauseHandler pauses every action on a custom resource whose PauseReconcile annotation is
// "true" (the plugins then set Paused=True and return before reading the release), and records
// an Event when a resource becomes paused or resumes.
func PauseHandler(recorder record.EventRecorder) reconciler.PauseReconcileHandlerFunc {
	isPaused := reconciler.PauseReconcileIfAnnotationTrue(PauseReconcile)
	return func(ctx context.Context, obj *unstructured.Unstructured) (bool, error) {
		paused, err := isPaused(ctx, obj)
		was := pausedCondition(obj)
		switch {
		case paused && !was:
			recorder.Eventf(obj, corev1.EventTypeNormal, names.ReasonReconcilePaused,
				"%s=true: no install, upgrade, drift correction or uninstall until it is removed", PauseReconcile)
		case !paused && was:
			recorder.Eventf(obj, corev1.EventTypeNormal, names.ReasonReconcileResumed, "%s removed: reconciling again", PauseReconcile)
		}
		return paused, err
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
		if err := Validate(obj, minPeriod); err != nil {
			recorder.Event(obj, corev1.EventTypeWarning, names.ReasonInvalidAnnotation, err.Error())
			return nil, err
		}
		return next(ctx, obj)
	}
}

// Translator turns a custom resource into its chart's values.
type Translator = func(ctx context.Context, obj *unstructured.Unstructured) (map[string]any, error)

// Requeuer puts a custom resource back in its queue after a period.
type Requeuer interface {
	AddAfter(key types.NamespacedName, d time.Duration)
}

// PeriodHook schedules the next reconcile of a custom resource after its reconcile-period
// annotation, or after fallback (the watch's reconcilePeriod) without one; zero schedules none.
// It runs after every successful reconcile, as the stock operator's requeue does.
func PeriodHook(requeue Requeuer, fallback, minPeriod time.Duration) func(*unstructured.Unstructured, *release.Release) error {
	return func(obj *unstructured.Unstructured, _ *release.Release) error {
		if d := Period(obj, fallback, minPeriod); d > 0 {
			requeue.AddAfter(types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, d)
		}
		return nil
	}
}

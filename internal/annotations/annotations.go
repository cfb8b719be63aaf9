// Package annotations implements the custom resource annotations that users of the stock
// operator-sdk helm-operator and of helm-operator-plugins know, on every watched kind:
// the names are theirs, and so are the meanings (docs/configuration.md lists them).
//
// The plugins' reconciler applies the install, upgrade and uninstall options itself once it is
// given the annotation sets (Install, Upgrade, Uninstall); the pause annotation goes through
// its pause handler. What the plugins lack (rollback-force, uninstall-wait, reconcile-period)
// is read here and applied by the action client and a post-reconcile hook.
package annotations

import (
	"context"
	"fmt"
	"slices"
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

// Domain is operator-sdk's annotation domain.
const Domain = "helm.sdk.operatorframework.io"

// The annotations, as operator-sdk and helm-operator-plugins name them. PauseReconcile is this
// operator's choice of name for the plugins' pause handler (operator-sdk has none).
const (
	UpgradeForce          = Domain + "/upgrade-force"
	RollbackForce         = Domain + "/rollback-force"
	UninstallWait         = Domain + "/uninstall-wait"
	ReconcilePeriod       = Domain + "/reconcile-period"
	InstallDisableHooks   = Domain + "/install-disable-hooks"
	UpgradeDisableHooks   = Domain + "/upgrade-disable-hooks"
	UninstallDisableHooks = Domain + "/uninstall-disable-hooks"
	InstallDescription    = Domain + "/install-description"
	UpgradeDescription    = Domain + "/upgrade-description"
	UninstallDescription  = Domain + "/uninstall-description"
	PauseReconcile        = Domain + "/pause-reconcile"
)

// The plugins' option sets, for reconciler.WithInstallAnnotations and its siblings.
var (
	Install   = []annotation.Install{annotation.InstallDescription{}, annotation.InstallDisableHooks{}}
	Upgrade   = []annotation.Upgrade{annotation.UpgradeDescription{}, annotation.UpgradeDisableHooks{}, annotation.UpgradeForce{}}
	Uninstall = []annotation.Uninstall{annotation.UninstallDescription{}, annotation.UninstallDisableHooks{}}
)

// booleans are the annotations whose value is true or false.
var booleans = []string{UpgradeForce, RollbackForce, UninstallWait, InstallDisableHooks, UpgradeDisableHooks,
	UninstallDisableHooks, PauseReconcile}

// Validate returns an error naming the first annotation whose value cannot be used. The stock
// operators read such a value as false (or ignore the period) with at most a log line; here the
// custom resource says why it is not reconciled until the value is fixed. A reconcile period
// is a tenant's request for the operator's time: one shorter than minPeriod (but for 0, which
// asks for none) is refused, so that no resource keeps a worker busy for everyone else.
func Validate(obj client.Object, minPeriod time.Duration) error {
	a := obj.GetAnnotations()
	for _, name := range booleans {
		if v, ok := a[name]; ok {
			if _, err := strconv.ParseBool(v); err != nil {
				return fmt.Errorf("metadata.annotations[%s]: %q is not a boolean (true or false)", name, v)
			}
		}
	}
	if v, ok := a[ReconcilePeriod]; ok {
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return fmt.Errorf("metadata.annotations[%s]: %q is not a duration of zero or more (such as 30s or 5m)", ReconcilePeriod, v)
		} else if d > 0 && d < minPeriod {
			return fmt.Errorf("metadata.annotations[%s]: %q is shorter than the operator's --min-reconcile-period %s (0 turns periodic reconciles off)",
				ReconcilePeriod, v, minPeriod)
		}
	}
	return nil
}

// Bool returns a boolean annotation, or fallback when it is absent or not a boolean.
func Bool(obj client.Object, name string, fallback bool) bool {
	if v, err := strconv.ParseBool(obj.GetAnnotations()[name]); err == nil {
		return v
	}
	return fallback
}

// Period returns the reconcile period of obj: its annotation, else fallback. An annotation
// that Validate refuses (shorter than minPeriod included) counts as absent.
func Period(obj client.Object, fallback, minPeriod time.Duration) time.Duration {
	if d, err := time.ParseDuration(obj.GetAnnotations()[ReconcilePeriod]); err == nil && (d == 0 || d >= minPeriod) {
		return d
	}
	return fallback
}

// Action is an action that annotations change, as the annotations that change it.
type Action []string

// The actions annotations change.
var (
	ForInstall   = Action{InstallDisableHooks, InstallDescription}
	ForUpgrade   = Action{UpgradeForce, UpgradeDisableHooks, UpgradeDescription, RollbackForce}
	ForUninstall = Action{UninstallDisableHooks, UninstallDescription, UninstallWait}
)

// InEffect lists "name=value" for each annotation on obj that changes how action runs, for
// Events to say which options an action ran with.
func InEffect(obj client.Object, action Action) []string {
	a := obj.GetAnnotations()
	var out []string
	for _, name := range action {
		if v, ok := a[name]; ok {
			out = append(out, name+"="+v)
		}
	}
	slices.Sort(out)
	return out
}

// PauseHandler pauses every action on a custom resource whose PauseReconcile annotation is
// "true" (the plugins then set Paused=True and return before reading the release), and records
// an Event when a resource becomes paused or resumes.
func PauseHandler(recorder record.EventRecorder) reconciler.PauseReconcileHandlerFunc {
	return func(_ context.Context, obj *unstructured.Unstructured) (bool, error) {
		paused := obj.GetAnnotations()[PauseReconcile] == "true"
		was := pausedCondition(obj)
		switch {
		case paused && !was:
			recorder.Eventf(obj, corev1.EventTypeNormal, names.ReasonReconcilePaused,
				"%s=true: no install, upgrade, drift correction or uninstall until it is removed", PauseReconcile)
		case !paused && was:
			recorder.Eventf(obj, corev1.EventTypeNormal, names.ReasonReconcileResumed, "%s removed: reconciling again", PauseReconcile)
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
		if err := Validate(obj, minPeriod); err != nil {
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
		if d := Period(obj, fallback, minPeriod); d > 0 {
			requeue(types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, d)
		}
		return nil
	}
}

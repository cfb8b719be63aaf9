package actionclient

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/shard"
)

// Action names what the metrics and Events report: a read, or a step of a decision.
type Action string

// The actions. Client is the beginning of a reconcile (the action client is made); Get the read
// of the release record; Check the rendering of the upgrade check (a dry run); Reconcile the
// drift correction of an unchanged release; the others are the steps of the same names.
const (
	ActionClient              Action = "client"
	ActionGet                 Action = "get"
	ActionCheck               Action = "check"
	ActionClaim               Action = "claim"
	ActionUnlock              Action = "unlock"
	ActionInstall             Action = "install"
	ActionRemoveFailedInstall Action = "remove-failed-install"
	ActionUpgrade             Action = "upgrade"
	ActionRecordValues        Action = "record-values"
	ActionRollback            Action = "rollback"
	ActionHold                Action = "hold"
	ActionUninstall           Action = "uninstall"
	ActionReconcile           Action = "reconcile"
)

// Outcome is what one read or step did.
type Outcome struct {
	Object   client.Object // the custom resource
	Action   Action
	Release  string           // release name
	Result   *release.Release // nil when the action returns none
	Chart    *chart.Chart     // for install, upgrade, check and hold
	Err      error
	Duration time.Duration
	start    time.Time // when it began, for an outcome reported later
}

// report tells the observers (Events, metrics) the outcome of one read or step of a reconcile
// of obj, begun at start.
func (c *Client) report(obj client.Object, o Outcome, start time.Time) {
	o.Object, o.Duration = obj, time.Since(start)
	o.Release = cmp.Or(o.Release, obj.GetName()) // the custom resource's, unless the call names another
	switch o.Action {
	case ActionInstall, ActionUpgrade, ActionRecordValues, ActionCheck, ActionHold:
		o.Chart = c.o.Chart
	}
	recordEvent(c.o.Recorder, o)
	if c.o.Metrics != nil {
		c.o.Metrics.Observe(o)
	}
	if o.Action == ActionInstall || o.Action == ActionUpgrade || o.Action == ActionRecordValues {
		c.o.Waiters.Observe(shard.Key{GVK: c.o.GVK, NamespacedName: client.ObjectKeyFromObject(obj)}, o.Err)
	}
}

// Waiters are the custom resources whose install or upgrade found an object of another release
// in the way: each is woken when that object, or a record of its release, goes (ObjectGone,
// ReleaseGone: package controller's watches tell), rather than only at its backoff.
type Waiters struct {
	waiting *caches.Store[helmconfig.TakenError]
	wake    func(shard.Key)
	// stillTaken reads whether the object is still there as the release's (live: an event of
	// its going may have come before the wait was set, and then woke nobody).
	stillTaken func(helmconfig.TakenError) bool
}

// NewWaiters returns the waiters of the process, registered in remembered; wake requeues one;
// stillTaken reads whether an object is still another release's.
func NewWaiters(remembered *caches.Remembered, wake func(shard.Key), stillTaken func(helmconfig.TakenError) bool) *Waiters {
	return &Waiters{waiting: caches.NewStore[helmconfig.TakenError](remembered, "release_waiters", schema.GroupVersionKind{}),
		wake: wake, stillTaken: stillTaken}
}

// Observe keeps key waiting for the object err names as another release's; else not waiting.
// An object that went (or changed hands) before the wait was set wakes key at once.
func (w *Waiters) Observe(key shard.Key, err error) {
	if w == nil {
		return
	}
	if taken := helmconfig.Taken(err); taken != nil {
		w.waiting.Set(key, *taken)
		if w.stillTaken != nil && !w.stillTaken(*taken) {
			w.wakeIf(func(t helmconfig.TakenError) bool { return t == *taken })
		}
	} else {
		w.waiting.Delete(key)
	}
}

// ObjectGone wakes the resources waiting for the object of kind namespace/name.
func (w *Waiters) ObjectGone(kind, namespace, name string) {
	w.wakeIf(func(t helmconfig.TakenError) bool {
		return t.Kind == kind && t.Namespace == namespace && t.Name == name
	})
}

// ReleaseGone wakes the resources waiting for an object of release namespace/name (one of its
// records went).
func (w *Waiters) ReleaseGone(namespace, name string) {
	w.wakeIf(func(t helmconfig.TakenError) bool { return t.ReleaseNamespace == namespace && t.Release == name })
}

func (w *Waiters) wakeIf(waitsFor func(helmconfig.TakenError) bool) {
	if w == nil {
		return
	}
	for _, k := range w.waiting.TakeIf(waitsFor) {
		w.wake(k)
	}
}

// recordEvent records an Event on the custom resource for an install, upgrade or uninstall, and
// for a failure of a Helm action. A missing release is not a failure.
func recordEvent(recorder record.EventRecorder, o Outcome) {
	warn := func(reason, format string, args ...any) {
		recorder.Eventf(o.Object, corev1.EventTypeWarning, reason, format, args...)
	}
	normal := func(reason, format string, args ...any) {
		recorder.Eventf(o.Object, corev1.EventTypeNormal, reason, format, args...)
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
		case ActionClient:
			warn(names.ReasonActionClientFailed, "cannot create a Helm client: %v", o.Err)
		case ActionGet:
			warn(names.ReasonReleaseLookupFailed, "cannot read Helm release %s: %v", o.Release, o.Err)
		case ActionInstall:
			warn(names.ReasonInstallFailed, "install of chart %s failed%s: %v", chartRef(o.Chart), with(o, names.ForInstall), o.Err)
		case ActionUpgrade:
			warn(names.ReasonUpgradeFailed, "upgrade to chart %s failed%s: %v", chartRef(o.Chart), with(o, names.ForUpgrade), o.Err)
		case ActionRecordValues:
			warn(names.ReasonUpgradeFailed, "upgrade to record the values of the resource (chart %s renders the same objects) failed%s: %v",
				chartRef(o.Chart), with(o, names.ForUpgrade), o.Err)
		case ActionCheck:
			warn(names.ReasonReleaseCheckFailed, "cannot render chart %s for the current spec: %v", chartRef(o.Chart), o.Err)
		case ActionUninstall:
			warn(names.ReasonUninstallFailed, "uninstall of release %s failed%s: %v", o.Release, with(o, names.ForUninstall), o.Err)
		case ActionReconcile, ActionHold:
			if errors.Is(o.Err, ErrHeld) {
				normal(names.ReasonUpgradeHeld, "upgrade to chart %s waits for its wave of the rollout; release %s stays at revision %d (%s)",
					chartRef(o.Chart), o.Release, o.Result.Version, o.Result.Info.Status)
				return
			}
			warn(names.ReasonDriftCorrectionFailed, "cannot restore the objects of release %s revision %d: %v",
				o.Release, o.Result.Version, o.Err)
		case ActionClaim:
			warn(names.ReasonClaimFailed, "%v", o.Err)
		case ActionUnlock:
			warn(names.ReasonReleaseUnlocked, "%v", o.Err)
		case ActionRemoveFailedInstall:
			warn(names.ReasonUninstallFailed, "the install of release %s failed, and its removal too: %v", o.Release, o.Err)
		case ActionRollback:
			warn(names.ReasonRollbackFailed, "the upgrade of release %s failed, and its rollback too: %v", o.Release, o.Err)
		}
		return
	}
	// A read, a check or a drift correction that passes changes nothing worth an Event.
	switch o.Action {
	case ActionInstall:
		normal(names.ReasonInstalled, "installed release %s revision %d (chart %s)%s", o.Result.Name, o.Result.Version,
			chartRef(o.Chart), with(o, names.ForInstall))
	case ActionUpgrade:
		normal(names.ReasonUpgraded, "upgraded release %s to revision %d (chart %s)%s", o.Result.Name, o.Result.Version,
			chartRef(o.Chart), with(o, names.ForUpgrade))
	case ActionRecordValues:
		normal(names.ReasonValuesRecorded, "recorded the values of the resource in release %s revision %d (chart %s renders the same objects)%s",
			o.Result.Name, o.Result.Version, chartRef(o.Chart), with(o, names.ForUpgrade))
	case ActionUninstall:
		normal(names.ReasonUninstalled, "uninstalled release %s%s", o.Release, with(o, names.ForUninstall))
	case ActionRemoveFailedInstall:
		warn(names.ReasonFailedInstallRemoved, "the install of release %s failed: uninstalled, to be installed afresh", o.Release)
	case ActionRollback:
		warn(names.ReasonRolledBack, "the upgrade of release %s failed: rolled back to revision %d (now revision %d)%s",
			o.Release, rolledBackTo(o.Result), o.Result.Version, with(o, names.ForUpgrade))
	case ActionHold:
		normal(names.ReasonUpgradeHeld, "upgrade to chart %s waits for its wave of the rollout; release %s stays at revision %d",
			chartRef(o.Chart), o.Release, o.Result.Version)
	}
}

// rolledBackTo is the revision a rollback revision restored, as Helm describes it ("Rollback
// to N"); 0 when it does not say.
func rolledBackTo(rel *release.Release) int {
	n := 0
	if rel != nil && rel.Info != nil {
		_, _ = fmt.Sscanf(rel.Info.Description, "Rollback to %d", &n)
	}
	return n
}

// with names the annotations that changed how the action ran.
func with(o Outcome, action names.AnnotationSet) string {
	set := inEffect(o.Object, action)
	if len(set) == 0 {
		return ""
	}
	return " with " + strings.Join(set, ", ")
}

// chartRef names a loaded chart (Helm's loader refuses one without metadata).
func chartRef(chrt *chart.Chart) string { return chrt.Metadata.Name + "-" + chrt.Metadata.Version }

// Metrics publishes, beside controller-runtime's own metrics:
//   - myproxy_operator_helm_action_duration_seconds{action,result}: how long reads and steps take;
//   - myproxy_operator_helm_action_failures_total{action,reason}: failed ones by reason;
//   - myproxy_operator_releases{state}: releases known to the operator by Helm status
//     (deployed, failed, pending-install, ...).
type Metrics struct {
	duration *prometheus.HistogramVec
	failures *prometheus.CounterVec
	releases *prometheus.GaugeVec
	// states caches the Helm status of each release, by custom resource, as the operator last
	// read or wrote it: what releases counts.
	states *caches.Store[string]
	mu     sync.Mutex // orders the changes of states and releases
}

// NewMetrics creates the metrics and registers them with reg, their per-resource cache with
// remembered.
func NewMetrics(reg prometheus.Registerer, remembered *caches.Remembered) (*Metrics, error) {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "myproxy_operator_helm_action_duration_seconds",
			Help:    "Duration of Helm reads and steps (get, check, install, upgrade, rollback, uninstall, reconcile...) by result.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"action", "result"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "myproxy_operator_helm_action_failures_total",
			Help: "Failed Helm reads and steps by action and reason.",
		}, []string{"action", "reason"}),
		releases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "myproxy_operator_releases",
			Help: "Helm releases the operator manages, by Helm status.",
		}, []string{"state"}),
		states: caches.NewStore[string](nil, "", schema.GroupVersionKind{}),
	}
	if remembered != nil { // forgetting a release counts it out of releases too
		remembered.Register("release_states", schema.GroupVersionKind{}, m.Forget, m.states.Len)
	}
	for _, c := range []prometheus.Collector{m.duration, m.failures, m.releases} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Observe records the outcome of one read or step.
func (m *Metrics) Observe(o Outcome) {
	notFound := errors.Is(o.Err, driver.ErrReleaseNotFound)
	result := "success"
	if o.Err != nil && !notFound {
		result = "failure"
		m.failures.WithLabelValues(string(o.Action), FailureReason(o.Err)).Inc()
	}
	m.duration.WithLabelValues(string(o.Action), result).Observe(o.Duration.Seconds())
	key := shard.Key{GVK: o.Object.GetObjectKind().GroupVersionKind(), NamespacedName: client.ObjectKeyFromObject(o.Object)}
	switch {
	case o.Release != o.Object.GetName():
	case notFound || (o.Action == ActionUninstall && o.Err == nil):
		m.Forget(key)
	case o.Action == ActionCheck || o.Action == ActionClient || o.Action == ActionHold:
		// A dry run's release is a simulation; a client failure says nothing of the release.
	case o.Result != nil && o.Result.Info != nil:
		m.mu.Lock()
		defer m.mu.Unlock()
		if old, ok := m.states.Get(key); ok {
			m.releases.WithLabelValues(old).Dec()
		}
		m.states.Set(key, o.Result.Info.Status.String())
		m.releases.WithLabelValues(o.Result.Info.Status.String()).Inc()
	}
}

// Forget drops the release of a custom resource gone.
func (m *Metrics) Forget(key shard.Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.states.Take(key); ok {
		m.releases.WithLabelValues(old).Dec()
	}
}

// FailureReason classifies an error of a Helm action for the failures metric: the apiserver's
// reason when the error carries one, else a few known Helm failures, else Unknown.
func FailureReason(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Reason != "" {
		return string(status.Status().Reason)
	}
	var waiting *WaitingForDeletionError
	if errors.As(err, &waiting) {
		return "WaitingForDeletion"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "another operation (install/upgrade/rollback) is in progress"):
		return "OperationInProgress"
	case strings.Contains(msg, "is invalid"):
		return "Invalid"
	case strings.Contains(msg, "template:") || strings.Contains(msg, "parse error"):
		return "RenderError"
	case strings.Contains(msg, "context deadline exceeded") || strings.Contains(msg, "timed out"):
		return "Timeout"
	case strings.Contains(msg, "connection refused"):
		return "Unreachable"
	}
	return "Unknown"
}

// inEffect lists "name=value" for each annotation on obj that changes how action runs, for
// Events to say which options an action ran with.
func inEffect(obj client.Object, action names.AnnotationSet) []string {
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

// annotation returns a boolean annotation, or fallback when it is absent or not a boolean.
func annotation(obj client.Object, name string, fallback bool) bool {
	if v, err := strconv.ParseBool(obj.GetAnnotations()[name]); err == nil {
		return v
	}
	return fallback
}

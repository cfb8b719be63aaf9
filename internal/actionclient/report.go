package actionclient

import (
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/annotations"
	"github.com/example/myproxy-operator/internal/names"
)

// Action names a Helm action, and the reconciler's call a decision answers.
type Action string

// The actions. Client is the beginning of a reconcile (the action client is made); Check is the
// dry-run upgrade the reconciler runs to decide whether an upgrade is needed; Reconcile
// restores drifted objects.
const (
	ActionClient    Action = "client"
	ActionGet       Action = "get"
	ActionCheck     Action = "check"
	ActionInstall   Action = "install"
	ActionUpgrade   Action = "upgrade"
	ActionUninstall Action = "uninstall"
	ActionReconcile Action = "reconcile"
)

// Outcome is what one Helm action did.
type Outcome struct {
	Object   client.Object // the custom resource
	Action   Action
	Release  string           // release name
	Result   *release.Release // nil when the action returns none
	Chart    *chart.Chart     // for install, upgrade and check
	Err      error
	Duration time.Duration
}

// report tells the observers (Events, metrics) the outcome of one call of the reconcile.
func (r *reconcile) report(o Outcome, start time.Time) {
	o.Object, o.Duration = r.obj, time.Since(start)
	if o.Release == "" {
		o.Release = r.obj.GetName() // the custom resource's, unless the call names another
	}
	if o.Action == ActionInstall || o.Action == ActionUpgrade || o.Action == ActionCheck {
		o.Chart = r.c.o.Chart
	}
	recordEvent(r.c.o.Recorder, o)
	if r.c.o.Metrics != nil {
		r.c.o.Metrics.Observe(o)
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
			warn(names.ReasonInstallFailed, "install of chart %s failed%s: %v", chartRef(o.Chart), with(o, annotations.ForInstall), o.Err)
		case ActionUpgrade:
			warn(names.ReasonUpgradeFailed, "upgrade to chart %s failed%s: %v", chartRef(o.Chart), with(o, annotations.ForUpgrade), o.Err)
		case ActionCheck:
			warn(names.ReasonReleaseCheckFailed, "cannot render chart %s for the current spec: %v", chartRef(o.Chart), o.Err)
		case ActionUninstall:
			warn(names.ReasonUninstallFailed, "uninstall of release %s failed%s: %v", o.Release, with(o, annotations.ForUninstall), o.Err)
		case ActionReconcile:
			warn(names.ReasonDriftCorrectionFailed, "cannot restore the objects of release %s revision %d: %v",
				o.Release, o.Result.Version, o.Err)
		}
		return
	}
	// A read, a check or a drift correction that passes changes nothing worth an Event.
	switch o.Action {
	case ActionInstall:
		normal(names.ReasonInstalled, "installed release %s revision %d (chart %s)%s", o.Result.Name, o.Result.Version,
			chartRef(o.Chart), with(o, annotations.ForInstall))
	case ActionUpgrade:
		normal(names.ReasonUpgraded, "upgraded release %s to revision %d (chart %s)%s", o.Result.Name, o.Result.Version,
			chartRef(o.Chart), with(o, annotations.ForUpgrade))
	case ActionUninstall:
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

// chartRef names a loaded chart (Helm's loader refuses one without metadata).
func chartRef(chrt *chart.Chart) string { return chrt.Metadata.Name + "-" + chrt.Metadata.Version }

// Metrics publishes, beside controller-runtime's own metrics:
//   - myproxy_operator_helm_action_duration_seconds{action,result}: how long Helm actions take;
//   - myproxy_operator_helm_action_failures_total{action,reason}: failed actions by reason;
//   - myproxy_operator_releases{state}: releases known to the operator by Helm status
//     (deployed, failed, pending-install, ...).
type Metrics struct {
	duration *prometheus.HistogramVec
	failures *prometheus.CounterVec
	releases *prometheus.GaugeVec

	mu     sync.Mutex
	states map[string]string // namespace/name -> Helm status
}

// NewMetrics creates the metrics and registers them.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "myproxy_operator_helm_action_duration_seconds",
			Help:    "Duration of Helm actions (get, install, upgrade, check, uninstall, reconcile) by result.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"action", "result"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "myproxy_operator_helm_action_failures_total",
			Help: "Failed Helm actions by action and reason.",
		}, []string{"action", "reason"}),
		releases: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "myproxy_operator_releases",
			Help: "Helm releases the operator manages, by Helm status.",
		}, []string{"state"}),
		states: map[string]string{},
	}
	for _, c := range []prometheus.Collector{m.duration, m.failures, m.releases} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Observe records the outcome of one Helm action.
func (m *Metrics) Observe(o Outcome) {
	notFound := errors.Is(o.Err, driver.ErrReleaseNotFound)
	result := "success"
	if o.Err != nil && !notFound {
		result = "failure"
		m.failures.WithLabelValues(string(o.Action), FailureReason(o.Err)).Inc()
	}
	m.duration.WithLabelValues(string(o.Action), result).Observe(o.Duration.Seconds())

	key := o.Object.GetNamespace() + "/" + o.Release
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case notFound || (o.Action == ActionUninstall && o.Err == nil):
		delete(m.states, key)
	case o.Action == ActionCheck || o.Action == ActionClient:
		// A dry run's release is a simulation; a client failure says nothing of the release.
		return
	case o.Result != nil && o.Result.Info != nil:
		m.states[key] = o.Result.Info.Status.String()
	default:
		return
	}
	m.recountLocked()
}

func (m *Metrics) recountLocked() {
	counts := map[string]float64{}
	for _, s := range m.states {
		counts[s]++
	}
	m.releases.Reset()
	for s, n := range counts {
		m.releases.WithLabelValues(s).Set(n)
	}
}

// Forget drops a release whose resource went without an uninstall this process saw.
func (m *Metrics) Forget(namespace, release string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.states, namespace+"/"+release)
	m.recountLocked()
}

// Len returns the number of releases whose state is kept.
func (m *Metrics) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.states)
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

package actionclient

import (
	"errors"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

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
	case notFound || (o.Action == Uninstall && o.Err == nil):
		delete(m.states, key)
	case o.Action == Check || o.Action == Client:
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

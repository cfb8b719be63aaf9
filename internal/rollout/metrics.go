package rollout

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics publishes each kind's rollout:
//   - myproxy_operator_rollout_halted{kind}: 1 while its rollout is halted;
//   - myproxy_operator_rollout_wave{kind}: the last wave admitted (-1 before the first);
//   - myproxy_operator_rollout_releases{kind,phase}: releases by phase (held, admitted,
//     upgraded, ready, failed).
type Metrics struct {
	halted   *prometheus.GaugeVec
	wave     *prometheus.GaugeVec
	releases *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		halted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "myproxy_operator_rollout_halted",
			Help: "1 while the rollout of a new chart to the kind's fleet is halted by its failure budget."}, []string{"kind"}),
		wave: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "myproxy_operator_rollout_wave",
			Help: "The last wave of the kind's rollout admitted (-1 before the first)."}, []string{"kind"}),
		releases: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "myproxy_operator_rollout_releases",
			Help: "Releases of the kind's rollout by phase: held (waiting for a wave), admitted, upgraded, ready, failed."},
			[]string{"kind", "phase"}),
	}
	for _, c := range []prometheus.Collector{m.halted, m.wave, m.releases} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) set(kind string, st State, held int) {
	if m == nil {
		return
	}
	halted := 0.0
	if st.Halted != "" {
		halted = 1
	}
	m.halted.WithLabelValues(kind).Set(halted)
	m.wave.WithLabelValues(kind).Set(float64(st.Wave))
	counts := map[Phase]int{PhaseAdmitted: 0, PhaseUpgraded: 0, PhaseReady: 0, PhaseFailed: 0}
	for _, mem := range st.Members {
		counts[mem.Phase]++
	}
	m.releases.WithLabelValues(kind, "held").Set(float64(held))
	for p, n := range counts {
		m.releases.WithLabelValues(kind, string(p)).Set(float64(n))
	}
}

package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// fleetResult is what one subject did with a fleet of N MyProxies.
type fleetResult struct {
	Subject string `json:"subject"`
	N       int    `json:"n"`

	DeployedSeconds  float64  `json:"deployedSeconds"`  // apply of N to all Deployed
	AvailableSeconds float64  `json:"availableSeconds"` // apply of N to all Deployments available
	CPUSeconds       float64  `json:"cpuSeconds"`       // operator CPU from apply to all Deployed
	PeakRSSMiB       float64  `json:"peakRSSMiB"`       // operator high-water mark over the whole run
	Requests         requests `json:"requests"`         // operator requests from apply to all Deployed, by verb
	RequestsPerCR    float64  `json:"requestsPerCR"`
	// RequestsByResource details Requests by verb and resource.
	RequestsByResource requests `json:"requestsByResource,omitempty"`

	LookupReleases            int      `json:"lookupReleases"` // in the fleet during the idle window
	IdleMinutes               float64  `json:"idleMinutes"`
	IdleRequests              requests `json:"idleRequests"`
	IdleRequestsPerCRMinute   float64  `json:"idleRequestsPerCRMinute"`
	IdleCPUSecondsPerCRMinute float64  `json:"idleCPUSecondsPerCRMinute"`

	DriftSeconds float64   `json:"driftSeconds"` // a deleted Deployment back
	Latencies    []float64 `json:"latencies"`    // one more MyProxy to Deployed, seconds each
	LatencyP50   float64   `json:"latencyP50"`
	LatencyP99   float64   `json:"latencyP99"`

	DeleteSeconds float64 `json:"deleteSeconds"` // delete of all to nothing left
	Leftovers     int     `json:"leftovers"`     // objects and release Secrets left after delete
}

// memoryResult is an operator's resident memory with a small fleet, without and with unrelated
// Secrets and ConfigMaps in other namespaces.
type memoryResult struct {
	Subject       string  `json:"subject"`
	Unrelated     int     `json:"unrelated"` // Secrets and ConfigMaps, each
	UnrelatedKiB  int     `json:"unrelatedKiB"`
	WithoutMiB    float64 `json:"withoutMiB"`
	WithMiB       float64 `json:"withMiB"`
	ChangePercent float64 `json:"changePercent"`
}

type report struct {
	Started time.Time      `json:"started"`
	Machine string         `json:"machine"`
	Command string         `json:"command"`
	Fleet   []fleetResult  `json:"fleet"`
	Memory  []memoryResult `json:"memory"`
	Targets []targetResult `json:"targets"`
}

// percentile of sorted-ascending values, nearest rank.
func percentile(values []float64, p float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), values...)
	sort.Float64s(s)
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	rank = max(0, min(rank, len(s)-1))
	return s[rank]
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// targetResult is one goal of the benchmark and whether this run met it.
type targetResult struct {
	Goal  string  `json:"goal"`
	Value float64 `json:"value"`
	Limit float64 `json:"limit"`
	Met   bool    `json:"met"`
}

func (r *report) find(subject string) *fleetResult {
	for i := range r.Fleet {
		if r.Fleet[i].Subject == subject {
			return &r.Fleet[i]
		}
	}
	return nil
}

// evaluate checks the run against the goals it can speak to (those whose subjects ran).
func (r *report) evaluate() {
	r.Targets = nil
	add := func(goal string, value, limit float64) {
		r.Targets = append(r.Targets, targetResult{Goal: goal, Value: value, Limit: limit, Met: !math.IsNaN(value) && value <= limit})
	}
	ours, stock, limit := r.find(subjectOurs), r.find(subjectStock), r.find(subjectLimit)
	if ours != nil && limit != nil {
		add("time to all Deployed / client-go limit", ratio(ours.DeployedSeconds, limit.DeployedSeconds), 3)
	}
	if ours != nil && stock != nil {
		add("time to all Deployed / stock", ratio(ours.DeployedSeconds, stock.DeployedSeconds), 0.25)
		add("CPU seconds to converge / stock", ratio(ours.CPUSeconds, stock.CPUSeconds), 0.2)
		add("peak RSS / stock", ratio(ours.PeakRSSMiB, stock.PeakRSSMiB), 0.5)
	}
	if ours != nil {
		if ours.IdleMinutes > 0 {
			add("idle API requests per CR per minute", ours.IdleRequestsPerCRMinute, 0.1)
			add("idle CPU seconds per CR per minute", ours.IdleCPUSecondsPerCRMinute, 0.001)
		}
		add("deleted Deployment back (s)", ours.DriftSeconds, 5)
		add("one more MyProxy to Deployed, p99 (s)", ours.LatencyP99, 1)
		add("objects left after deleting all", float64(ours.Leftovers), 0)
	}
	for _, m := range r.Memory {
		if m.Subject == subjectOurs {
			add("RSS change with unrelated objects (%)", math.Abs(m.ChangePercent), 10)
		}
	}
}

func f1(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.1f", v)
}

func f3(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf("%.3g", v)
}

func verbs(r requests) string {
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return r[keys[i]] > r[keys[j]] || (r[keys[i]] == r[keys[j]] && keys[i] < keys[j]) })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, r[k]))
	}
	return strings.Join(parts, ", ")
}

// markdown writes the report as the tables the README carries.
func (r *report) markdown(w io.Writer) {
	stock, limit := r.find(subjectStock), r.find(subjectLimit)
	vs := func(v float64, base *fleetResult, get func(*fleetResult) float64) string {
		if base == nil || base.Subject == "" {
			return "—"
		}
		return f3(ratio(v, get(base))) + "×"
	}
	deployed := func(f *fleetResult) float64 { return f.DeployedSeconds }
	cpu := func(f *fleetResult) float64 { return f.CPUSeconds }
	rss := func(f *fleetResult) float64 { return f.PeakRSSMiB }

	fmt.Fprintf(w, "`%s` on %s, %s.\n\n", r.Command, r.Machine, r.Started.Format("2006-01-02"))
	fmt.Fprintln(w, "| subject | N | all Deployed | ×limit | ×stock | all Available | CPU-s | ×stock | peak RSS MiB | ×stock | requests per CR |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, f := range r.Fleet {
		row := []string{f.Subject, fmt.Sprint(f.N), f1(f.DeployedSeconds) + " s", vs(f.DeployedSeconds, limit, deployed),
			vs(f.DeployedSeconds, stock, deployed), f1(f.AvailableSeconds) + " s"}
		if f.Subject == subjectLimit {
			row = append(row, "—", "—", "—", "—")
		} else {
			row = append(row, f1(f.CPUSeconds), vs(f.CPUSeconds, stock, cpu), f1(f.PeakRSSMiB), vs(f.PeakRSSMiB, stock, rss))
		}
		row = append(row, f1(f.RequestsPerCR))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| subject | lookup releases at rest | idle requests / CR / min | idle CPU-s / CR / min | deleted Deployment back | one more CR to Deployed p50 / p99 (samples) | delete all | left over |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, f := range r.Fleet {
		lookups, idleReq, idleCPU := fmt.Sprint(f.LookupReleases), f3(f.IdleRequestsPerCRMinute), f3(f.IdleCPUSecondsPerCRMinute)
		drift := f1(f.DriftSeconds) + " s"
		if f.Subject == subjectLimit {
			lookups, idleReq, idleCPU, drift = "—", "—", "—", "—"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.2f / %.2f s (%d) | %s s | %d |\n", f.Subject, lookups, idleReq, idleCPU, drift,
			f.LatencyP50, f.LatencyP99, len(f.Latencies), f1(f.DeleteSeconds), f.Leftovers)
	}
	if len(r.Memory) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| subject | peak RSS, 10 MyProxies | with unrelated Secrets + ConfigMaps | change |")
		fmt.Fprintln(w, "|---|---|---|---|")
		for _, m := range r.Memory {
			fmt.Fprintf(w, "| %s | %.1f MiB | %.1f MiB (%d + %d of %d KiB) | %+.1f%% |\n", m.Subject, m.WithoutMiB, m.WithMiB,
				m.Unrelated, m.Unrelated, m.UnrelatedKiB, m.ChangePercent)
		}
	}
	if len(r.Targets) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| goal | this run | limit | met |")
		fmt.Fprintln(w, "|---|---|---|---|")
		for _, t := range r.Targets {
			met := "yes"
			if !t.Met {
				met = "**no**"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.Goal, f3(t.Value), f3(t.Limit), met)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Requests while converging, by verb:")
	fmt.Fprintln(w)
	for _, f := range r.Fleet {
		fmt.Fprintf(w, "- %s: %s\n", f.Subject, verbs(f.Requests))
	}
}

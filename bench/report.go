package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// fleetResult is what one subject did with a fleet of N MyProxies.
type fleetResult struct {
	Subject string    `json:"subject"`
	N       int       `json:"n"`
	Started time.Time `json:"started"` // when this subject's run began

	DeployedSeconds  float64  `json:"deployedSeconds"`  // apply of N to all Deployed
	AvailableSeconds float64  `json:"availableSeconds"` // apply of N to all Deployments available
	CPUSeconds       float64  `json:"cpuSeconds"`       // operator CPU from apply to all Deployed
	PeakRSSMiB       float64  `json:"peakRSSMiB"`       // operator high-water mark over the whole run
	Requests         requests `json:"requests"`         // operator requests from apply to all Deployed, by verb
	RequestsPerCR    float64  `json:"requestsPerCR"`
	// StoredKiBPerCR is the mean size of a MyProxy as the apiserver serves it (JSON) once all
	// are Deployed: what every informer of MyProxies holds per resource, the operator's own
	// cache included.
	StoredKiBPerCR float64 `json:"storedKiBPerCR"`
	// ManifestKiBPerCR is the mean size of the rendered manifest of the fleet's deployed
	// releases, read from their records: what helm-operator-plugins' status updater would add
	// to each stored MyProxy (status.deployedRelease.manifest) where the CRD keeps it.
	ManifestKiBPerCR float64 `json:"manifestKiBPerCR"`
	// RequestsByResource details Requests by verb and resource.
	RequestsByResource requests `json:"requestsByResource,omitempty"`

	LookupReleases            int      `json:"lookupReleases"` // in the fleet during the idle window
	IdleMinutes               float64  `json:"idleMinutes"`
	IdleRequests              requests `json:"idleRequests"`
	IdleRequestsPerCRMinute   float64  `json:"idleRequestsPerCRMinute"`
	IdleCPUSecondsPerCRMinute float64  `json:"idleCPUSecondsPerCRMinute"`

	DriftSeconds  float64   `json:"driftSeconds"`  // a deleted Deployment back
	DriftRestored bool      `json:"driftRestored"` // false: not back within driftWait
	Latencies     []float64 `json:"latencies"`     // one more MyProxy to Deployed, seconds each
	LatencyP50    float64   `json:"latencyP50"`
	LatencyP99    float64   `json:"latencyP99"`

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
	Started time.Time `json:"started"`
	Machine string    `json:"machine"`
	Command string    `json:"command"`
	// Fleet is each subject's run, its median run by time to all Deployed when it ran several
	// rounds (a real run, so that its figures belong together).
	Fleet []fleetResult `json:"fleet"`
	// Runs are every run of each subject, in the order they ran (ROUNDS).
	Runs    map[string][]fleetResult `json:"runs,omitempty"`
	Memory  []memoryResult           `json:"memory"`
	Targets []targetResult           `json:"targets"`
	// Kept are the subjects whose results come from an earlier run (KEEP=1), with its start.
	Kept     []string        `json:"kept,omitempty"`
	Profiles []profileResult `json:"profiles,omitempty"`
	// Baseline is this operator's result in a run at a smaller N (BASELINE=path).
	Baseline *fleetResult `json:"baseline,omitempty"`
}

// addRun records a run of a subject and makes the subject's median run its row.
func (r *report) addRun(res fleetResult) {
	if r.Runs == nil {
		r.Runs = map[string][]fleetResult{}
	}
	r.Runs[res.Subject] = append(r.Runs[res.Subject], res)
	runs := slices.SortedFunc(slices.Values(r.Runs[res.Subject]), func(a, b fleetResult) int {
		return cmp.Compare(a.DeployedSeconds, b.DeployedSeconds)
	})
	r.Fleet = slices.DeleteFunc(r.Fleet, func(f fleetResult) bool { return f.Subject == res.Subject })
	r.Fleet = append(r.Fleet, runs[(len(runs)-1)/2])
	r.sortFleet()
}

// runFigures are the figures whose spread over runs a report shows, each read from a run.
var runFigures = []struct {
	name string
	get  func(fleetResult) float64
}{
	{"all Deployed (s)", func(r fleetResult) float64 { return r.DeployedSeconds }},
	{"CPU-s to Deployed", func(r fleetResult) float64 { return r.CPUSeconds }},
	{"peak RSS (MiB)", func(r fleetResult) float64 { return r.PeakRSSMiB }},
	{"requests per CR", func(r fleetResult) float64 { return r.RequestsPerCR }},
	{"idle CPU-s / CR / min", func(r fleetResult) float64 { return r.IdleCPUSecondsPerCRMinute }},
	{"idle requests / CR / min", func(r fleetResult) float64 { return r.IdleRequestsPerCRMinute }},
	{"one more CR to Deployed p50 (s)", func(r fleetResult) float64 { return r.LatencyP50 }},
	{"delete all (s)", func(r fleetResult) float64 { return r.DeleteSeconds }},
}

// spread is the median of values and their range, as "median (min–max)".
func spread(values []float64) string {
	if len(values) == 0 {
		return "—"
	}
	v := slices.Sorted(slices.Values(values))
	return fmt.Sprintf("%s (%s–%s)", f3(median(v)), f3(v[0]), f3(v[len(v)-1]))
}

// figures is one figure of each run.
func figures(runs []fleetResult, get func(fleetResult) float64) []float64 {
	out := make([]float64, 0, len(runs))
	for _, run := range runs {
		out = append(out, get(run))
	}
	return out
}

// median of values (of two in the middle, their mean).
func median(values []float64) float64 {
	v := slices.Sorted(slices.Values(values))
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}

// spreadTable writes one row per name: its runs' count and each figure's spread over them.
func spreadTable(w io.Writer, label string, names, notes []string, runs map[string][]fleetResult) {
	fmt.Fprintf(w, "| %s | runs |", label)
	for _, f := range runFigures {
		fmt.Fprintf(w, " %s |", f.name)
	}
	fmt.Fprintf(w, "\n|---|---|%s\n", strings.Repeat("---|", len(runFigures)))
	for i, name := range names {
		fmt.Fprintf(w, "| %s%s | %d |", name, notes[i], len(runs[name]))
		for _, f := range runFigures {
			fmt.Fprintf(w, " %s |", spread(figures(runs[name], f.get)))
		}
		fmt.Fprintln(w)
	}
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

// peers are the subjects this operator is compared with: every one but itself, its earlier
// builds (BUILDS: compared in goals of their own) and the limit.
func (r *report) peers() []*fleetResult {
	var out []*fleetResult
	for i := range r.Fleet {
		if s := r.Fleet[i].Subject; s != subjectOurs && s != subjectLimit && !strings.HasPrefix(s, subjectOurs+" (") {
			out = append(out, &r.Fleet[i])
		}
	}
	return out
}

// best returns the peer with the lowest (best) positive value of get, nil when no peer ran.
func (r *report) best(get func(*fleetResult) float64) *fleetResult {
	var b *fleetResult
	for _, p := range r.peers() {
		if v := get(p); v > 0 && (b == nil || v < get(b)) {
			b = p
		}
	}
	return b
}

func deployedTime(f *fleetResult) float64 { return f.DeployedSeconds }
func convergeCPU(f *fleetResult) float64  { return f.CPUSeconds }
func peakRSS(f *fleetResult) float64      { return f.PeakRSSMiB }

// evaluate checks the run against the goals it can speak to (those whose subjects ran). Each
// ratio to a peer is to the best peer on that row.
func (r *report) evaluate() {
	r.Targets = nil
	add := func(goal string, value, limit float64) {
		r.Targets = append(r.Targets, targetResult{Goal: goal, Value: value, Limit: limit, Met: !math.IsNaN(value) && value <= limit})
	}
	ours, limit := r.find(subjectOurs), r.find(subjectLimit)
	if ours != nil && limit != nil {
		add("time to all Deployed / client-go limit", ratio(ours.DeployedSeconds, limit.DeployedSeconds), limitRatioGoal(ours.N))
	}
	if ours != nil && r.Baseline != nil && ours.N == 10*r.Baseline.N {
		add(fmt.Sprintf("peak RSS / peak RSS at N=%d", r.Baseline.N), ratio(ours.PeakRSSMiB, r.Baseline.PeakRSSMiB), rssGrowthGoal)
	}
	if ours != nil {
		add("requests per MyProxy while converging", ours.RequestsPerCR, 8)
	}
	for _, row := range []struct {
		goal  string
		get   func(*fleetResult) float64
		limit float64
	}{
		{goal: "time to all Deployed / best peer", get: deployedTime, limit: 0.25},
		{goal: "CPU seconds to converge / best peer", get: convergeCPU, limit: 0.1},
		{goal: "peak RSS / best peer", get: peakRSS, limit: 0.3},
	} {
		if b := r.best(row.get); ours != nil && b != nil {
			add(row.goal+" ("+b.Subject+")", ratio(row.get(ours), row.get(b)), row.limit)
		}
	}
	// Against each earlier build of this operator: no more requests, and the median of time, CPU
	// and peak RSS no higher than the build's highest run (its noise range).
	for i := range r.Fleet {
		b := &r.Fleet[i]
		if ours == nil || !strings.HasPrefix(b.Subject, subjectOurs+" (") {
			continue
		}
		add("requests per MyProxy / "+b.Subject, ratio(ours.RequestsPerCR, b.RequestsPerCR), 1)
		for _, f := range runFigures[:3] { // time, CPU, peak RSS
			mine, theirs := figures(r.Runs[ours.Subject], f.get), figures(r.Runs[b.Subject], f.get)
			if len(mine) > 0 && len(theirs) > 0 {
				add(f.name+", median / highest run of "+b.Subject, ratio(median(mine), slices.Max(theirs)), 1)
			}
		}
	}
	if ours != nil {
		if ours.IdleMinutes > 0 {
			add("idle API requests per CR per minute", ours.IdleRequestsPerCRMinute, 0.1)
			add("idle CPU seconds per CR per minute", ours.IdleCPUSecondsPerCRMinute, 0.001)
		}
		add("deleted Deployment back (s)", ours.DriftSeconds, 5) // driftWait when not back
		add("one more MyProxy to Deployed, p99 (s)", ours.LatencyP99, 1)
		add("objects left after deleting all", float64(ours.Leftovers), 0)
	}
	for _, m := range r.Memory {
		if m.Subject == subjectOurs {
			add("RSS change with unrelated objects (%)", math.Abs(m.ChangePercent), 10)
		}
	}
}

// limitRatioGoal is the time to all Deployed allowed against the client-go limit: 1.3× up to a
// fleet of 1000, 1.5× beyond, where the operator's caches and queues are ten times larger.
func limitRatioGoal(n int) float64 {
	if n <= 1000 {
		return 1.3
	}
	return 1.5
}

// rssGrowthGoal is the peak RSS allowed for a fleet ten times larger: memory grows with the fleet,
// and slower than it.
const rssGrowthGoal = 4

// severalRounds reports whether a subject ran its fleet more than once.
func (r *report) severalRounds() bool {
	for _, runs := range r.Runs {
		if len(runs) > 1 {
			return true
		}
	}
	return false
}

// readReport reads the results.json of a run.
func readReport(path string) (*report, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r report
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// baselineFrom reads this operator's result from the results.json of another run.
func (r *report) baselineFrom(path string) error {
	other, err := readReport(path)
	if err != nil {
		return fmt.Errorf("BASELINE: %w", err)
	}
	if f := other.find(subjectOurs); f != nil {
		r.Baseline = f
		return nil
	}
	return fmt.Errorf("BASELINE %s: no result of %s", path, subjectOurs)
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

// bestNames says which peer was best for time, CPU and memory.
func bestNames(time, cpu, rss *fleetResult) string {
	name := func(f *fleetResult) string {
		if f == nil {
			return "none ran"
		}
		return f.Subject
	}
	return fmt.Sprintf("time %s; CPU %s; peak RSS %s", name(time), name(cpu), name(rss))
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
	limit := r.find(subjectLimit)
	vs := func(v float64, base *fleetResult, get func(*fleetResult) float64) string {
		if base == nil {
			return "—"
		}
		return f3(ratio(v, get(base))) + "×"
	}
	bestTime, bestCPU, bestRSS := r.best(deployedTime), r.best(convergeCPU), r.best(peakRSS)

	fmt.Fprint(w, "# Benchmark results\n\nWritten by `make bench`; what each figure measures: [performance.md](performance.md).\n\n")
	fmt.Fprintf(w, "`%s` on %s, %s.\n\n", r.Command, r.Machine, r.Started.Format("2006-01-02"))
	if len(r.Kept) > 0 {
		fmt.Fprintf(w, "Kept from an earlier run with the same settings (KEEP=1): %s.\n\n", strings.Join(r.Kept, "; "))
	}
	fmt.Fprintln(w, "Ratios to a peer are to the best peer on that column:", bestNames(bestTime, bestCPU, bestRSS)+".")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| subject | N | all Deployed | ×limit | ×best peer | all Available | CPU-s | ×best peer | peak RSS MiB | ×best peer | requests per CR | KiB per stored CR | KiB of manifest per release |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, f := range r.Fleet {
		row := []string{f.Subject, fmt.Sprint(f.N), f1(f.DeployedSeconds) + " s", vs(f.DeployedSeconds, limit, deployedTime),
			vs(f.DeployedSeconds, bestTime, deployedTime), f1(f.AvailableSeconds) + " s"}
		if f.Subject == subjectLimit {
			row = append(row, "—", "—", "—", "—")
		} else {
			row = append(row, f1(f.CPUSeconds), vs(f.CPUSeconds, bestCPU, convergeCPU), f1(f.PeakRSSMiB), vs(f.PeakRSSMiB, bestRSS, peakRSS))
		}
		row = append(row, f1(f.RequestsPerCR), f1(f.StoredKiBPerCR), f1(f.ManifestKiBPerCR))
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
	noted := false
	for _, f := range r.Fleet {
		if note, ok := subjectNotes[f.Subject]; ok {
			fmt.Fprintf(w, "- %s: %s.\n", f.Subject, note)
			noted = true
		}
	}
	if noted {
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "| subject | lookup releases at rest | idle requests / CR / min | idle CPU-s / CR / min | deleted Deployment back | one more CR to Deployed p50 / p99 (samples) | delete all | left over |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, f := range r.Fleet {
		lookups, idleReq, idleCPU := fmt.Sprint(f.LookupReleases), f3(f.IdleRequestsPerCRMinute), f3(f.IdleCPUSecondsPerCRMinute)
		drift := f1(f.DriftSeconds) + " s"
		if !f.DriftRestored {
			drift = "not back in " + driftWait.String()
		}
		if f.Subject == subjectLimit {
			lookups, idleReq, idleCPU, drift = "—", "—", "—", "—"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %.2f / %.2f s (%d) | %s s | %d |\n", f.Subject, lookups, idleReq, idleCPU, drift,
			f.LatencyP50, f.LatencyP99, len(f.Latencies), f1(f.DeleteSeconds), f.Leftovers)
	}
	if r.severalRounds() {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Every subject ran its fleet in rounds, interleaved; the rows above are each subject's median run "+
			"by time to all Deployed. Each cell below is the median of a subject's runs and, in brackets, their range: "+
			"a difference smaller than the ranges is noise.")
		fmt.Fprintln(w)
		var subjects []string
		for _, f := range r.Fleet {
			subjects = append(subjects, f.Subject)
		}
		spreadTable(w, "subject", subjects, make([]string, len(subjects)), r.Runs)
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
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Requests at rest (the idle window), by verb; a watch is an informer renewing its watch, which client-go ends every 5 to 10 minutes:")
	fmt.Fprintln(w)
	for _, f := range r.Fleet {
		if f.Subject == subjectLimit {
			continue
		}
		idle := verbs(f.IdleRequests)
		if idle == "" {
			idle = "none"
		}
		fmt.Fprintf(w, "- %s: %s\n", f.Subject, idle)
	}
	if r.Baseline != nil {
		fmt.Fprintf(w, "\nBaseline (BASELINE): %s at N=%d, %.1f s to all Deployed, peak RSS %.1f MiB.\n",
			r.Baseline.Subject, r.Baseline.N, r.Baseline.DeployedSeconds, r.Baseline.PeakRSSMiB)
	}
	for _, p := range r.Profiles {
		p.markdown(w)
	}
}

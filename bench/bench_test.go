package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestCountRequestsByUserWindowAndAuditID(t *testing.T) {
	log := strings.Join([]string{
		// a watch appears twice (started, complete): one request
		`{"auditID":"a","stage":"ResponseStarted","verb":"watch","user":{"username":"op"},"requestReceivedTimestamp":"2026-01-01T00:00:01Z","objectRef":{"resource":"secrets"}}`,
		`{"auditID":"a","stage":"ResponseComplete","verb":"watch","user":{"username":"op"},"requestReceivedTimestamp":"2026-01-01T00:00:01Z","objectRef":{"resource":"secrets"}}`,
		`{"auditID":"b","stage":"ResponseComplete","verb":"get","user":{"username":"op"},"requestReceivedTimestamp":"2026-01-01T00:00:02Z","objectRef":{"resource":"myproxies","subresource":"status"}}`,
		`{"auditID":"c","stage":"ResponseComplete","verb":"get","user":{"username":"someone-else"},"requestReceivedTimestamp":"2026-01-01T00:00:02Z"}`,
		`{"auditID":"d","stage":"ResponseComplete","verb":"get","user":{"username":"op"},"requestReceivedTimestamp":"2026-01-01T00:00:09Z"}`,
		`{"auditID":"e","stage":"Respo`, // cut by rotation
	}, "\n")
	from, to := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)
	got, err := countRequestsIn(strings.NewReader(log), "op", from, to, false)
	if err != nil {
		t.Fatal(err)
	}
	if got["watch"] != 1 || got["get"] != 1 || got.total() != 2 {
		t.Errorf("by verb = %v, want watch 1, get 1", got)
	}
	detail, _ := countRequestsIn(strings.NewReader(log), "op", from, to, true)
	if detail["get myproxies/status"] != 1 || detail["watch secrets"] != 1 {
		t.Errorf("by verb and resource = %v", detail)
	}
}

func TestCPUSecondsFromStat(t *testing.T) {
	// The command name may hold spaces and parentheses; utime and stime are fields 14 and 15.
	stat := []byte("4242 (my (odd) op) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0 20 0 1 0")
	got, err := cpuSeconds(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 4 {
		t.Errorf("cpuSeconds = %v, want 4 (400 ticks)", got)
	}
	if _, err := cpuSeconds([]byte("garbage")); err == nil {
		t.Error("malformed stat accepted")
	}
}

func TestPercentileAndTargets(t *testing.T) {
	v := []float64{0.5, 0.1, 0.9, 0.3}
	if p := percentile(v, 50); p != 0.3 {
		t.Errorf("p50 = %v, want 0.3", p)
	}
	if p := percentile(v, 99); p != 0.9 {
		t.Errorf("p99 = %v, want 0.9", p)
	}
	r := &report{Fleet: []fleetResult{
		{Subject: subjectLimit, DeployedSeconds: 10},
		{Subject: subjectOurs, DeployedSeconds: 12, CPUSeconds: 10, PeakRSSMiB: 50, RequestsPerCR: 7, LatencyP99: 0.5, DriftSeconds: 1, DriftRestored: true},
		{Subject: subjectStock, DeployedSeconds: 200, CPUSeconds: 100, PeakRSSMiB: 150},
		// tuned: faster and leaner than at its defaults, so the ratios must read against it
		{Subject: subjectStockTuned, DeployedSeconds: 100, CPUSeconds: 150, PeakRSSMiB: 160},
		{Subject: subjectPlugins, DeployedSeconds: 150, CPUSeconds: 0, PeakRSSMiB: 0}, // did not report: no best
	}}
	r.evaluate()
	got := map[string]targetResult{}
	for _, tr := range r.Targets {
		got[tr.Goal] = tr
	}
	tests := []struct {
		goal  string
		value float64
		met   bool
	}{
		{goal: "time to all Deployed / client-go limit", value: 1.2, met: true},
		{goal: "requests per MyProxy while converging", value: 7, met: true},
		{goal: "time to all Deployed / best peer (" + subjectStockTuned + ")", value: 0.12, met: true},
		{goal: "CPU seconds to converge / best peer (" + subjectStock + ")", value: 0.1, met: true},
		{goal: "peak RSS / best peer (" + subjectStock + ")", value: 50.0 / 150, met: false},
	}
	for _, tt := range tests {
		tr, ok := got[tt.goal]
		if !ok {
			t.Errorf("no goal %q in %+v", tt.goal, r.Targets)
			continue
		}
		if math.Abs(tr.Value-tt.value) > 1e-9 || tr.Met != tt.met {
			t.Errorf("%s = %v (met %v), want %v (met %v)", tt.goal, tr.Value, tr.Met, tt.value, tt.met)
		}
	}
}

func TestRoundsReportEachSubjectsMedianRunAndTheSpread(t *testing.T) {
	r := &report{}
	for _, res := range []fleetResult{
		{Subject: subjectOurs, DeployedSeconds: 30, CPUSeconds: 3},
		{Subject: subjectPlugins, DeployedSeconds: 90},
		{Subject: subjectOurs, DeployedSeconds: 10, CPUSeconds: 1},
		{Subject: subjectOurs, DeployedSeconds: 20, CPUSeconds: 2},
	} {
		r.addRun(res)
	}
	if len(r.Fleet) != 2 || r.Fleet[0].Subject != subjectOurs || r.Fleet[1].Subject != subjectPlugins {
		t.Fatalf("fleet = %+v, want one row per subject in report order", r.Fleet)
	}
	if got := r.Fleet[0]; got.DeployedSeconds != 20 || got.CPUSeconds != 2 {
		t.Errorf("row = %+v, want the median run (20 s, 2 CPU-s)", got)
	}
	if len(r.Runs[subjectOurs]) != 3 || !r.severalRounds() {
		t.Errorf("runs = %+v, want all three kept", r.Runs)
	}
	var md strings.Builder
	r.markdown(&md)
	if !strings.Contains(md.String(), "| "+subjectOurs+" | 3 | 20 (10–30) | 2 (1–3) |") {
		t.Errorf("no spread row for %s in\n%s", subjectOurs, md.String())
	}
	single := &report{}
	single.addRun(fleetResult{Subject: subjectOurs, DeployedSeconds: 5})
	md.Reset()
	single.markdown(&md)
	if single.severalRounds() || strings.Contains(md.String(), "in rounds") {
		t.Errorf("one run each reported as rounds:\n%s", md.String())
	}
}

package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const root = "../.."

func TestMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{expr: `sum by (state) (myproxy_operator_releases{job=~"$job",state="failed"})`, want: []string{"myproxy_operator_releases"}},
		{expr: `histogram_quantile(0.99, sum by (le, action) (rate(myproxy_operator_helm_action_duration_seconds_bucket{job=~"$job"}[$__rate_interval])))`,
			want: []string{"myproxy_operator_helm_action_duration_seconds"}},
		{expr: `absent(up{job="x"} == 1)`, want: []string{}},
		{expr: `sum(process_resident_memory_bytes) or sum(go_memstats_heap_inuse_bytes{state="rate(fake_metric)"})`,
			want: []string{"go_memstats_heap_inuse_bytes", "process_resident_memory_bytes"}},
	}
	for _, tt := range tests {
		if got := MetricNames(tt.expr); !slices.Equal(got, tt.want) {
			t.Errorf("MetricNames(%s) = %v, want %v", tt.expr, got, tt.want)
		}
	}
}

// promtool returns the path of the promtool the Makefile builds, skipping without it.
func promtool(t *testing.T) string {
	t.Helper()
	p := os.Getenv("PROMTOOL")
	if p == "" {
		p = filepath.Join(root, "bin", "promtool")
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("promtool not built (make tools): %v", err)
		}
		t.Skipf("promtool not built (make tools): %v", err)
	}
	return p
}

func TestRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	_, spec, err := ReadRules(filepath.Join(root, RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("testdata/alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every alert has a unit test that makes it fire.
func TestEveryAlertIsUnitTested(t *testing.T) {
	groups, _, err := ReadRules(filepath.Join(root, RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("testdata/alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for alert := range groups.RuleExpressions() {
		if !strings.Contains(string(tests), "alertname: "+alert+"\n    exp_alerts:") {
			t.Errorf("alert %s has no test in testdata/alerts_test.yaml in which it fires", alert)
		}
	}
}

func TestDashboardImports(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, DashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int `json:"id"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" || dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard without uid, title or panels")
	}
	vars := map[string]bool{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] || !vars["job"] {
		t.Errorf("dashboard variables %v: want datasource and job, so that it imports into any Grafana", vars)
	}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %d reads datasource %q, not the variable", p.ID, p.Datasource.UID)
		}
		for _, target := range p.Targets {
			if !strings.Contains(target.Expr, `job=~"$job"`) {
				t.Errorf("panel %d: %s is not scoped to the job variable", p.ID, target.Expr)
			}
		}
	}
}

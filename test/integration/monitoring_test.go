package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/example/myproxy-operator/test/harness"
	"github.com/example/myproxy-operator/test/monitoring"
)

// TestEveryMonitoredMetricIsExported scrapes the operator after an install and a failed
// upgrade (so that every labelled family has a series) and checks that each metric the Grafana
// dashboard and the alerting rules read is among those it exports.
func TestEveryMonitoredMetricIsExported(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	addr := harness.FreeAddr(t)
	ns := newNamespace(t, c, nil)
	// A rollout state namespace turns chart rollouts in waves on, and with them their metrics.
	startOperatorWith(t, "--metrics-bind-address="+addr, "--rollout-state-namespace="+ns)
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", timeout)
	patchSpec(t, c, ns, "edge", fmt.Sprintf(`{"affinity":%s}`, badAffinityValue))
	harness.Eventually(t, timeout, "a failed upgrade counted", func(context.Context) (bool, string) {
		n := helmFailures(t, addr, "upgrade")
		return n > 0, fmt.Sprintf("%g failed upgrades", n)
	})

	monitored, err := monitoring.MonitoredMetrics(harness.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	if len(monitored) < 10 {
		t.Fatalf("only %d metrics found in the dashboard and rules: %v", len(monitored), monitored)
	}
	exported := exportedFamilies(t, addr)
	var missing []string
	for name, where := range monitored {
		if !exported[name] {
			missing = append(missing, fmt.Sprintf("%s (%s)", name, strings.Join(where, ", ")))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("metrics read but not exported:\n%s", strings.Join(missing, "\n"))
	}
}

// exportedFamilies returns the metric families the operator's plain-HTTP endpoint serves.
func exportedFamilies(t *testing.T, addr string) map[string]bool {
	t.Helper()
	body, err := harness.ScrapeMetrics(addr)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = true
		}
	}
	return out
}

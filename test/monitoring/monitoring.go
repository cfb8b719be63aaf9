// Package monitoring reads the expressions of the operator's alerting rules
// (config/prometheus/rules.yaml) and Grafana dashboard (config/grafana), and names the metrics
// they read, so that tests can check each against what the operator exports.
package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Paths of the rules and the dashboard, relative to the repository root.
const (
	RulesFile     = "config/prometheus/rules.yaml"
	DashboardFile = "config/grafana/myproxy-operator.json"
)

// RuleGroups is the spec of a PrometheusRule: what promtool reads as a rules file.
type RuleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert string `json:"alert"`
			Expr  string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// ReadRules returns the groups of the PrometheusRule at path.
func ReadRules(path string) (RuleGroups, []byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return RuleGroups{}, nil, err
	}
	var rule struct {
		Kind string          `json:"kind"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &rule); err != nil {
		return RuleGroups{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	if rule.Kind != "PrometheusRule" {
		return RuleGroups{}, nil, fmt.Errorf("%s: kind %q, want PrometheusRule", path, rule.Kind)
	}
	var groups RuleGroups
	if err := json.Unmarshal(rule.Spec, &groups); err != nil {
		return RuleGroups{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	spec, err := yaml.JSONToYAML(rule.Spec)
	return groups, spec, err
}

// RuleExpressions returns the expression of every rule, by alert name.
func (g RuleGroups) RuleExpressions() map[string]string {
	out := map[string]string{}
	for _, group := range g.Groups {
		for _, r := range group.Rules {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// DashboardExpressions returns the expression of every panel target, by panel title.
func DashboardExpressions(path string) (map[string][]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string][]string{}
	for _, p := range dash.Panels {
		for _, t := range p.Targets {
			out[p.Title] = append(out[p.Title], t.Expr)
		}
	}
	return out, nil
}

var (
	quoted      = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers    = regexp.MustCompile(`\{[^}]*\}`)
	grouping    = regexp.MustCompile(`\b(?:by|without)\s*\([^)]*\)`)
	ranges      = regexp.MustCompile(`\[[^\]]*\]`)
	identifiers = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	// functions, aggregations and keywords of PromQL that the expressions use
	promql = map[string]bool{"sum": true, "rate": true, "increase": true, "histogram_quantile": true, "absent": true,
		"and": true, "or": true, "unless": true, "max": true, "min": true, "avg": true, "count": true}
	// synthetic series that Prometheus writes itself, not the operator
	synthetic = map[string]bool{"up": true}
)

// MetricNames returns the metric families an expression reads (histogram series are named by
// their family), without the series Prometheus makes itself.
func MetricNames(expr string) []string {
	e := quoted.ReplaceAllString(expr, `""`)
	e = matchers.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	seen := map[string]bool{}
	for _, id := range identifiers.FindAllString(e, -1) {
		if promql[id] || synthetic[id] {
			continue
		}
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if strings.HasSuffix(id, suffix) && strings.Contains(id, "_seconds") {
				id = strings.TrimSuffix(id, suffix)
			}
		}
		seen[id] = true
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// MonitoredMetrics returns every metric family that the rules and the dashboard at the
// repository root read, with where each is read.
func MonitoredMetrics(root string) (map[string][]string, error) {
	groups, _, err := ReadRules(root + "/" + RulesFile)
	if err != nil {
		return nil, err
	}
	panels, err := DashboardExpressions(root + "/" + DashboardFile)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for alert, expr := range groups.RuleExpressions() {
		for _, m := range MetricNames(expr) {
			out[m] = append(out[m], "alert "+alert)
		}
	}
	for title, exprs := range panels {
		for _, expr := range exprs {
			for _, m := range MetricNames(expr) {
				out[m] = append(out[m], "panel "+title)
			}
		}
	}
	return out, nil
}

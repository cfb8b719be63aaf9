// Package watchesfile loads watches.yaml: helm-operator-plugins' loader (charts, defaults,
// overrideValues expansion) plus the keys it does not know and the stock operator-sdk
// helm-operator does (dryRunOption), and this operator's own (reach and serviceAccountName,
// package tenancy; rollout, package rollout). A key that none knows is an error at start: the
// plugins' loader ignores it, and a misspelt key (reconcilePeriod as reconcileperiod) would
// silently do nothing.
package watchesfile

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/rollout"
	"github.com/example/myproxy-operator/internal/tenancy"
)

// Keys of a watches.yaml entry, as the plugins and the stock operator-sdk helm-operator define them.
var Keys = []string{"group", "version", "kind", "chart", "watchDependentResources", "overrideValues",
	"reconcilePeriod", "maxConcurrentReconciles", "selector", "dryRunOption", tenancy.ReachKey,
	tenancy.ServiceAccountKey, rollout.Key}

// Dry-run modes for the "is an upgrade needed?" check (Helm's --dry-run values). The check must
// stay a dry run, so Helm's "none" and "false" (a real upgrade) are refused.
const (
	DryRunClient = "client" // render without the cluster: lookups return nothing
	DryRunServer = "server" // render with lookups and have the apiserver validate (the plugins' choice)
)

// Watch is one entry.
type Watch struct {
	watches.Watch
	// Chart is the chart at ChartPath, as Helm 4 loads it; it stands in for the plugins' Helm 3
	// chart, which the operator never renders.
	Chart *chart.Chart
	// DryRunOption is the dry-run mode of the upgrade check; "" keeps the reconciler's (server).
	DryRunOption string
	// Reach is what the kind's releases may touch beyond their custom resource's namespace.
	Reach tenancy.Policy
	// ServiceAccountName is the ServiceAccount, of each custom resource's namespace, that the
	// kind's Helm actions run as; "" leaves it to the operator's default (package tenancy).
	ServiceAccountName string
	// Rollout is how a new chart rolls out to the kind's fleet (package rollout).
	Rollout rollout.Policy
}

// Load reads and checks the watches file at path.
func Load(path string) ([]Watch, error) {
	ws, err := watches.Load(path)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var entries []map[string]any
	if err := yaml.Unmarshal(raw, &entries); err != nil {
		return nil, err
	}
	// The plugins' loader decodes the same YAML list with the same library: entry i is ws[i].
	out := make([]Watch, len(ws))
	for i, e := range entries {
		w := Watch{Watch: ws[i]}
		where := fmt.Sprintf("%s: entry %d (%s)", path, i+1, ws[i].GroupVersionKind)
		if w.Chart, err = loader.Load(w.ChartPath); err != nil {
			return nil, fmt.Errorf("%s: chart %s: %w", where, w.ChartPath, err)
		}
		unknown := slices.DeleteFunc(slices.Sorted(maps.Keys(e)), func(k string) bool { return slices.Contains(Keys, k) })
		if len(unknown) > 0 {
			return nil, fmt.Errorf("%s: unknown key(s) %s; the keys are %s", where,
				strings.Join(unknown, ", "), strings.Join(Keys, ", "))
		}
		if v, ok := e["dryRunOption"]; ok {
			s, _ := v.(string)
			if s != DryRunClient && s != DryRunServer {
				return nil, fmt.Errorf("%s: dryRunOption %v is not supported: the upgrade check must be a dry run, %q or %q",
					where, v, DryRunClient, DryRunServer)
			}
			w.DryRunOption = s
		}
		if v, ok := e[tenancy.ReachKey]; ok {
			raw, _ := yaml.Marshal(v)
			if err := yaml.UnmarshalStrict(raw, &w.Reach); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", where, tenancy.ReachKey, err)
			}
			if err := w.Reach.Check(); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
		if v, ok := e[tenancy.ServiceAccountKey]; ok {
			s, _ := v.(string)
			if err := tenancy.CheckName(s); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", where, tenancy.ServiceAccountKey, err)
			}
			w.ServiceAccountName = s
		}
		if v, ok := e[rollout.Key]; ok {
			raw, _ := yaml.Marshal(v)
			if err := yaml.UnmarshalStrict(raw, &w.Rollout); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", where, rollout.Key, err)
			}
			if err := w.Rollout.Check(); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", where, rollout.Key, err)
			}
		}
		out[i] = w
	}
	return out, nil
}

// WithChart serves, in entries, the kind whose chart has the name of the chart in dir with that
// chart instead (a new chart, before it ships).
func WithChart(entries []Watch, dir string) ([]Watch, error) {
	c, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading --chart-dir %s: %w", dir, err)
	}
	var names []string
	for i, w := range entries {
		names = append(names, w.Chart.Name())
		if w.Chart.Name() == c.Name() {
			entries[i].Chart, entries[i].ChartPath = c, dir
			return entries, nil
		}
	}
	return nil, fmt.Errorf("--chart-dir %s holds chart %q; the watches file's charts are %s", dir, c.Name(), strings.Join(names, ", "))
}

// Plain returns the plugins' part of each watch.
func Plain(ws []Watch) []watches.Watch {
	out := make([]watches.Watch, len(ws))
	for i, w := range ws {
		out[i] = w.Watch
	}
	return out
}

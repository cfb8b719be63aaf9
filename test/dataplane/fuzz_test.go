package dataplane

import (
	"fmt"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/example/myproxy-operator/hack/chartfuzz/chartfuzz"
	"github.com/example/myproxy-operator/test/certs"
	"github.com/example/myproxy-operator/test/harness"
	"github.com/example/myproxy-operator/test/nginx"
)

// location opens an nginx location block.
var location = regexp.MustCompile(`(?m)^\s*location\s`)

// Every hostile value the MyProxy schema admits (chartfuzz) renders an nginx.conf that a real
// nginx accepts, with one location per route plus the chart's own (the probe's, and the
// default response's unless a route serves /): no value opens or closes a block.
func TestFuzzedValuesKeepNginxValid(t *testing.T) {
	pair := certs.Valid(t, "fuzz")
	dir := t.TempDir()
	checked := map[string]error{} // nginx.conf -> what nginx -t said, once per distinct file
	seed := map[string]any{
		"routes": []any{
			map[string]any{"path": "/api/", "upstream": "http://api.team.svc:8080/v1/", "setHeaders": map[string]any{"X-Team": "edge"}},
			map[string]any{"path": "/", "upstream": "https://web.team.svc"},
		},
		"defaultResponse": map[string]any{"status": 404, "body": "nothing here\n"},
		"podAnnotations":  map[string]any{"a": "b"},
	}
	report, err := chartfuzz.Run(filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"), []map[string]any{seed},
		func(r, _ chartfuzz.Rendering) error {
			conf, routes, err := nginxConf(r)
			if err != nil {
				return err
			}
			want := routes + 1 // /healthz
			if !servesRoot(r.Values) {
				want++ // the default response
			}
			if got := len(location.FindAllString(conf, -1)); got != want {
				return fmt.Errorf("%d locations for %d routes, want %d", got, routes, want)
			}
			if verdict, seen := checked[conf]; seen {
				return verdict
			}
			checked[conf] = nginx.Test(t, dir, conf, pair)
			return checked[conf]
		})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range report.Findings {
		t.Error(f)
	}
	if len(checked) < 100 {
		t.Errorf("only %d distinct nginx.conf files checked (%d admitted of %d): the fuzzing reached too little", len(checked), report.Admitted, report.Tried)
	}
	t.Logf("%d tried, %d admitted, %d distinct nginx.conf files through nginx -t", report.Tried, report.Admitted, len(checked))
}

// nginxConf finds the rendered nginx.conf and counts the routes of the values.
func nginxConf(r chartfuzz.Rendering) (string, int, error) {
	routes, _ := r.Values["routes"].([]any)
	for _, o := range r.Objects {
		if o["kind"] != "ConfigMap" {
			continue
		}
		data, _ := o["data"].(map[string]any)
		if conf, ok := data["nginx.conf"].(string); ok {
			return conf, len(routes), nil
		}
	}
	return "", 0, fmt.Errorf("no ConfigMap with nginx.conf")
}

func servesRoot(values map[string]any) bool {
	routes, _ := values["routes"].([]any)
	for _, r := range routes {
		if route, _ := r.(map[string]any); route["path"] == "/" {
			return true
		}
	}
	return false
}

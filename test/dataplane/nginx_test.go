// Package dataplane runs the nginx configuration the chart renders in a real nginx (Debian's)
// on loopback, in front of local upstream servers, and checks that requests are routed.
package dataplane

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/test/harness"
)

// renderNginxConf renders the chart for a MyProxy spec and returns the nginx.conf of its ConfigMap.
func renderNginxConf(t *testing.T, spec map[string]any) string {
	t.Helper()
	raw, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	values := harness.WriteTemp(t, "values-*.yaml", raw)
	out := harness.Run(t, nil, harness.Tool(t, "HELM", "helm"), "template", "edge",
		filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"), "-f", values, "-s", "templates/configmap.yaml")
	var cm struct{ Data map[string]string }
	if err := yaml.Unmarshal([]byte(out), &cm); err != nil {
		t.Fatal(err)
	}
	conf := cm.Data["nginx.conf"]
	if conf == "" {
		t.Fatalf("no nginx.conf in the rendered ConfigMap:\n%s", out)
	}
	return conf
}

// upstream is a local HTTP server that answers with what it received.
func upstream(t *testing.T, name string, delay time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		fmt.Fprintf(w, "upstream=%s path=%s host=%s xfp=%s xff=%s team=%s", name, r.URL.RequestURI(), r.Host,
			r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Team"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func get(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

package dataplane

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/test/certs"
	"github.com/example/myproxy-operator/test/harness"
	"github.com/example/myproxy-operator/test/nginx"
)

type request struct {
	path       string
	wantStatus int
	wantBody   []string // substrings of the response body
}

func TestRouting(t *testing.T) {
	api := upstream(t, "api", 0)
	v2 := upstream(t, "v2", 0)
	static := upstream(t, "static", 0)
	slow := upstream(t, "slow", 3*time.Second)
	cases := []struct {
		name     string
		spec     map[string]any
		requests []request
	}{
		{
			name: "routes by path prefix, longest wins, upstream path replaces the prefix",
			spec: map[string]any{"routes": []any{
				map[string]any{"path": "/api/", "upstream": api},
				map[string]any{"path": "/api/v2/", "upstream": v2},
				map[string]any{"path": "/static/", "upstream": static + "/assets/"},
			}},
			requests: []request{
				{"/api/users?id=1", 200, []string{"upstream=api", "path=/api/users?id=1"}},
				{"/api/v2/users", 200, []string{"upstream=v2", "path=/api/v2/users"}},
				{"/static/app.css", 200, []string{"upstream=static", "path=/assets/app.css"}},
				{"/other", 404, []string{"no route for this path"}},
				{"/healthz", 200, []string{"ok"}},
			},
		},
		{
			name: "forwarding headers and configured headers reach the upstream",
			spec: map[string]any{"routes": []any{
				map[string]any{"path": "/", "upstream": api, "setHeaders": map[string]any{"X-Team": "edge"}},
			}},
			requests: []request{
				{"/anything", 200, []string{"upstream=api", "xfp=http", "xff=127.0.0.1", "team=edge"}},
			},
		},
		{
			name: "a $ in a header value or a body is sent as written, never read as an nginx variable",
			spec: map[string]any{
				"routes": []any{
					map[string]any{"path": "/api/", "upstream": api, "setHeaders": map[string]any{"X-Team": "$remote_addr ${host} $"}},
				},
				"defaultResponse": map[string]any{"body": "costs $5 at $host\n"},
			},
			requests: []request{
				{"/api/x", 200, []string{"team=$remote_addr ${host} $"}},
				{"/other", 404, []string{"costs $5 at $host"}},
			},
		},
		{
			name: "the default response is configurable",
			spec: map[string]any{"defaultResponse": map[string]any{"status": 418, "body": "teapot here\n"}},
			requests: []request{
				{"/", 418, []string{"teapot here"}},
				{"/healthz", 200, []string{"ok"}},
			},
		},
		{
			name: "a route timeout answers 504 instead of waiting for a slow upstream",
			spec: map[string]any{"routes": []any{
				map[string]any{"path": "/slow/", "upstream": slow, "timeoutSeconds": 1},
			}},
			requests: []request{{"/slow/x", 504, nil}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := nginx.Start(t, renderNginxConf(t, c.spec), nil)
			client := &http.Client{Timeout: 10 * time.Second}
			for _, r := range c.requests {
				status, body := get(t, client, "http://"+p.HTTPAddr+r.path)
				if status != r.wantStatus {
					t.Errorf("GET %s: status %d, want %d (body %q)", r.path, status, r.wantStatus, body)
				}
				for _, want := range r.wantBody {
					if !strings.Contains(body, want) {
						t.Errorf("GET %s: body %q lacks %q", r.path, body, want)
					}
				}
			}
		})
	}
}

func TestTLS(t *testing.T) {
	api := upstream(t, "api", 0)
	pair := certs.Valid(t, "edge.test.svc")
	conf := renderNginxConf(t, map[string]any{
		"tls":    map[string]any{"secretName": "edge-cert"},
		"routes": []any{map[string]any{"path": "/api/", "upstream": api}},
	})
	p := nginx.Start(t, conf, &pair)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pair.Pool()}}}
	status, body := get(t, client, "https://"+p.HTTPSAddr+"/api/x")
	if status != 200 || !strings.Contains(body, "upstream=api") || !strings.Contains(body, "xfp=https") {
		t.Errorf("HTTPS GET /api/x: %d %q, want the api upstream with X-Forwarded-Proto https", status, body)
	}
	if status, _ := get(t, client, "http://"+p.HTTPAddr+"/api/x"); status != 200 {
		t.Errorf("plain HTTP still served: status %d", status)
	}
}

// Every sample's configuration passes `nginx -t` and serves, with its upstream hosts pointed at
// local servers (nginx resolves upstream names when it starts).
func TestSamples(t *testing.T) {
	local := upstream(t, "local", 0)
	samples, _ := filepath.Glob(filepath.Join(harness.RepoRoot(), "config", "samples", "gateway_*.yaml"))
	for _, path := range samples {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var cr struct{ Spec map[string]any }
			if err := yaml.Unmarshal(raw, &cr); err != nil {
				t.Fatal(err)
			}
			routes, _ := cr.Spec["routes"].([]any)
			for _, r := range routes {
				route := r.(map[string]any)
				route["upstream"] = local
			}
			var pair *certs.Pair
			if tlsSpec, ok := cr.Spec["tls"].(map[string]any); ok && tlsSpec["secretName"] != "" {
				valid := certs.Valid(t, "edge.test.svc")
				pair = &valid
			}
			p := nginx.Start(t, renderNginxConf(t, cr.Spec), pair)
			if status, body := get(t, &http.Client{Timeout: 5 * time.Second}, "http://"+p.HTTPAddr+"/healthz"); status != 200 {
				t.Errorf("/healthz: %d %q", status, body)
			}
		})
	}
}

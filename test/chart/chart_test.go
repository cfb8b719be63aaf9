// Package chart tests helm-charts/myproxy on its own, with the real helm binary: lint, render,
// and agreement between values.yaml and values.schema.json.
package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/test/harness"
)

var chartDir = filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy")

func helm(t *testing.T, args ...string) string {
	t.Helper()
	return harness.Run(t, nil, harness.Tool(t, "HELM", "helm"), args...)
}

func TestLint(t *testing.T) {
	helm(t, "lint", "--strict", chartDir)
}

// renderSpec renders the chart for a MyProxy spec, as the operator passes it (spec = values).
func renderSpec(t *testing.T, name string, spec map[string]any) string {
	t.Helper()
	raw, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	values := harness.WriteTemp(t, "values-*.yaml", raw)
	return helm(t, "template", name, chartDir, "--namespace", "demo", "-f", values)
}

// Every sample renders, so the chart works standalone for each documented case.
func TestSamplesRender(t *testing.T) {
	samples, err := filepath.Glob(filepath.Join(harness.RepoRoot(), "config", "samples", "gateway_*.yaml"))
	if err != nil || len(samples) == 0 {
		t.Fatalf("no samples (%v)", err)
	}
	for _, path := range samples {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var cr struct {
				Metadata struct{ Name string }
				Spec     map[string]any
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(raw, &cr); err != nil {
				t.Fatal(err)
			}
			out := renderSpec(t, cr.Metadata.Name, cr.Spec)
			for _, kind := range []string{"kind: Deployment", "kind: Service", "kind: ConfigMap"} {
				if !strings.Contains(out, kind) {
					t.Errorf("rendering lacks %s", kind)
				}
			}
		})
	}
}

type schemaNode struct {
	Type        any                    `json:"type"`
	Description string                 `json:"description"`
	Default     any                    `json:"default"`
	Properties  map[string]*schemaNode `json:"properties"`
}

func loadSchema(t *testing.T) *schemaNode {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s schemaNode
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// values.yaml and values.schema.json describe the same values: every value has a schema with a
// description (kubectl explain shows it), and a default in the schema equals values.yaml's.
func TestSchemaDescribesEveryValue(t *testing.T) {
	var check func(path string, values map[string]any, schema *schemaNode)
	check = func(path string, values map[string]any, schema *schemaNode) {
		keys := make([]string, 0, len(values))
		for k := range values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child, ok := schema.Properties[k]
			if !ok {
				t.Errorf("%s%s is in values.yaml but not in values.schema.json", path, k)
				continue
			}
			if child.Description == "" {
				t.Errorf("%s%s has no description in values.schema.json", path, k)
			}
			if child.Default != nil && !reflect.DeepEqual(child.Default, values[k]) {
				t.Errorf("%s%s: schema default %v differs from values.yaml %v", path, k, child.Default, values[k])
			}
			if nested, ok := values[k].(map[string]any); ok && child.Properties != nil {
				check(path+k+".", nested, child)
			}
		}
		for k, child := range schema.Properties {
			if _, ok := values[k]; !ok && child.Default != nil {
				t.Errorf("%s%s has a schema default but no value in values.yaml", path, k)
			}
		}
	}
	check("", harness.ChartValues(t), loadSchema(t))
}

// The chart validates values against its schema, so a bad value fails before any object exists.
func TestSchemaRefusesBadValues(t *testing.T) {
	cases := []struct {
		set   []string
		field string
	}{
		{set: []string{"replicas=-1"}, field: "/replicas"},
		{set: []string{"service.port=70000"}, field: "/service/port"},
		{set: []string{"image=UPPER CASE"}, field: "/image"},
		{set: []string{"unknownField=true"}, field: "unknownField"},
		{set: []string{"routes[0].path=api/", "routes[0].upstream=http://a"}, field: "/routes/0/path"},
		{set: []string{"routes[0].path=/a", "routes[0].upstream=ftp://a"}, field: "/routes/0/upstream"},
		{set: []string{"routes[0].path=/a;", "routes[0].upstream=http://a"}, field: "/routes/0/path"},
		{set: []string{"routes[0].path=/a", "routes[0].upstream=http://a/$host"}, field: "/routes/0/upstream"},
	}
	for _, c := range cases {
		args := []string{"template", "x", chartDir}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		out, err := harness.RunErr(nil, harness.Tool(t, "HELM", "helm"), args...)
		if err == nil {
			t.Errorf("--set %v rendered; want a schema error", c.set)
			continue
		}
		if !strings.Contains(out, c.field) {
			t.Errorf("--set %v: error does not name %s:\n%s", c.set, c.field, out)
		}
	}
}

// Header names and values that nginx or YAML would misread are refused by the schema, and by
// the template when the schema is skipped (a second line of defence): the name that ends the
// directive to add a location serving the TLS key, and names and values carrying a YAML line
// break (CR, NEL, LS, PS) followed by a document.
func TestHeadersThatNginxOrYAMLWouldMisreadAreRefused(t *testing.T) {
	helmBin := harness.Tool(t, "HELM", "helm")
	hostile := []map[string]any{
		{`X-A "1"; } location /leak/ { alias /etc/nginx/tls/; autoindex on; } location /z { proxy_set_header X-B`: "v"},
		{"X-A\rapiVersion: apps/v1\rkind: Deployment": "v"},
		{"X-A\u0085kind: Deployment": "v"},
		{"X-A": "v\u2028kind: Deployment"},
		{"X-A": "v\u2029kind: Deployment"},
		{"X-A": "v\"; return 200 \"x"},
		{"$host": "v"},
		{strings.Repeat("X", 129): "v"},
	}
	for i, headers := range hostile {
		values := map[string]any{"routes": []any{map[string]any{"path": "/a/", "upstream": "http://a", "setHeaders": headers}}}
		raw, err := json.Marshal(values)
		if err != nil {
			t.Fatal(err)
		}
		// helm reads a values file as YAML, where a raw NEL is a line break: escaped, it reaches
		// the chart as the operator hands it a spec, a string holding the character.
		raw = []byte(strings.ReplaceAll(string(raw), "\u0085", `\u0085`))
		file := filepath.Join(t.TempDir(), "values.json")
		if err := os.WriteFile(file, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, extra := range [][]string{nil, {"--skip-schema-validation"}} {
			out, err := harness.RunErr(nil, helmBin, append([]string{"template", "x", chartDir, "-f", file}, extra...)...)
			if err == nil {
				t.Errorf("case %d %v: rendered; want an error:\n%s", i, extra, out)
			} else if !strings.Contains(out, "setHeaders") && !strings.Contains(out, "does not match pattern") && !strings.Contains(out, "propertyName") {
				t.Errorf("case %d %v: the error does not name the field:\n%s", i, extra, out)
			}
		}
	}
}

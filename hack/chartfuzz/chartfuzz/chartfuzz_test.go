package chartfuzz

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/example/myproxy-operator/internal/watchesfile"
)

// writeChart writes a chart with one ConfigMap template and a schema.
func writeChart(t *testing.T, template, schema string) string {
	t.Helper()
	return writeFiles(t, map[string]string{
		"values.yaml":              "message: hello\nlabels: {}\n",
		"values.schema.json":       schema,
		"templates/configmap.yaml": template,
	})
}

// writeFiles writes a chart of these files and a Chart.yaml.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["Chart.yaml"] = "apiVersion: v2\nname: c\nversion: 0.1.0\n"
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const openSchema = `{"type":"object","properties":{"message":{"type":"string"},` +
	`"labels":{"type":"object","additionalProperties":{"type":"string"}}}}`

// A template that writes a value into a block scalar, and a map key as a bare YAML key, is
// found out: a line break ends the scalar, and a key can start a new document.
func TestAnUnsafeChartIsFoundOut(t *testing.T) {
	chart := writeChart(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels:\n"+
		"    {{- range $k, $v := .Values.labels }}\n    {{ $k }}: {{ $v | quote }}\n    {{- end }}\n"+
		"data:\n  message: |\n    {{ .Values.message }}\n", openSchema)
	report, err := Run(chart, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if report.Admitted == 0 || len(report.Findings) == 0 {
		t.Fatalf("admitted %d of %d, %d findings: want the unsafe template found out", report.Admitted, report.Tried, len(report.Findings))
	}
	if unnamed := unnamed(report.Findings, ".message ", "(key)"); len(unnamed) > 0 {
		t.Errorf("no finding names %q (the message, the label key):\n%v", unnamed, report.Findings)
	}
}

// The same chart written safely (toJson, quoted keys) passes, and the schema's refusals are
// counted, not rendered.
func TestASafeChartPasses(t *testing.T) {
	chart := writeChart(t, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  labels: {{ .Values.labels | toJson }}\n"+
		"data:\n  message: {{ .Values.message | toJson }}\n",
		`{"type":"object","properties":{"message":{"type":"string"},"labels":{"type":"object",`+
			`"propertyNames":{"pattern":"^[a-z]+$"},"additionalProperties":{"type":"string"}}}}`)
	report, err := Run(chart, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Findings) != 0 {
		t.Errorf("findings on a safe chart:\n%v", report.Findings)
	}
	if report.Admitted == 0 || report.Admitted == report.Tried {
		t.Errorf("admitted %d of %d: want some admitted and the schema's refusals left out", report.Admitted, report.Tried)
	}
}

// A chart without a schema is fuzzed with the one its CRD infers, which takes a number's key as a
// string too: the strings it takes there render one scalar where a template prints the number
// bare. Served with an open spec, the same chart is found out: any string reaches the template.
func TestANumberWrittenAsAStringRendersOneScalar(t *testing.T) {
	files := func(kind string) map[string]string {
		f := map[string]string{
			"values.yaml":              "port: 80\nratio: 0.5\n",
			"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  port: {{ .Values.port }}\n  ratio: {{ .Values.ratio }}\n",
		}
		if kind != "" {
			f["kind.yaml"] = kind
		}
		return f
	}
	inferred, err := Run(writeFiles(t, files("")), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(inferred.Findings) != 0 || inferred.Admitted <= 1 || inferred.Admitted == inferred.Tried {
		t.Errorf("inferred: admitted %d of %d, findings %v: want some strings admitted, the rest refused, nothing broken",
			inferred.Admitted, inferred.Tried, inferred.Findings)
	}
	open, err := Run(writeFiles(t, files("specSchema: open\n")), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if unnamed := unnamed(open.Findings, ".port ", ".ratio "); len(unnamed) > 0 {
		t.Errorf("open spec: no finding names %q:\n%v", unnamed, open.Findings)
	}
}

// unnamed returns the parts that no finding's mutation names.
func unnamed(findings []Finding, parts ...string) []string {
	return slices.DeleteFunc(parts, func(p string) bool {
		return slices.ContainsFunc(findings, func(f Finding) bool { return strings.Contains(f.Mutation, p) })
	})
}

// Every chart this repository serves, and the second-kind example, renders harmlessly with
// every hostile value its schema admits.
func TestTheRepositorysChartsPass(t *testing.T) {
	t.Chdir(filepath.Join("..", "..", "..")) // watches.yaml names charts from the repository root
	root := "."
	ws, err := watchesfile.Load("watches.yaml")
	if err != nil {
		t.Fatal(err)
	}
	charts := []string{filepath.Join(root, "examples", "staticsite")}
	for _, w := range ws {
		charts = append(charts, filepath.Join(root, w.ChartPath))
	}
	for _, chart := range charts {
		report, err := Run(chart, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", chart, err)
		}
		if report.Admitted == 0 {
			t.Errorf("%s: nothing admitted of %d tries", chart, report.Tried)
		}
		for _, f := range report.Findings {
			t.Errorf("%s: %s", chart, f)
		}
		t.Logf("%s: %d tried, %d admitted", chart, report.Tried, report.Admitted)
	}
}

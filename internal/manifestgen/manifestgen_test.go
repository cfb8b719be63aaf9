package manifestgen

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"sigs.k8s.io/yaml"
)

func inRepo(t *testing.T) {
	t.Helper()
	t.Chdir(filepath.Join("..", ".."))
}

// What `make manifests` writes is committed: a change of a chart, its kind.yaml or watches.yaml
// without regenerating fails here.
func TestCommittedManifestsAreUpToDate(t *testing.T) {
	inRepo(t)
	files, err := Generate("watches.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join("config", path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("config/%s is out of date: run `make manifests` and commit the result", path)
		}
	}
}

// Every generated CRD passes the apiserver's own validation of CRDs (structural schema, scale
// paths, CEL rules, printer columns).
func TestGeneratedCRDsAreValid(t *testing.T) {
	inRepo(t)
	files, err := Generate("watches.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crds := 0
	for path, raw := range files {
		if !strings.HasPrefix(path, CRDDir) {
			continue
		}
		crds++
		var v1 apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &v1); err != nil {
			t.Fatal(err)
		}
		var internal apiextensions.CustomResourceDefinition
		if err := apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, &internal, nil); err != nil {
			t.Fatal(err)
		}
		internal.Status.StoredVersions = []string{internal.Spec.Versions[0].Name} // the apiserver records it
		if errs := validation.ValidateCustomResourceDefinition(context.Background(), &internal); len(errs) > 0 {
			t.Errorf("%s: %v", path, errs.ToAggregate())
		}
	}
	if crds == 0 {
		t.Fatal("no CRD generated")
	}
}

// A watches file naming a chart whose kind.yaml does not compile fails with the file and line.
func TestABadDeclarationStopsTheGeneration(t *testing.T) {
	dir := t.TempDir()
	chart := filepath.Join(dir, "chart")
	if err := os.MkdirAll(filepath.Join(chart, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(chart, "Chart.yaml"), "apiVersion: v2\nname: c\nversion: 0.1.0\n")
	write(filepath.Join(chart, "values.schema.json"), `{"type":"object"}`)
	write(filepath.Join(chart, "templates", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n")
	write(filepath.Join(chart, "kind.yaml"), "status:\n  fields:\n    n:\n      type: string\n      expression: objects.size(\n")
	watches := filepath.Join(dir, "watches.yaml")
	write(watches, "- group: example.com\n  version: v1\n  kind: Thing\n  chart: "+chart+"\n")
	_, err := Generate(watches)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(chart, "kind.yaml")+":5: status.fields.n") {
		t.Fatalf("error %v, want one naming kind.yaml:5", err)
	}
	// Without kind.yaml the same chart is a kind with defaults: a Ready condition, default names.
	if err := os.Remove(filepath.Join(chart, "kind.yaml")); err != nil {
		t.Fatal(err)
	}
	files, err := Generate(watches)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files[filepath.Join(CRDDir, "example.com_things.yaml")]; !ok {
		t.Errorf("no CRD for Thing among %d files", len(files))
	}
	if role := string(files[ManagerRole]); !strings.Contains(role, "resources: [things]") || !strings.Contains(role, "resources: [configmaps]") {
		t.Errorf("role lacks things or configmaps:\n%s", role)
	}
}

package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/example/myproxy-operator/test/harness"
)

// dist/chart is what `make operator-chart` generates from config/default today, and lints clean.
func TestOperatorChartInSync(t *testing.T) {
	out := filepath.Join(t.TempDir(), "chart")
	harness.Run(t, []string{"OUT=" + out}, "bash", "-c",
		`make -s --no-print-directory render-default | go run ./hack/operatorchart --out "$OUT" `+
			`--version "$(make -s --no-print-directory print-VERSION)" --image "$(make -s --no-print-directory print-IMAGE_REPO)"`)
	committed := filepath.Join(harness.RepoRoot(), "dist", "chart")
	seen := 0
	err := filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		seen++
		rel, _ := filepath.Rel(out, path)
		want, _ := os.ReadFile(path)
		got, readErr := os.ReadFile(filepath.Join(committed, rel))
		if readErr != nil || string(got) != string(want) {
			t.Errorf("dist/chart/%s is out of date with config/: run make operator-chart and commit it", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var committedFiles int
	_ = filepath.WalkDir(committed, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			committedFiles++
		}
		return nil
	})
	if committedFiles != seen {
		t.Errorf("dist/chart has %d files, make operator-chart generates %d", committedFiles, seen)
	}
	harness.Run(t, nil, harness.Tool(t, "HELM", "helm"), "lint", "--strict", committed)
}

// A sharded fleet deployed with kustomize (make render-default SHARDS=a,b, what make deploy
// applies) and with the operator chart (shards: [a, b]) runs the same manager Deployments:
// the default shard's and one per named shard, with the same names, Pod labels, selectors,
// flags and Pod spec; no two of them select the same Pods.
func TestShardedDeploymentsAgree(t *testing.T) {
	kustomized := deploymentsIn(t, harness.Run(t, nil, "make", "-s", "--no-print-directory", "render-default", "SHARDS=a,b"))
	charted := deploymentsIn(t, harness.Run(t, nil, harness.Tool(t, "HELM", "helm"), "template", "myproxy-operator",
		filepath.Join(harness.RepoRoot(), "dist", "chart"), "-n", "myproxy-operator-system", "--set", "shards={a,b}"))
	if len(kustomized) != 3 {
		t.Fatalf("kustomize renders %d manager Deployments, want 3", len(kustomized))
	}
	selectors := map[string]string{}
	for name, k := range kustomized {
		c, ok := charted[name]
		if !ok {
			t.Errorf("the chart has no Deployment %s", name)
			continue
		}
		// What the chart templates on purpose: who manages it, and WATCH_NAMESPACE (a value).
		for _, d := range []map[string]any{k, c} {
			delete(d["metadata"].(map[string]any)["labels"].(map[string]any), "app.kubernetes.io/managed-by")
			ctr := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			var env []any
			for _, e := range ctr["env"].([]any) {
				if e.(map[string]any)["name"] != "WATCH_NAMESPACE" {
					env = append(env, e)
				}
			}
			ctr["env"] = env
		}
		if !reflect.DeepEqual(k, c) {
			kj, _ := json.MarshalIndent(k, "", " ")
			cj, _ := json.MarshalIndent(c, "", " ")
			t.Errorf("Deployment %s differs:\nkustomize: %s\nchart: %s", name, kj, cj)
		}
		sel, _ := json.Marshal(k["spec"].(map[string]any)["selector"])
		if other, taken := selectors[string(sel)]; taken {
			t.Errorf("%s and %s select the same Pods: %s", name, other, sel)
		}
		selectors[string(sel)] = name
	}
	if len(charted) != len(kustomized) {
		t.Errorf("the chart renders %d manager Deployments, kustomize %d", len(charted), len(kustomized))
	}
}

// deploymentsIn returns the Deployments of a multi-document YAML stream, by name.
func deploymentsIn(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, obj := range decodeAll(t, stream) {
		if obj.GetKind() == "Deployment" {
			out[obj.GetName()] = obj.Object
		}
	}
	return out
}

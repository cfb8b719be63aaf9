package manifests

import (
	"os"
	"path/filepath"
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

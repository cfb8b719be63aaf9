package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CopyProject copies the project's tracked files, as they are in the work tree, into a new
// directory: a checkout to change as a chart author would.
func CopyProject(t testing.TB) string {
	t.Helper()
	root := RepoRoot()
	dir := t.TempDir()
	out, err := exec.Command("git", "-C", root, "ls-files").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, rel := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		raw, err := os.ReadFile(filepath.Join(root, rel))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rel), raw, info.Mode()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// EditFile replaces, in the file at path, each old string of pairs (old, new, ...) with its new
// one, failing unless old is there.
func EditFile(t testing.TB, path string, pairs ...string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for i := 0; i < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("%s holds no %q", path, pairs[i])
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// RenameReplicas renames the MyProxy chart's replicas value replicaCount in the project, as a
// chart author would: values.yaml, values.schema.json, the Deployment template and kind.yaml.
func RenameReplicas(t testing.TB, project string) {
	t.Helper()
	chart := filepath.Join(project, "helm-charts", "myproxy")
	EditFile(t, filepath.Join(chart, "values.yaml"), "\nreplicas: 1", "\nreplicaCount: 1")
	EditFile(t, filepath.Join(chart, "values.schema.json"), `"replicas": {`, `"replicaCount": {`)
	EditFile(t, filepath.Join(chart, "templates", "deployment.yaml"), ".Values.replicas", ".Values.replicaCount")
	EditFile(t, filepath.Join(chart, "kind.yaml"), "jsonPath: .spec.replicas", "jsonPath: .spec.replicaCount",
		"specReplicasPath: .spec.replicas", "specReplicasPath: .spec.replicaCount")
}

// DeclareReplicasRenamed declares, in the project renamed by RenameReplicas, the rename as a new
// version of MyProxy: v1beta1, which watches.yaml watches, and v1alpha1 before it, whose replicas
// moves to replicaCount.
func DeclareReplicasRenamed(t testing.TB, project string) {
	t.Helper()
	EditFile(t, filepath.Join(project, "watches.yaml"), "version: v1alpha1", "version: v1beta1")
	f, err := os.OpenFile(filepath.Join(project, "helm-charts", "myproxy", "kind.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("versions:\n  - name: v1beta1\n  - name: v1alpha1\n    changes:\n" +
		"      - move: {from: replicas, to: replicaCount}\n"); err != nil {
		t.Fatal(err)
	}
}

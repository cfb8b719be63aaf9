package integration

import (
	"bufio"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/example/myproxy-operator/test/harness"
)

// modulePath is this module's import path, which coverage names its files by.
const modulePath = "github.com/example/myproxy-operator/"

// The walk-throughs of docs/architecture.md name, file by file, what one install and one upgrade
// of a MyProxy run through once the Helm reconciler's reconcile begins: the files the operator's
// code runs in for that reconcile, as coverage counts them (test/installpath, built with the
// coverage of the operator's packages, calls the reconciler the operator sets up).
func TestTheArchitectureNamesTheFilesOfOneInstallAndOneUpgrade(t *testing.T) {
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	dir := t.TempDir()
	// The main package is covered too: only then does it set the coverage runtime up.
	build := exec.Command("go", "build", "-cover", "-covermode=atomic", "-coverpkg="+modulePath+"internal/...,"+modulePath+"test/installpath",
		"-o", filepath.Join(dir, "installpath"), "./test/installpath")
	build.Dir = harness.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building test/installpath with coverage: %v\n%s", err, out)
	}
	harness.Run(t, []string{"GOCOVERDIR=" + dir, "KUBECONFIG=" + kubeconfig}, filepath.Join(dir, "installpath"), "-namespace", ns,
		"-watches-file", harness.WriteWatches(t, harness.Watch{}), "-out", dir)

	for _, walk := range []struct{ section, dir string }{
		{"One install, top to bottom", "install"}, {"One upgrade, top to bottom", "upgrade"},
	} {
		ran, named := ranIn(t, filepath.Join(dir, walk.dir)), namedIn(t, walk.section)
		if !slices.Equal(named, ran) {
			t.Errorf("docs/architecture.md, %q, names %d files; the reconcile ran in %d:\nnamed, did not run: %v\nran, not named: %v",
				walk.section, len(named), len(ran), minus(named, ran), minus(ran, named))
		}
		packages := map[string]bool{}
		for _, f := range ran {
			packages[filepath.Dir(f)] = true
		}
		t.Logf("%s: %d files in %d packages: %v", walk.section, len(ran), len(packages), ran)
		if walk.dir == "install" && (len(ran) > 20 || len(packages) > 8) {
			t.Errorf("one install runs in %d files of %d packages, more than 20 files in 8 packages", len(ran), len(packages))
		}
	}
}

// ranIn returns the files of this module (repository paths, sorted) whose code ran, as the
// coverage data in dir counts it.
func ranIn(t *testing.T, dir string) []string {
	t.Helper()
	text := filepath.Join(t.TempDir(), "coverage.txt")
	if out, err := exec.Command("go", "tool", "covdata", "textfmt", "-i="+dir, "-o="+text).CombinedOutput(); err != nil {
		t.Fatalf("go tool covdata: %v\n%s", err, out)
	}
	f, err := os.Open(text)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ran := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() { // mode: atomic, then file:start,end statements count
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[2] == "0" || !strings.HasPrefix(fields[0], modulePath+"internal/") {
			continue
		}
		file, _, _ := strings.Cut(strings.TrimPrefix(fields[0], modulePath), ":")
		ran[file] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(ran))
}

// namedIn returns the files of this module that the section of docs/architecture.md names, sorted.
func namedIn(t *testing.T, section string) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, found := strings.Cut(string(doc), "\n## "+section+"\n")
	if !found {
		t.Fatalf("docs/architecture.md has no section %q", section)
	}
	body, _, _ = strings.Cut(body, "\n## ")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`((?:internal|cmd)/[a-z/]+\\.go)`").FindAllStringSubmatch(body, -1) {
		named[m[1]] = true
	}
	return slices.Sorted(maps.Keys(named))
}

func minus(a, b []string) []string {
	return slices.DeleteFunc(slices.Clone(a), func(s string) bool { return slices.Contains(b, s) })
}

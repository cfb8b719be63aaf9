package manifests

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/test/harness"
)

// Without a container engine, this checks the Dockerfile itself: pinned base images, COPY
// sources that exist and are not excluded, and a final stage whose entrypoint, working directory
// and user match what the binary reads. test/publish builds the image it describes.
func TestDockerfile(t *testing.T) {
	steps := harness.Dockerfile(t, filepath.Join(harness.RepoRoot(), "Dockerfile"))
	ignored := dockerignored(t)
	var workdir, entrypoint, user string
	copied := map[string]string{} // destination (absolute) -> source
	stages := 0
	for _, s := range steps {
		if s.Op == "FROM" {
			stages++
		}
	}
	// A version tag with a patch number, a digest, or scratch (which is no image at all).
	pinned := regexp.MustCompile(`^(scratch|\S+:\d+\.\d+\.\d+\S*|\S+@sha256:[a-f0-9]{64})( AS \w+)?$`)
	final, stage := false, 0
	for _, s := range steps {
		switch s.Op {
		case "FROM":
			stage++
			final = stage == stages
			if !pinned.MatchString(s.Args) {
				t.Errorf("FROM %s: base image not pinned to a patch version or digest", s.Args)
			}
			workdir = "/"
		case "WORKDIR":
			workdir = path.Join(workdir, s.Args)
		case "COPY":
			fields := strings.Fields(s.Args)
			fromStage := strings.HasPrefix(fields[0], "--from=")
			if fromStage {
				fields = fields[1:]
			}
			dst := fields[len(fields)-1]
			if !path.IsAbs(dst) {
				dst = path.Join(workdir, dst)
			}
			for _, src := range fields[:len(fields)-1] {
				if !fromStage {
					if _, err := os.Stat(filepath.Join(harness.RepoRoot(), src)); err != nil {
						t.Errorf("COPY %s: source missing", src)
					}
					if ignored(src) {
						t.Errorf("COPY %s: excluded by .dockerignore", src)
					}
				}
				if final {
					copied[dst] = src
				}
			}
		case "ENTRYPOINT":
			entrypoint = s.Args
		case "USER":
			if final {
				user = s.Args
			}
		}
	}
	if user == "" || strings.HasPrefix(user, "0") || user == "root" {
		t.Errorf("final stage runs as %q, want a non-root numeric UID", user)
	}
	if !regexp.MustCompile(`^\d+(:\d+)?$`).MatchString(user) {
		t.Errorf("USER %q: use a numeric UID so runAsNonRoot can verify it", user)
	}
	binary := strings.Trim(strings.Split(strings.Trim(entrypoint, "[]"), ",")[0], `" `)
	if _, ok := copied[binary]; !ok {
		t.Errorf("ENTRYPOINT %s is not a file the final stage copies (%v)", binary, copied)
	}
	// The binary reads ./watches.yaml (its --watches-file default) from the working directory,
	// and watches.yaml names chart folders relative to it.
	if _, ok := copied[path.Join(workdir, "watches.yaml")]; !ok {
		t.Errorf("watches.yaml is not copied into the working directory %s", workdir)
	}
	var ws []struct{ Chart string }
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &ws); err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		chartDir := path.Join(workdir, w.Chart)
		found := false
		for dst := range copied {
			if strings.HasPrefix(chartDir+"/", strings.TrimSuffix(dst, "/")+"/") {
				found = true
			}
		}
		if !found {
			t.Errorf("chart %s (watches.yaml) is not copied to %s", w.Chart, chartDir)
		}
	}
}

// dockerignored returns whether .dockerignore keeps a path out of the build context (the
// "ignore everything, then allow" form this repository uses).
func dockerignored(t *testing.T) func(string) bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			rules = append(rules, l)
		}
	}
	return func(p string) bool {
		p = strings.TrimSuffix(p, "/")
		excluded := false
		for _, r := range rules {
			allow := strings.HasPrefix(r, "!")
			pattern := strings.TrimSuffix(strings.TrimPrefix(r, "!"), "/")
			if ok, _ := path.Match(pattern, p); ok || pattern == "*" || strings.HasPrefix(p, pattern+"/") {
				excluded = !allow
			}
		}
		return excluded
	}
}

package publish

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/myproxy-operator/test/harness"
)

// make image in two clean clones of the commit gives one digest, and so do make bundle-build
// and make catalog-build; the operator image is what the Dockerfile describes: the same files
// from the same sources, the binary static, the entrypoint, working directory, user (not root)
// and labels of its final stage; the bundle image has the labels OLM reads.
func TestImageIsReproducibleAndWhatTheDockerfileSays(t *testing.T) {
	targets := [][]string{{"image"}, {"bundle-build"}, {"catalog", "catalog-build"}}
	digests := map[string][]string{}
	var clone string
	for i := 0; i < 2; i++ {
		clone = filepath.Join(t.TempDir(), "clone")
		harness.Run(t, nil, "git", "clone", "-q", "--depth=1", "file://"+harness.RepoRoot(), clone)
		for _, target := range targets {
			out := harness.Run(t, nil, "make", append([]string{"-s", "--no-print-directory", "-C", clone, "OCI=" + oci(t)}, target...)...)
			name := target[len(target)-1]
			digests[name] = append(digests[name], printed(out))
		}
	}
	for name, d := range digests {
		if d[0] != d[1] || !strings.HasPrefix(d[0], "sha256:") {
			t.Errorf("make %s in two clones of one commit printed %q and %q", name, d[0], d[1])
		}
	}
	bundle := inspect(t, filepath.Join(clone, "bin", "images", "bundle")).Config.Config
	if got, want := mustJSON(t, bundle.Labels), mustJSON(t, finalStage(t, filepath.Join(clone, "bundle.Dockerfile"), nil).labels); got != want {
		t.Errorf("bundle image labels %s, bundle.Dockerfile's %s", got, want)
	}
	layout := filepath.Join(clone, "bin", "images", "operator")
	img := inspect(t, layout)
	if img.Digest != digests["image"][0] {
		t.Errorf("bin/images/operator holds %s, make image printed %s", img.Digest, digests["image"][0])
	}
	version := strings.TrimSpace(harness.Run(t, nil, "make", "-s", "--no-print-directory", "-C", clone, "print-VERSION"))

	want := finalStage(t, filepath.Join(clone, "Dockerfile"), map[string]string{"VERSION": version})
	cfg := img.Config.Config
	if cfg.User != want.user || strings.HasPrefix(cfg.User, "0") || cfg.User == "" {
		t.Errorf("image user %q, Dockerfile USER %q (and not root)", cfg.User, want.user)
	}
	if got := mustJSON(t, cfg.Entrypoint); got != want.entrypoint {
		t.Errorf("image entrypoint %s, Dockerfile ENTRYPOINT %s", got, want.entrypoint)
	}
	if cfg.WorkingDir != want.workdir {
		t.Errorf("image working directory %q, Dockerfile WORKDIR %q", cfg.WorkingDir, want.workdir)
	}
	if got := mustJSON(t, cfg.Labels); got != mustJSON(t, want.labels) {
		t.Errorf("image labels %s, Dockerfile LABEL %s", got, mustJSON(t, want.labels))
	}
	if cfg.Labels["org.opencontainers.image.version"] != version {
		t.Errorf("the version label is %q, want %q", cfg.Labels["org.opencontainers.image.version"], version)
	}

	// Files: every regular file of the image comes from a COPY of the final stage, with the
	// bytes of its source; every source file is there.
	root := export(t, layout)
	inImage := map[string]bool{}
	for _, l := range img.Layers {
		for _, f := range l.Files {
			if f.UID != 0 || f.GID != 0 {
				t.Errorf("%s is owned by %d:%d, want root", f.Path, f.UID, f.GID)
			}
			if strings.HasPrefix(f.Mode, "-") {
				inImage[f.Path] = true
			}
		}
	}
	copied := want.files(t, clone)
	t.Logf("%s: %d files, each from a COPY of the Dockerfile", img.Digest, len(copied))
	for dest, src := range copied {
		if !inImage[dest] {
			t.Errorf("%s (COPY %s) is not in the image", dest, src)
			continue
		}
		delete(inImage, dest)
		if src == "" {
			continue // built by the Dockerfile's builder stage
		}
		fromRepo, err := os.ReadFile(src)
		must(t, err)
		fromImage, err := os.ReadFile(filepath.Join(root, dest))
		must(t, err)
		if !bytes.Equal(fromRepo, fromImage) {
			t.Errorf("%s differs from %s", dest, src)
		}
	}
	for extra := range inImage {
		t.Errorf("%s is in the image, but no COPY of the Dockerfile puts it there", extra)
	}
	for _, name := range []string{"watches.yaml", "helm-charts/myproxy/Chart.yaml"} {
		if _, err := os.Stat(filepath.Join(root, want.workdir, name)); err != nil {
			t.Errorf("%s is not in the working directory %s: %v", name, want.workdir, err)
		}
	}
	bin, err := elf.Open(filepath.Join(root, cfg.Entrypoint[0]))
	if err != nil {
		t.Fatalf("the entrypoint %s: %v", cfg.Entrypoint[0], err)
	}
	defer bin.Close()
	for _, p := range bin.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the entrypoint %s is dynamically linked: an image from scratch has no libc", cfg.Entrypoint[0])
		}
	}
}

// stageFacts is what the final stage of a Dockerfile says of its image.
type stageFacts struct {
	user, entrypoint, workdir string
	labels                    map[string]string
	copies                    [][2]string // source (context path, or "stage:path"), destination
}

// finalStage reads the final stage of a Dockerfile, with args for its ARGs.
func finalStage(t *testing.T, file string, args map[string]string) stageFacts {
	t.Helper()
	var s stageFacts
	expand := func(v string) string { return os.Expand(v, func(k string) string { return args[k] }) }
	for _, in := range harness.Dockerfile(t, file) {
		switch in.Op {
		case "FROM":
			s = stageFacts{workdir: "/", labels: map[string]string{}}
		case "WORKDIR":
			s.workdir = path.Join(s.workdir, in.Args)
		case "USER":
			s.user = in.Args
		case "ENTRYPOINT":
			s.entrypoint = in.Args
		case "LABEL":
			for _, kv := range splitQuoted(expand(in.Args)) {
				k, v, _ := strings.Cut(kv, "=")
				s.labels[k] = v
			}
		case "COPY":
			f := strings.Fields(in.Args)
			from := ""
			if strings.HasPrefix(f[0], "--from=") {
				from, f = strings.TrimPrefix(f[0], "--from=")+":", f[1:]
			}
			dest := f[len(f)-1]
			if !path.IsAbs(dest) {
				dest = path.Join(s.workdir, dest)
			}
			for _, src := range f[:len(f)-1] {
				s.copies = append(s.copies, [2]string{from + src, dest})
			}
		}
	}
	var argv []string
	if s.entrypoint != "" {
		must(t, json.Unmarshal([]byte(s.entrypoint), &argv))
	}
	s.entrypoint = mustJSON(t, argv)
	return s
}

// files maps each file the final stage's COPYs put in the image to its source in the clone
// ("" for a file of a builder stage).
func (s stageFacts) files(t *testing.T, clone string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range s.copies {
		src, dest := c[0], c[1]
		if strings.Contains(src, ":") {
			out[dest] = ""
			continue
		}
		top := filepath.Join(clone, src)
		info, err := os.Stat(top)
		must(t, err)
		if !info.IsDir() {
			out[dest] = top
			continue
		}
		must(t, filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(top, p)
			out[path.Join(dest, filepath.ToSlash(rel))] = p
			return nil
		}))
	}
	return out
}

// splitQuoted splits LABEL's key="value with spaces" pairs.
func splitQuoted(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	must(t, err)
	return string(raw)
}

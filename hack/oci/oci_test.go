package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestWordsSplitsAsAShellWouldOrRefuses(t *testing.T) {
	got, err := words(`CGO_ENABLED=0 go build -ldflags="-s -w" -o 'my bin' ./cmd`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CGO_ENABLED=0", "go", "build", "-ldflags=-s -w", "-o", "my bin", "./cmd"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("words = %q, want %q", got, want)
	}
	for _, shell := range []string{"go build && rm -rf /", "go build | tee x", "echo $HOME", `echo "$HOME"`, "ls *.go"} {
		if _, err := words(shell); err == nil {
			t.Errorf("%q: split, though only a shell runs it as written", shell)
		}
	}
}

func TestDockerignoreAllowsWhatItNamesAfterExcludingAll(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, ".dockerignore"), "# only the sources\n*\n!cmd/\n!go.mod\ncmd/secret\n")
	c, err := openContext(dir, filepath.Join(dir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for path, excluded := range map[string]bool{
		"go.mod": false, "cmd": false, "cmd/main.go": false, "cmd/secret": true, "go.sum": true, "bin/tool": true,
	} {
		if got := c.excluded(path); got != excluded {
			t.Errorf("excluded(%s) = %v, want %v", path, got, excluded)
		}
	}
	// <Dockerfile>.dockerignore, beside the Dockerfile, wins over the context's.
	write(t, filepath.Join(dir, "other.Dockerfile.dockerignore"), "*\n!go.sum\n")
	c, err = openContext(dir, filepath.Join(dir, "other.Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if c.excluded("go.sum") || !c.excluded("go.mod") {
		t.Error("other.Dockerfile.dockerignore is not the one read for other.Dockerfile")
	}
}

// Two builds of the same files give one digest, whatever their modes' non-executable bits and
// times on disk; the layers hold exactly the copied files; what cannot run without a container
// engine is refused.
func TestBuildIsReproducibleAndHoldsWhatIsCopied(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "Dockerfile"), `FROM scratch
ARG VERSION
LABEL org.opencontainers.image.version="${VERSION}" \
      title="a b"
WORKDIR /app
COPY conf/ conf/
COPY tool /usr/bin/tool
USER 65532:65532
ENTRYPOINT ["/usr/bin/tool"]
`)
	write(t, filepath.Join(dir, ".dockerignore"), "conf/skip\n")
	write(t, filepath.Join(dir, "conf", "a.yaml"), "a: 1\n")
	write(t, filepath.Join(dir, "conf", "skip"), "no\n")
	write(t, filepath.Join(dir, "tool"), "#!/bin/true\n")
	if err := os.Chmod(filepath.Join(dir, "tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := buildOptions{context: dir, buildArgs: map[string]string{"VERSION": "1.2.3"},
		platform: v1.Platform{OS: "linux", Architecture: "amd64"}, created: time.Unix(0, 0).UTC(), goVersion: "go0"}
	first := digestOf(t, dir, opts)
	if err := os.Chmod(filepath.Join(dir, "conf", "a.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(dir, "tool"), time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if second := digestOf(t, dir, opts); second != first {
		t.Errorf("a second build gives %s, the first %s", second, first)
	}

	img, err := build(filepath.Join(dir, "Dockerfile"), opts)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || !reflect.DeepEqual(cf.Config.Entrypoint, []string{"/usr/bin/tool"}) || cf.Config.WorkingDir != "/app" ||
		cf.Config.Labels["org.opencontainers.image.version"] != "1.2.3" || cf.Config.Labels["title"] != "a b" {
		t.Errorf("config %+v", cf.Config)
	}
	files := map[string]int64{}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if hdr.Typeflag == tar.TypeReg {
				files[hdr.Name] = hdr.Mode
			}
		}
		rc.Close()
	}
	if want := map[string]int64{"app/conf/a.yaml": 0o644, "usr/bin/tool": 0o755}; !reflect.DeepEqual(files, want) {
		t.Errorf("layers hold %v, want %v", files, want)
	}

	for instruction, why := range map[string]string{
		"FROM scratch\nRUN true\n":              "runs nothing",
		"FROM alpine:3.20.0\n":                  "only scratch and golang",
		"FROM scratch\nCOPY --chown=1 tool /\n": "--chown",
		"FROM golang:1.0.0 AS b\n":              "builds with Go 1.0.0",
	} {
		write(t, filepath.Join(dir, "Dockerfile"), instruction)
		if _, err := build(filepath.Join(dir, "Dockerfile"), buildOptions{context: dir, goVersion: "go0"}); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: error %v, want one saying %q", instruction, err, why)
		}
	}
}

func digestOf(t *testing.T, dir string, opts buildOptions) v1.Hash {
	t.Helper()
	img, err := build(filepath.Join(dir, "Dockerfile"), opts)
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

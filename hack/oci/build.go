package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// defaultPath is the PATH a container engine gives an image that sets none.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// buildOptions are what a build reads besides the Dockerfile.
type buildOptions struct {
	context   string
	buildArgs map[string]string
	platform  v1.Platform
	// created is the time of the image, its history and every file in its layers: the same
	// inputs then give the same digest.
	created time.Time
	// goVersion is the version of the go command builds run with (go1.X.Y).
	goVersion string
}

// stage is one FROM section. A golang stage has files on disk, where its go commands run; the
// final stage, from scratch, becomes the image: each COPY one layer.
type stage struct {
	name    string
	golang  bool
	root    string // a golang stage's files
	workdir string
	args    map[string]string
	env     []string
	adds    []mutate.Addendum
	config  v1.Config
}

// build runs the Dockerfile's instructions and returns the image of its last stage.
func build(dockerfile string, opts buildOptions) (v1.Image, error) {
	instructions, err := parseDockerfile(dockerfile)
	if err != nil {
		return nil, err
	}
	ctx, err := openContext(opts.context, dockerfile)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "oci-build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	used := map[string]bool{}
	var stages []*stage
	var cur *stage
	for _, in := range instructions {
		if in.op == "FROM" {
			if cur, err = from(in, opts, tmp, len(stages)); err != nil {
				return nil, err
			}
			stages = append(stages, cur)
			continue
		}
		if cur == nil {
			if in.op == "ARG" { // an ARG before FROM serves FROM lines only, which name no variable here
				continue
			}
			return nil, fmt.Errorf("%s: before the first FROM", in)
		}
		if err := cur.run(in, opts, ctx, stages, used); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", dockerfile, in, err)
		}
	}
	for name := range opts.buildArgs {
		if !used[name] {
			return nil, fmt.Errorf("%s: declares no ARG %s", dockerfile, name)
		}
	}
	if cur == nil || cur.golang {
		return nil, fmt.Errorf("%s: the last stage must be FROM scratch: it is the image", dockerfile)
	}
	return cur.image(opts)
}

var golangImage = regexp.MustCompile(`^(docker\.io/)?(library/)?golang:(\d+\.\d+\.\d+)(-\S+)?$`)

// from starts a stage. Only two bases are known: scratch (no files), and the Go toolchain's
// image at the version this build runs, whose one use is to run go commands.
func from(in instruction, opts buildOptions, tmp string, n int) (*stage, error) {
	f := strings.Fields(in.args)
	s := &stage{workdir: "/", args: map[string]string{}}
	if len(f) == 3 && strings.EqualFold(f[1], "AS") {
		s.name = f[2]
	} else if len(f) != 1 {
		return nil, fmt.Errorf("%s: expected FROM image [AS name]", in)
	}
	switch m := golangImage.FindStringSubmatch(f[0]); {
	case f[0] == "scratch":
		s.env = []string{defaultPath}
	case m != nil:
		if "go"+m[3] != opts.goVersion {
			return nil, fmt.Errorf("%s: the Dockerfile builds with Go %s, this build runs %s (hack/toolchain.env)", in, m[3], opts.goVersion)
		}
		s.golang = true
		s.root = filepath.Join(tmp, fmt.Sprintf("stage-%d", n))
		if err := os.MkdirAll(s.root, 0o755); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%s: base image %s: only scratch and golang:<the pinned Go version> can be built without a container engine", in, f[0])
	}
	return s, nil
}

// expand substitutes the stage's ARG and ENV values for $NAME and ${NAME}, as the Dockerfile
// frontend does in WORKDIR, COPY, USER, LABEL and ENV.
func (s *stage) expand(text string) string {
	return os.Expand(text, func(name string) string {
		for i := len(s.env) - 1; i >= 0; i-- {
			if k, v, _ := strings.Cut(s.env[i], "="); k == name {
				return v
			}
		}
		return s.args[name]
	})
}

func (s *stage) abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(s.workdir, p)
}

func (s *stage) run(in instruction, opts buildOptions, ctx *buildContext, stages []*stage, used map[string]bool) error {
	for flag := range in.flags {
		if in.op != "COPY" || flag != "from" {
			return fmt.Errorf("flag --%s is not supported", flag)
		}
	}
	metadata := true
	switch in.op {
	case "ARG":
		metadata = false
		name, def, _ := strings.Cut(in.args, "=")
		if v, ok := opts.buildArgs[name]; ok {
			def, used[name] = v, true
		}
		s.args[name] = def
	case "WORKDIR":
		s.workdir = s.abs(s.expand(in.args))
		s.config.WorkingDir = s.workdir
		if s.golang {
			return os.MkdirAll(filepath.Join(s.root, s.workdir), 0o755)
		}
		metadata = false
		if err := s.addLayer(in, []entry{{dest: s.workdir, mode: fs.ModeDir | 0o755}}, opts); err != nil {
			return err
		}
	case "COPY":
		metadata = false
		if err := s.copy(in, opts, ctx, stages); err != nil {
			return err
		}
	case "RUN":
		metadata = false
		if err := s.runGo(in, opts); err != nil {
			return err
		}
	case "ENV":
		kvs, err := keyValues(s.expand(in.args))
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			s.env = slices.DeleteFunc(s.env, func(e string) bool { return strings.HasPrefix(e, kv[0]+"=") })
			s.env = append(s.env, kv[0]+"="+kv[1])
		}
	case "LABEL":
		kvs, err := keyValues(s.expand(in.args))
		if err != nil {
			return err
		}
		if s.config.Labels == nil {
			s.config.Labels = map[string]string{}
		}
		for _, kv := range kvs {
			s.config.Labels[kv[0]] = kv[1]
		}
	case "USER":
		s.config.User = s.expand(in.args)
	case "ENTRYPOINT", "CMD":
		argv, err := command(in.args)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(in.args, "[") {
			return fmt.Errorf("use the exec form (a JSON list): an image from scratch has no shell")
		}
		if in.op == "ENTRYPOINT" {
			s.config.Entrypoint = argv
		} else {
			s.config.Cmd = argv
		}
	default:
		return fmt.Errorf("%s is not supported without a container engine", in.op)
	}
	if metadata && !s.golang {
		s.adds = append(s.adds, mutate.Addendum{History: history(in, opts, true)})
	}
	return nil
}

// copy runs COPY: from the context (less .dockerignore) or from an earlier stage's files.
func (s *stage) copy(in instruction, opts buildOptions, ctx *buildContext, stages []*stage) error {
	args, err := words(s.expand(in.args))
	if err != nil {
		return err
	}
	if len(args) < 2 {
		return fmt.Errorf("COPY needs a source and a destination")
	}
	srcs, dest := args[:len(args)-1], args[len(args)-1]
	intoDir := strings.HasSuffix(dest, "/") || len(srcs) > 1
	dest = s.abs(dest)
	root, keep := ctx.dir, func(rel string) bool { return !ctx.excluded(rel) }
	if name, ok := in.flags["from"]; ok {
		var src *stage
		for _, st := range stages {
			if st.name == name && st.golang {
				src = st
			}
		}
		if src == nil {
			return fmt.Errorf("--from=%s names no earlier golang stage", name)
		}
		root, keep = src.root, func(string) bool { return true }
	}
	var entries []entry
	for _, src := range srcs {
		es, err := collect(root, src, dest, intoDir, keep)
		if err != nil {
			return err
		}
		entries = append(entries, es...)
	}
	if s.golang {
		return materialize(s.root, entries)
	}
	return s.addLayer(in, entries, opts)
}

// runGo runs a RUN of a golang stage: a go command (after VAR=value assignments), in the
// stage's working directory, for the image's platform. Nothing else runs without a container.
func (s *stage) runGo(in instruction, opts buildOptions) error {
	if !s.golang {
		return fmt.Errorf("an image from scratch runs nothing")
	}
	argv, err := command(in.args)
	if err != nil {
		return err
	}
	env := append(os.Environ(), "GOOS="+opts.platform.OS, "GOARCH="+opts.platform.Architecture)
	env = append(env, s.env...)
	for len(argv) > 0 && strings.Contains(argv[0], "=") {
		env = append(env, argv[0])
		argv = argv[1:]
	}
	if len(argv) == 0 || argv[0] != "go" {
		return fmt.Errorf("only go commands run in a golang stage")
	}
	for _, a := range argv {
		if path.IsAbs(a) || strings.Contains(a, "=/") {
			return fmt.Errorf("%q: an absolute path would leave the stage's files", a)
		}
	}
	cmd := exec.Command("go", argv[1:]...)
	cmd.Dir = filepath.Join(s.root, s.workdir)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// materialize writes entries into a golang stage's files.
func materialize(root string, entries []entry) error {
	for _, e := range entries {
		dst := filepath.Join(root, filepath.FromSlash(e.dest))
		switch {
		case e.mode.IsDir():
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
		case e.link != "":
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(e.link, dst); err != nil {
				return err
			}
		default:
			raw, err := os.ReadFile(e.src)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(dst, raw, fileMode(e.mode)); err != nil {
				return err
			}
		}
	}
	return nil
}

// fileMode is what a layer records of a file's mode: executable or not. A checkout's other
// bits follow the umask of whoever cloned it, and must not change the digest.
func fileMode(m fs.FileMode) fs.FileMode {
	if m&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// addLayer appends a layer of entries to the final stage, with the directories above them.
// Entries are sorted and every header is normalised (owner root, the build's time, modes by
// fileMode), so that the layer's bytes depend on the files' contents and names alone.
func (s *stage) addLayer(in instruction, entries []entry, opts buildOptions) error {
	byPath := map[string]entry{}
	for _, e := range entries {
		for d := path.Dir(e.dest); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = entry{dest: d, mode: fs.ModeDir | 0o755}
			}
		}
		byPath[e.dest] = e
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := byPath[p]
		hdr := &tar.Header{Name: strings.TrimPrefix(p, "/"), ModTime: opts.created, Format: tar.FormatPAX}
		switch {
		case e.mode.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		case e.link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, e.link, 0o777
		default:
			info, err := os.Stat(e.src)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, info.Size(), int64(fileMode(info.Mode()))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			f, err := os.Open(e.src)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	raw := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return err
	}
	s.adds = append(s.adds, mutate.Addendum{Layer: layer, MediaType: types.OCILayer, History: history(in, opts, false)})
	return nil
}

func history(in instruction, opts buildOptions, empty bool) v1.History {
	return v1.History{Created: v1.Time{Time: opts.created}, CreatedBy: in.op + " " + in.text, EmptyLayer: empty}
}

// image assembles the final stage as an OCI image.
func (s *stage) image(opts buildOptions) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: opts.created}
	cf.OS, cf.Architecture, cf.Variant = opts.platform.OS, opts.platform.Architecture, opts.platform.Variant
	cf.Config = s.config
	cf.Config.Env = s.env
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.Append(img, s.adds...)
}

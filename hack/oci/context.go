package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// buildContext is the directory a Dockerfile's COPY reads from, less what .dockerignore
// excludes: the same files a container engine would send to its builder.
type buildContext struct {
	dir   string
	rules []ignoreRule
}

type ignoreRule struct {
	pattern string
	allow   bool // a "!pattern" line: include again what an earlier line excluded
}

// openContext reads the ignore file BuildKit would: <Dockerfile>.dockerignore beside the
// Dockerfile if there is one (so that several Dockerfiles can share a context), else the
// context's .dockerignore.
func openContext(dir, dockerfile string) (*buildContext, error) {
	c := &buildContext{dir: dir}
	raw, err := os.ReadFile(dockerfile + ".dockerignore")
	if errors.Is(err, fs.ErrNotExist) {
		raw, err = os.ReadFile(filepath.Join(dir, ".dockerignore"))
	}
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		allow := strings.HasPrefix(line, "!")
		pattern := path.Clean(strings.TrimPrefix(strings.TrimPrefix(line, "!"), "/"))
		if _, err := path.Match(pattern, ""); err != nil {
			return nil, fmt.Errorf(".dockerignore: %q: %w", line, err)
		}
		c.rules = append(c.rules, ignoreRule{pattern: pattern, allow: allow})
	}
	return c, nil
}

// excluded tells whether .dockerignore keeps the slash-separated path out of the context: the
// last rule that matches the path or one of its parent directories decides, as Docker's does.
func (c *buildContext) excluded(rel string) bool {
	out := false
	for _, r := range c.rules {
		if matchesPathOrParent(r.pattern, rel) {
			out = !r.allow
		}
	}
	return out
}

func matchesPathOrParent(pattern, rel string) bool {
	for p := rel; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if ok, _ := path.Match(pattern, p); ok {
			return true
		}
	}
	return false
}

// entry is one file, directory or symlink a COPY places in the image.
type entry struct {
	src  string // the file on disk; empty for a directory the copy creates
	dest string // absolute path in the image
	mode fs.FileMode
	link string // a symlink's target
}

// collect lists what COPY src dest takes from root (the context, or a build stage's files),
// following Docker's rules: a directory's contents go into dest; a file goes to dest, or into
// it when dest ends in a slash or several sources are copied. keep filters context paths.
func collect(root, src, dest string, intoDir bool, keep func(rel string) bool) ([]entry, error) {
	rel := path.Clean(strings.TrimPrefix(src, "/"))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("COPY %s: outside the build context", src)
	}
	top := filepath.Join(root, filepath.FromSlash(rel))
	info, err := os.Lstat(top)
	if err != nil || !keep(rel) {
		return nil, fmt.Errorf("COPY %s: not in the build context", src)
	}
	if !info.IsDir() {
		if intoDir {
			dest = path.Join(dest, path.Base(rel))
		}
		e, err := fileEntry(top, dest, info)
		return []entry{e}, err
	}
	var out []entry
	err = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		sub, _ := filepath.Rel(top, p)
		sub = filepath.ToSlash(sub)
		if sub != "." && !keep(path.Join(rel, sub)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		e, err := fileEntry(p, path.Join(dest, sub), info)
		out = append(out, e)
		return err
	})
	return out, err
}

func fileEntry(src, dest string, info fs.FileInfo) (entry, error) {
	e := entry{src: src, dest: dest, mode: info.Mode()}
	if info.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		e.link = target
		return e, err
	}
	if info.IsDir() {
		e.src = ""
	}
	return e, nil
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// The module proxy serves exact versions but refuses version lists, so `go get -u` cannot run:
// a newer version is found by asking for the next ones by name. A patch raise (v1.2.3 ->
// v1.2.4) keeps the API; golang.org/x modules release as minors (v0.53.0 -> v0.54.0), so they
// are raised minor by minor. A minor or major raise of anything else is a decision for a person,
// unless a vulnerability's fix needs it (fixFindings).

// toolchainFile pins the Go toolchain; toolchainNamers are the other files that name its version.
const toolchainFile = "hack/toolchain.env"

var toolchainNamers = []string{"go.mod", "README.md", ".ci/run", "Dockerfile"}

// kubeModule is the control plane's module; its k8s.io/kubernetes pin decides the staging
// modules its replace lines pin (k8s.io/kubernetes v1.X.Y -> k8s.io/<staging> v0.X.Y).
const kubeModule = "hack/cluster/kube"

type semver struct{ major, minor, patch int }

var release = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)$`)

func parse(v string) (semver, bool) {
	m := release.FindStringSubmatch(v)
	if m == nil {
		return semver{}, false // a pseudo-version, a pre-release or +incompatible: left as is
	}
	a, _ := strconv.Atoi(m[1])
	b, _ := strconv.Atoi(m[2])
	c, _ := strconv.Atoi(m[3])
	return semver{a, b, c}, true
}

func (s semver) String() string { return fmt.Sprintf("v%d.%d.%d", s.major, s.minor, s.patch) }

// served reports whether the module proxy serves path@version (asking for its .info alone).
func served(path, version string) bool {
	cmd := exec.Command("go", "list", "-m", "-json", path+"@"+version)
	cmd.Dir = os.TempDir() // outside any module: nothing is added to a go.mod
	return cmd.Run() == nil
}

// newest returns the newest served version after v: patches, then (golang.org/x) minors. A
// missing version ends the search only if the one after it is missing too, so that one
// withdrawn release is stepped over.
func newest(path string, v semver) semver {
	step := func(s semver, next func(semver) semver) semver {
		for {
			if a := next(s); served(path, a.String()) {
				s = a
			} else if b := next(a); served(path, b.String()) {
				s = b
			} else {
				return s
			}
		}
	}
	v = step(v, func(s semver) semver { return semver{s.major, s.minor, s.patch + 1} })
	if strings.HasPrefix(path, "golang.org/x/") {
		v = step(v, func(s semver) semver { return semver{s.major, s.minor + 1, 0} })
	}
	return v
}

// pseudo is a pseudo-version: a commit of a module that publishes no releases (the
// vulnerability data, golang.org/x/vulndb), ordered by its timestamp.
var pseudo = regexp.MustCompile(`^v0\.0\.0-(\d{14})-[0-9a-f]{12}$`)

// newerCommit returns the module's latest pseudo-version when it is a later commit than v, else v.
func newerCommit(path, v string) string {
	cur := pseudo.FindStringSubmatch(v)
	out, err := run(os.TempDir(), "go", "list", "-m", "-f", "{{.Version}}", path+"@latest")
	if cur == nil || err != nil {
		return v
	}
	latest := strings.TrimSpace(string(out))
	if next := pseudo.FindStringSubmatch(latest); next != nil && next[1] > cur[1] {
		return latest
	}
	return v
}

type gomod struct {
	Go      string
	Require []struct {
		Path, Version string
		Indirect      bool
	}
	Replace []struct {
		Old, New struct{ Path, Version string }
	}
}

func readGoMod(dir string) (gomod, error) {
	out, err := run(dir, "go", "mod", "edit", "-json")
	var m gomod
	if err == nil {
		err = json.Unmarshal(out, &m)
	}
	return m, err
}

func run(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s (in %s): %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return out, nil
}

// raise moves every direct requirement of the module in dir to its newest served patch (the
// modules they need follow, by Go's minimal version selection) and tidies it. A tool module's
// pseudo-versions (the vulnerability data publishes no releases) move to its latest commit; the
// project's own stay, as the k8s.io modules that pin them choose. It returns what it raised,
// and what it could not.
func raise(dir string) ([]string, error) {
	m, err := readGoMod(dir)
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var args []string
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, r := range m.Require {
		if r.Indirect {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			n := r.Version
			if v, ok := parse(r.Version); ok {
				n = newest(r.Path, v).String()
			} else if dir != "." {
				n = newerCommit(r.Path, r.Version)
			}
			if n != r.Version {
				mu.Lock()
				args = append(args, r.Path+"@"+n)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if dir == kubeModule {
		if err := followKubernetes(dir, m, args); err != nil {
			return nil, err
		}
	}
	changes := get(dir, args)
	_, err = run(dir, "go", "mod", "tidy")
	return changes, err
}

// get runs go get for every module@version of args at once, or, when they conflict, one by
// one, and says what moved and what stayed, with why.
func get(dir string, args []string) []string {
	if len(args) == 0 {
		return nil
	}
	if _, err := run(dir, append([]string{"go", "get"}, args...)...); err == nil {
		return prefixed(dir+": raised ", args)
	}
	var changes []string
	for _, a := range args {
		if _, err := run(dir, "go", "get", a); err != nil {
			changes = append(changes, fmt.Sprintf("%s: not raised to %s: %v", dir, a, err))
		} else {
			changes = append(changes, dir+": raised "+a)
		}
	}
	return changes
}

func prefixed(prefix string, s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = prefix + v
	}
	return out
}

// followKubernetes points the control plane's replace lines at the staging modules of the
// k8s.io/kubernetes version among raised (if it is).
func followKubernetes(dir string, m gomod, raised []string) error {
	for _, a := range raised {
		v, ok := strings.CutPrefix(a, "k8s.io/kubernetes@")
		if !ok {
			continue
		}
		s, _ := parse(v)
		staging := semver{0, s.minor, s.patch}.String()
		for _, r := range m.Replace {
			if _, err := run(dir, "go", "mod", "edit", "-replace", r.Old.Path+"="+r.New.Path+"@"+staging); err != nil {
				return err
			}
		}
	}
	return nil
}

// newerToolchain names a newer patch of the pinned toolchain that the proxy serves, or "". It
// is not raised here: a toolchain is approved by a person before it is pinned (in
// toolchainFile and in toolchainNamers, which a unit test keeps in step).
func newerToolchain() (string, error) {
	data, err := os.ReadFile(toolchainFile)
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`GOTOOLCHAIN=go(\d+\.\d+\.\d+)`).FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("%s names no GOTOOLCHAIN=goX.Y.Z", toolchainFile)
	}
	cur, _ := parse("v" + string(m[1]))
	next := cur
	// The go command fetches a toolchain as a version of this module.
	for served("golang.org/toolchain", fmt.Sprintf("v0.0.1-go%d.%d.%d.linux-amd64", next.major, next.minor, next.patch+1)) {
		next.patch++
	}
	if next == cur {
		return "", nil
	}
	return fmt.Sprintf("go%d.%d.%d is served (pinned: go%s); pin it in %s and %s once it is approved",
		next.major, next.minor, next.patch, m[1], toolchainFile, strings.Join(toolchainNamers, ", ")), nil
}

// fixFindings raises, in the project's module, each module the code reaches a vulnerability
// in to the newest patch of its fixed version, until none is left that a raise can fix.
func fixFindings(govulncheck, db string, pkgs []string) ([]string, []finding, error) {
	var changes []string
	for round := 0; ; round++ {
		found, err := scan(govulncheck, db, ".", pkgs)
		if err != nil || round == 3 {
			return changes, found, err
		}
		var args []string
		for _, f := range found {
			if v, ok := parse(f.Fixed); ok && f.Module != "stdlib" && f.Module != "toolchain" {
				args = append(args, f.Module+"@"+newest(f.Module, v).String())
			}
		}
		if len(args) == 0 {
			return changes, found, nil
		}
		changes = append(changes, get(".", args)...)
		if _, err := run(".", "go", "mod", "tidy"); err != nil {
			return changes, found, err
		}
	}
}

// update raises every module of the project and its tools, and the modules a
// vulnerability is reached in, and says what it changed and what is left.
func update(govulncheck, db string, pkgs []string) error {
	toolchain, err := newerToolchain()
	if err != nil {
		return err
	}
	var changes []string
	out, err := run(".", "git", "ls-files", "*go.mod")
	if err != nil {
		return err
	}
	for _, f := range strings.Fields(string(out)) {
		if strings.Contains(f, "testdata/") {
			continue
		}
		dir := filepath.Dir(f)
		c, err := raise(dir)
		if err != nil {
			return err
		}
		changes = append(changes, c...)
	}
	c, left, err := fixFindings(govulncheck, db, pkgs)
	if err != nil {
		return err
	}
	changes = append(changes, c...)
	for _, c := range changes {
		fmt.Println("update-deps:", c)
	}
	if len(changes) == 0 {
		fmt.Println("update-deps: every pin is at its newest served patch")
	}
	if toolchain != "" {
		fmt.Println("update-deps:", toolchain)
	}
	for _, f := range left {
		fmt.Println("update-deps: still reached, no raise fixes it:", f)
	}
	return nil
}

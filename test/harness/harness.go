// Package harness runs the real operator binary, kubectl and helm for the integration,
// end-to-end and fault tests, and offers the waits they share.
package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// RepoRoot is the repository's top folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BuildOperator compiles ./cmd into dir and returns the binary's path.
func BuildOperator(dir string) (string, error) { return Build(dir, "myproxy-operator", "./cmd") }

// Build compiles the command of package pkg into dir as name and returns the binary's path.
func Build(dir, name, pkg string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// Tool returns the path of a tool the Makefile built (HELM, KUSTOMIZE env) or bin/<name>.
func Tool(t testing.TB, env, name string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		path = filepath.Join(RepoRoot(), "bin", name)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s not found at %s: run `make tools` (or make test, which builds it)", name, path)
	}
	return path
}

// Watch is one watches.yaml entry for MyProxy; Extra is appended verbatim (YAML keys).
type Watch struct {
	Chart string // default: helm-charts/myproxy
	Extra string
}

// WriteWatches writes a watches file mapping MyProxy to the chart and returns its path.
func WriteWatches(t testing.TB, w Watch) string {
	t.Helper()
	chart := w.Chart
	if chart == "" {
		chart = filepath.Join(RepoRoot(), "helm-charts", "myproxy")
	}
	content := fmt.Sprintf("- group: gateway.example.com\n  version: v1alpha1\n  kind: MyProxy\n  chart: %s\n", chart)
	for _, line := range strings.Split(strings.TrimSpace(w.Extra), "\n") {
		if line != "" {
			content += "  " + line + "\n"
		}
	}
	path := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Operator is a running operator process.
type Operator struct {
	cmd  *exec.Cmd
	log  *SyncBuffer
	done chan struct{}
	err  error
}

// StartOperator runs the operator binary with the kubeconfig, the given flags and extra
// environment; it is stopped with SIGTERM when the test ends, and its log is printed if the
// test failed.
func StartOperator(t testing.TB, bin, kubeconfig string, args []string, env ...string) *Operator {
	t.Helper()
	return StartOperatorIn(t, RepoRoot(), bin, kubeconfig, args, env...)
}

// StartOperatorIn is StartOperator with dir as the working directory (where the watches file's
// chart paths start).
func StartOperatorIn(t testing.TB, dir, bin, kubeconfig string, args []string, env ...string) *Operator {
	t.Helper()
	base := []string{"--kubeconfig=" + kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--zap-log-level=info"}
	return startProcessIn(t, dir, bin, append(base, args...), env...)
}

// StartProcess runs a long-lived program (an operator, this one or another) with args and extra
// environment, as StartOperator does, but with no arguments of its own.
func StartProcess(t testing.TB, bin string, args []string, env ...string) *Operator {
	t.Helper()
	return startProcessIn(t, RepoRoot(), bin, args, env...)
}

func startProcessIn(t testing.TB, dir, bin string, args []string, env ...string) *Operator {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return start(t, cmd)
}

// Container is a program run as a container runtime would run it, without one: chrooted into
// Root (an image's filesystem), as UID:GID, in Dir, with exactly Env. It shares the host's
// network and processes.
type Container struct {
	Root     string
	Dir      string
	UID, GID uint32
	Argv     []string
	Env      []string
}

// StartContainer runs c (as root may: chroot and the change of user need it) as StartProcess
// runs a program: stopped when the test ends, its log printed if the test failed.
func StartContainer(t testing.TB, c Container) *Operator {
	t.Helper()
	// Argv[0] and Dir are paths inside Root: the child changes root, then directory, then runs it.
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Dir = c.Dir
	cmd.Env = c.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: c.Root, Credential: &syscall.Credential{Uid: c.UID, Gid: c.GID}}
	return start(t, cmd)
}

func start(t testing.TB, cmd *exec.Cmd) *Operator {
	t.Helper()
	o := &Operator{cmd: cmd, log: &SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = o.log, o.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { o.err = cmd.Wait(); close(o.done) }()
	t.Cleanup(func() {
		o.Stop(t)
		if t.Failed() {
			t.Logf("operator log:\n%s", o.Log())
		}
	})
	return o
}

// Stop sends SIGTERM and waits for a clean exit (SIGKILL after 40 s).
func (o *Operator) Stop(t testing.TB) {
	t.Helper()
	select {
	case <-o.done:
		return
	default:
	}
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.done:
	case <-time.After(40 * time.Second):
		_ = o.cmd.Process.Kill()
		<-o.done
		t.Errorf("operator did not exit within 40s of SIGTERM")
	}
}

// Log returns what the operator printed so far.
func (o *Operator) Log() string { return o.log.String() }

// Exited reports whether the process has ended, and its error.
func (o *Operator) Exited() (bool, error) {
	select {
	case <-o.done:
		return true, o.err
	default:
		return false, nil
	}
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a process's output, a logger).
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Eventually polls cond every 200 ms until it returns true or the timeout passes; then the test
// fails with the last reason cond gave.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var reason string
	for {
		ok, r := cond(ctx)
		if ok {
			return
		}
		reason = r
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s: %s", what, timeout, reason)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Consistently fails the test if cond turns false at any poll during the whole duration. Each
// poll gets a context of its own, so that the last one does not run with an expired context.
func Consistently(t testing.TB, duration time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(duration)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
		ok, reason := cond(ctx)
		cancel()
		if !ok {
			t.Fatalf("%s: stopped holding: %s", what, reason)
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pollTimeout bounds one poll of Consistently.
const pollTimeout = 30 * time.Second

// Run executes a command and returns its combined output; it fails the test on error.
func Run(t testing.TB, env []string, name string, args ...string) string {
	t.Helper()
	out, err := RunErr(env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// RunErr executes a command and returns its combined output and error.
func RunErr(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// WriteTemp writes content to a new temporary file, removed when the test ends. Its path holds
// no comma (tools such as helm split -f on commas; test names may contain them).
func WriteTemp(t testing.TB, pattern string, content []byte) string {
	t.Helper()
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	defer f.Close()
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// Kill ends the process with SIGKILL, as a crash or a lost node would, and waits for it.
func (o *Operator) Kill() {
	_ = o.cmd.Process.Kill()
	<-o.done
}

// Signal sends sig to the process: SIGSTOP and SIGCONT freeze and resume it, as a long GC
// pause, a suspended VM or a stalled node would.
func (o *Operator) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := o.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("sending %s to the operator: %v", sig, err)
	}
}

// FreeAddr returns a loopback address with a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// ChartValues reads helm-charts/myproxy/values.yaml: tests expect what the chart says.
func ChartValues(t testing.TB) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "helm-charts", "myproxy", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	return values
}

// CopyDir copies the files below from into to, creating directories as needed.
func CopyDir(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), raw, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

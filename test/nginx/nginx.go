// Package nginx runs an nginx configuration the chart renders in a real nginx (Debian's) on
// loopback, as a proxy Pod would run it.
package nginx

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/myproxy-operator/test/certs"
	"github.com/example/myproxy-operator/test/harness"
)

// Proxy is an nginx process running a rendered configuration on loopback.
type Proxy struct {
	HTTPAddr, HTTPSAddr string
	log                 *bytes.Buffer
}

// binary finds Debian's nginx.
func binary(t testing.TB) string {
	t.Helper()
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/nginx"); statErr != nil {
			t.Fatal("nginx not found: install Debian's nginx (.ci/run does)")
		}
		nginx = "/usr/sbin/nginx"
	}
	return nginx
}

// Test runs `nginx -t` on the configuration in dir, moved as Start moves it, with the cluster
// names of upstreams (which only the cluster's DNS resolves) pointed at loopback; the error
// carries nginx's words.
func Test(t testing.TB, dir, conf string, pair certs.Pair) error {
	t.Helper()
	local := strings.NewReplacer("/etc/nginx/tls/", dir+"/", "/tmp/", dir+"/").Replace(conf)
	local = clusterHost.ReplaceAllString(local, "${1}127.0.0.1")
	writePair(t, dir, pair)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(binary(t), "-t", "-q", "-e", "stderr", "-p", dir, "-c", path).CombinedOutput(); err != nil {
		return fmt.Errorf("nginx -t: %v: %s", err, out)
	}
	return nil
}

// clusterHost is the host of an upstream URL in proxy_pass.
var clusterHost = regexp.MustCompile(`(proxy_pass https?://)[A-Za-z0-9.-]+`)

// Start checks the configuration with `nginx -t` and runs it. Only what ties the
// configuration to the Pod is moved: the listen ports (to free loopback ports) and the
// paths of the TLS files and temporary files (into a test folder).
func Start(t testing.TB, conf string, pair *certs.Pair) *Proxy {
	t.Helper()
	nginx := binary(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil { // nginx workers may run as another user
		t.Fatal(err)
	}
	p := &Proxy{HTTPAddr: harness.FreeAddr(t), HTTPSAddr: harness.FreeAddr(t), log: &bytes.Buffer{}}
	replacer := strings.NewReplacer(
		"listen 8080;", "listen "+p.HTTPAddr+";",
		"listen 8443 ssl;", "listen "+p.HTTPSAddr+" ssl;",
		"/etc/nginx/tls/", dir+"/",
		"/tmp/", dir+"/",
	)
	local := replacer.Replace(conf)
	if pair != nil {
		writePair(t, dir, *pair)
	}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(local), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nginx, "-t", "-q", "-e", "stderr", "-p", dir, "-c", path).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t refused the rendered configuration: %v\n%s\n%s", err, out, local)
	}
	cmd := exec.Command(nginx, "-e", "stderr", "-p", dir, "-c", path, "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("nginx log:\n%s", p.log.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("tcp", p.HTTPAddr); err == nil {
			c.Close()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s:\n%s", p.HTTPAddr, p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writePair writes a TLS pair as the Secret's volume holds it.
func writePair(t testing.TB, dir string, pair certs.Pair) {
	t.Helper()
	for name, data := range map[string][]byte{"tls.crt": pair.Cert, "tls.key": pair.Key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// Package dataplane runs the nginx configuration the chart renders in a real nginx (Debian's)
// on loopback, in front of local upstream servers, and checks that requests are routed.
package dataplane

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/test/harness"
)

// renderNginxConf renders the chart for a MyProxy spec and returns the nginx.conf of its ConfigMap.
func renderNginxConf(t *testing.T, spec map[string]any) string {
	t.Helper()
	raw, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	values := harness.WriteTemp(t, "values-*.yaml", raw)
	out := harness.Run(t, nil, harness.Tool(t, "HELM", "helm"), "template", "edge",
		filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"), "-f", values, "-s", "templates/configmap.yaml")
	var cm struct{ Data map[string]string }
	if err := yaml.Unmarshal([]byte(out), &cm); err != nil {
		t.Fatal(err)
	}
	conf := cm.Data["nginx.conf"]
	if conf == "" {
		t.Fatalf("no nginx.conf in the rendered ConfigMap:\n%s", out)
	}
	return conf
}

// proxy is an nginx process running a rendered configuration on loopback.
type proxy struct {
	httpAddr, httpsAddr string
	log                 *bytes.Buffer
}

// startNginx checks the configuration with `nginx -t` and runs it. Only what ties the
// configuration to the Pod is moved: the listen ports (to free loopback ports) and the
// paths of the TLS files and temporary files (into a test folder).
func startNginx(t *testing.T, conf string, cert *tlsFiles) *proxy {
	t.Helper()
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/nginx"); statErr != nil {
			t.Fatal("nginx not found: install Debian's nginx (.ci/run does)")
		}
		nginx = "/usr/sbin/nginx"
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil { // nginx workers may run as another user
		t.Fatal(err)
	}
	p := &proxy{httpAddr: harness.FreeAddr(t), httpsAddr: harness.FreeAddr(t), log: &bytes.Buffer{}}
	replacer := strings.NewReplacer(
		"listen 8080;", "listen "+p.httpAddr+";",
		"listen 8443 ssl;", "listen "+p.httpsAddr+" ssl;",
		"/etc/nginx/tls/", dir+"/",
		"/tmp/", dir+"/",
	)
	local := replacer.Replace(conf)
	if cert != nil {
		cert.writeTo(t, dir)
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
		if c, err := net.Dial("tcp", p.httpAddr); err == nil {
			c.Close()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s:\n%s", p.httpAddr, p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// upstream is a local HTTP server that answers with what it received.
func upstream(t *testing.T, name string, delay time.Duration) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		fmt.Fprintf(w, "upstream=%s path=%s host=%s xfp=%s xff=%s team=%s", name, r.URL.RequestURI(), r.Host,
			r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Team"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type tlsFiles struct{ cert, key []byte }

func (f *tlsFiles) writeTo(t *testing.T, dir string) {
	t.Helper()
	for name, data := range map[string][]byte{"tls.crt": f.cert, "tls.key": f.key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// selfSigned makes a certificate for 127.0.0.1, as a kubernetes.io/tls Secret would hold.
func selfSigned(t *testing.T) (*tlsFiles, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "edge.test.svc"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tlsFiles{
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, pool
}

func get(t *testing.T, client *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/test/certs"
	"github.com/example/myproxy-operator/test/harness"
	"github.com/example/myproxy-operator/test/nginx"
)

// A renewed certificate (the TLS Secret's data replaced in place, as cert-manager does) reaches
// the data plane: the release is upgraded and the Pod template changes, so the Pods roll; a
// proxy started from the cluster's objects then, as a new Pod is, serves the new certificate,
// while one started before still serves the old.
func TestCertificateRotationReachesTheDataPlane(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "backend") }))
	t.Cleanup(backend.Close)

	first := certs.Valid(t, "edge-1")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "edge-cert", Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": first.Cert, "tls.key": first.Key}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{
		"tls":    map[string]any{"secretName": "edge-cert"},
		"routes": []any{map[string]any{"path": "/", "upstream": backend.URL}},
	})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", timeout)
	before := waitDeployment(t, c, ns, "edge", "with a TLS checksum", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Annotations["checksum/tls"] != ""
	}).Spec.Template.Annotations["checksum/tls"]
	oldPod := startPod(t, c, ns)
	if got := servedCertificate(t, oldPod, first); got != "edge-1" {
		t.Fatalf("before the rotation the proxy served %q, want edge-1", got)
	}
	rev, _ := latestRevision(ctx, c, ns, "edge")

	second := certs.Valid(t, "edge-2")
	secret.Data = map[string][]byte{"tls.crt": second.Cert, "tls.key": second.Key}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, c, ns, "edge", "rolled by the new certificate", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Annotations["checksum/tls"] != before
	})
	if now, _ := latestRevision(ctx, c, ns, "edge"); now != rev+1 {
		t.Errorf("release revision %d after the rotation, want %d", now, rev+1)
	}
	if got := servedCertificate(t, startPod(t, c, ns), second); got != "edge-2" {
		t.Errorf("a Pod started after the roll served %q, want edge-2", got)
	}
	if got := servedCertificate(t, oldPod, first); got != "edge-1" {
		t.Errorf("the Pod started before served %q: nginx reads its pair only at start, which is why Pods roll", got)
	}
}

// startPod runs nginx as a new proxy Pod of MyProxy edge would: the configuration of its
// ConfigMap and the pair of its TLS Secret, as they are in the cluster now.
func startPod(t *testing.T, c client.Client, ns string) *nginx.Proxy {
	t.Helper()
	var cm corev1.ConfigMap
	var secret corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "edge"}, &cm); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "edge-cert"}, &secret); err != nil {
		t.Fatal(err)
	}
	return nginx.Start(t, cm.Data["nginx.conf"], &certs.Pair{Cert: secret.Data["tls.crt"], Key: secret.Data["tls.key"]})
}

// servedCertificate connects with a TLS client that trusts only trusted, makes a request, and
// returns the common name of the certificate the proxy presented.
func servedCertificate(t *testing.T, p *nginx.Proxy, trusted certs.Pair) string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: trusted.Pool()}}}
	resp, err := client.Get("https://" + p.HTTPSAddr + "/")
	if err != nil {
		return fmt.Sprintf("error: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "backend" || resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
		return fmt.Sprintf("status %d body %q", resp.StatusCode, body)
	}
	return resp.TLS.PeerCertificates[0].Subject.CommonName
}

package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/myproxy-operator/test/harness"
)

// With --metrics-secure, /metrics is served over HTTPS to callers the apiserver authenticates
// and authorises (the metrics-reader ClusterRole of config/rbac), and holds the operator's own
// metrics beside controller-runtime's.
func TestSecureMetrics(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	if out, err := kubectl(t, "apply", "-f", filepath.Join(harness.RepoRoot(), "config", "rbac", "metrics_reader_role.yaml")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, sa := range []string{"scraper", "nobody"} {
		if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: ns}},
	}
	if err := c.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		out, err := kubectl(t, "create", "token", sa, "-n", ns)
		if err != nil {
			t.Fatalf("kubectl create token %s: %v\n%s", sa, err, out)
		}
		return strings.TrimSpace(out)
	}

	addr := harness.FreeAddr(t)
	startOperatorWith(t, "--metrics-bind-address="+addr, "--metrics-secure")
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", timeout)

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The manager serves a self-signed certificate unless one is mounted.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // test of authn, not of TLS identity
	}}
	scrape := func(bearer string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	harness.Eventually(t, 30*time.Second, "metrics endpoint up", func(context.Context) (bool, string) {
		status, body := scrape("")
		return status != 0, body
	})
	if status, _ := scrape(""); status != http.StatusUnauthorized {
		t.Errorf("without a token: status %d, want 401", status)
	}
	if status, _ := scrape(token("nobody")); status != http.StatusForbidden {
		t.Errorf("with an unauthorised token: status %d, want 403", status)
	}
	var body string
	harness.Eventually(t, 30*time.Second, "metrics with an authorised token", func(context.Context) (bool, string) {
		var status int
		status, body = scrape(token("scraper"))
		return status == http.StatusOK && strings.Contains(body, `myproxy_operator_releases{state="deployed"}`),
			fmt.Sprintf("status %d", status)
	})
	for _, want := range []string{
		`myproxy_operator_helm_action_duration_seconds_count{action="install",result="success"}`,
		`controller_runtime_reconcile_total{controller="myproxy-controller"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

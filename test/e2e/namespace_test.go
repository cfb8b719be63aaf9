package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/myproxy-operator/test/harness"
)

// Deleting a namespace that holds MyProxies completes: the operator uninstalls their releases
// while the namespace terminates, and their finalizers let go.
func TestNamespaceDeletionCompletes(t *testing.T) {
	installCRD(t)
	harness.StartOperator(t, operatorBin, kubeconfig,
		[]string{"--watches-file=" + filepath.Join(harness.RepoRoot(), "watches.yaml")})
	c := harness.NewClient(t, harness.ConfigFromKubeconfig(t, kubeconfig))
	ns := harness.Namespace(t, c, nil)
	for _, name := range []string{"one", "two"} {
		if err := c.Create(context.Background(), harness.MyProxy(ns, name, map[string]any{})); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"one", "two"} {
		harness.WaitForCondition(t, c, ns, name, "Deployed", "True", 120*time.Second)
	}
	start := time.Now()
	kubectl(t, "delete", "namespace", ns, "--wait=false")
	harness.Eventually(t, 120*time.Second, "namespace deleted", func(context.Context) (bool, string) {
		out, _ := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "get", "namespace", ns, "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == "", fmt.Sprintf("still there: %s", out)
	})
	t.Logf("namespace with 2 MyProxies deleted in %s", time.Since(start).Round(time.Millisecond))
}

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/example/myproxy-operator/test/harness"
)

// killComponent kills a control-plane process the way a crash would.
func killComponent(t *testing.T, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(clusterDir, "pids", name+".pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// The apiserver and etcd die and stay down for 30 s, three times the renew deadline of the
// leader Lease: the operator (with leader election, as deployed) must neither exit nor crash,
// and must act on a change made after the control plane is back.
func TestControlPlaneOutage(t *testing.T) {
	installCRD(t)
	c := harness.NewClient(t, harness.ConfigFromKubeconfig(t, kubeconfig))
	ns := harness.Namespace(t, c, nil)
	t.Cleanup(func() {
		_, _ = harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "delete", "namespace", ns, "--wait=false")
	})
	metrics := harness.FreeAddr(t)
	op := harness.StartOperator(t, operatorBin, kubeconfig, []string{
		"--watches-file=" + filepath.Join(harness.RepoRoot(), "watches.yaml"), "--metrics-bind-address=" + metrics,
		"--leader-elect", "--leader-election-namespace=" + ns})
	kubectl(t, "apply", "-n", ns, "-f", harness.WriteTemp(t, "edge-*.yaml", []byte(
		"apiVersion: gateway.example.com/v1alpha1\nkind: MyProxy\nmetadata: {name: edge}\nspec: {replicas: 1}\n")))
	kubectl(t, "wait", "-n", ns, "--for=condition=Deployed", "myproxy/edge", "--timeout=120s")

	killComponent(t, "kube-apiserver")
	killComponent(t, "etcd")
	harness.Consistently(t, 30*time.Second, "the operator keeps running while the control plane is down",
		func(context.Context) (bool, string) {
			exited, err := op.Exited()
			return !exited, "exited: " + errString(err)
		})
	if err := cluster("up"); err != nil {
		t.Fatal(err)
	}
	back := time.Now()

	kubectl(t, "patch", "-n", ns, "myproxy/edge", "--type=merge", "-p", `{"spec":{"replicas":3}}`)
	harness.Eventually(t, 120*time.Second, "the change made after the outage reaches the Deployment",
		func(context.Context) (bool, string) {
			out, err := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "get", "deployment", "-n", ns, "edge",
				"-o", "jsonpath={.spec.replicas}")
			return err == nil && out == "3", out
		})
	t.Logf("converged %.1fs after the control plane was back", time.Since(back).Seconds())
	if exited, err := op.Exited(); exited {
		t.Fatalf("the operator exited: %v", err)
	}
	body, err := harness.ScrapeMetrics(metrics)
	if err != nil {
		t.Fatal(err)
	}
	if lost, err := harness.SumSamples(body, "myproxy_operator_leader_leases_lost_total", ""); err != nil || lost < 1 {
		t.Errorf("the operator counted %g lost Leases (%v); the outage outlasted the renew deadline, so it lost one and campaigned again", lost, err)
	}
	// Uninstalled while this test's operator runs: left to the namespace's deletion, the MyProxy
	// would wait on its finalizer for whichever operator runs next.
	kubectl(t, "delete", "-n", ns, "myproxy/edge", "--timeout=120s")
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

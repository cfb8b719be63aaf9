// Package cluster tests the local control plane that `make cluster-up` starts, in a state folder
// and port range of its own so that it never touches a cluster already running.
package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/example/myproxy-operator/test/harness"
)

var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// pids reads the PIDs cluster.sh recorded.
func pids(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, c := range components {
		raw, err := os.ReadFile(filepath.Join(dir, "pids", c+".pid"))
		if err != nil {
			t.Fatalf("%s has no recorded PID: %v", c, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		out[c] = pid
	}
	return out
}

// running tells whether the process pid still runs: it has a /proc entry and is not a zombie
// (one that has exited and waits for its parent, whoever that now is, to reap it).
func running(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

func TestClusterUpDeploymentDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	dir := t.TempDir()
	env := []string{"CLUSTER_DIR=" + dir, "CLUSTER_PORT_BASE=21400", "CLUSTER_AUDIT=1"}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kubectl := func(args ...string) string {
		return harness.Run(t, nil, "kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
	}
	t.Cleanup(func() { _, _ = harness.RunErr(env, "make", "cluster-down") })

	harness.Run(t, env, "make", "cluster-up")
	started := pids(t, dir)
	if got := harness.Run(t, env, "make", "--no-print-directory", "cluster-env"); strings.TrimSpace(got) != "export KUBECONFIG="+kubeconfig {
		t.Errorf("cluster-env printed %q", got)
	}
	if got := kubectl("get", "--raw", "/readyz"); got != "ok" {
		t.Fatalf("/readyz = %q", got)
	}

	// A second `up` reuses the healthy cluster: same processes.
	harness.Run(t, env, "make", "cluster-up")
	for c, pid := range pids(t, dir) {
		if pid != started[c] {
			t.Errorf("second cluster-up restarted %s (pid %d -> %d)", c, started[c], pid)
		}
	}

	kubectl("create", "deployment", "web", "--image=nginx", "--replicas=2")
	kubectl("rollout", "status", "deployment/web", "--timeout=90s")
	if got := kubectl("get", "deployment", "web", "-o", "jsonpath={.status.readyReplicas}/{.spec.replicas}"); got != "2/2" {
		t.Errorf("deployment web ready/desired = %q, want 2/2", got)
	}
	phases := kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].status.phase}")
	if phases != "Running Running" {
		t.Errorf("pod phases = %q, want two Running", phases)
	}

	// CLUSTER_AUDIT=1 records every request with its user and verb (what benchmarks count).
	audit, err := os.ReadFile(filepath.Join(dir, "logs", "audit.log"))
	if err != nil {
		t.Fatalf("no audit log with CLUSTER_AUDIT=1: %v", err)
	}
	if !strings.Contains(string(audit), `"verb":"create"`) || !strings.Contains(string(audit), `"resource":"deployments"`) ||
		!strings.Contains(string(audit), `"username":"local-admin"`) {
		t.Error("the audit log does not record the deployment's creation by local-admin")
	}

	// cluster-down returns once every component has exited (killed if it would not stop).
	harness.Run(t, env, "make", "cluster-down")
	for c, pid := range started {
		if running(pid) {
			t.Errorf("%s (pid %d) still runs after cluster-down", c, pid)
		}
	}
	if _, err := harness.RunErr(env, "hack/cluster/cluster.sh", "status"); err == nil {
		t.Error("cluster.sh status reports a running cluster after cluster-down")
	}
}

// Package e2e runs the operator binary against the local cluster (make cluster-up: real
// controllers, scheduler and kwok Pods) and drives it with real kubectl and kustomize.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/example/myproxy-operator/test/harness"
)

var (
	kubeconfig  string
	operatorBin string
	clusterDir  string
	// cluster runs hack/cluster/cluster.sh VERB on the suite's cluster.
	cluster func(verb string) error
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run starts a local cluster of its own (fresh state, its own ports, so that neither a
// developer's cluster nor what is left in it matters), and stops it afterwards.
func run(m *testing.M) int {
	root := harness.RepoRoot()
	dir := filepath.Join(root, "bin", "e2e-cluster")
	clusterDir = dir
	if err := os.RemoveAll(dir); err != nil {
		fmt.Println("e2e:", err)
		return 1
	}
	clusterSh := filepath.Join(root, "hack", "cluster", "cluster.sh")
	cluster = func(verb string) error {
		cmd := exec.Command(clusterSh, verb)
		// The audit log lets TestRBACIsWhatTheOperatorUses see every request the operator makes.
		cmd.Env = append(os.Environ(), "CLUSTER_DIR="+dir, "CLUSTER_PORT_BASE=21600", "CLUSTER_AUDIT=1")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	defer func() { _ = cluster("down") }()
	if err := cluster("up"); err != nil {
		fmt.Println("e2e: cluster-up failed:", err)
		return 1
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")

	tmp, err := os.MkdirTemp("", "myproxy-e2e-")
	if err != nil {
		fmt.Println("e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if operatorBin, err = harness.BuildOperator(tmp); err != nil {
		fmt.Println("e2e:", err)
		return 1
	}
	return m.Run()
}

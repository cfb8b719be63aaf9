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
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run starts the local cluster unless it is already up, and stops it afterwards only if it
// started it.
func run(m *testing.M) int {
	root := harness.RepoRoot()
	clusterSh := filepath.Join(root, "hack", "cluster", "cluster.sh")
	alreadyUp := exec.Command(clusterSh, "status").Run() == nil
	if !alreadyUp {
		up := exec.Command(clusterSh, "up")
		up.Stdout, up.Stderr = os.Stdout, os.Stderr
		if err := up.Run(); err != nil {
			fmt.Println("e2e: cluster-up failed:", err)
			return 1
		}
		defer func() { _ = exec.Command(clusterSh, "down").Run() }()
	}
	dir := os.Getenv("CLUSTER_DIR")
	if dir == "" {
		dir = filepath.Join(root, "bin", "local-cluster")
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

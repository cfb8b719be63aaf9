// Package publish tests the three ways the operator is run from what a publisher ships: the
// images built and pushed with Go only (no container engine), make deploy of the pushed image,
// and OLM installing, upgrading and removing the bundle from a catalog. It runs on a local
// cluster of its own, with an image registry and an audit log (make test-publish).
package publish

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/example/myproxy-operator/test/harness"
)

// portBase is this suite's CLUSTER_PORT_BASE: apart from the other suites' clusters, so that
// they can run side by side.
const portBase = 22400

var (
	clusterDir string
	kubeconfig string
	// registry is the cluster's image registry (host:port); make and bin/oci trust its CA
	// through REGISTRY_CA, which TestMain sets.
	registry string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run starts the cluster with its registry (fresh state), and stops it afterwards.
func run(m *testing.M) int {
	clusterDir = filepath.Join(harness.RepoRoot(), "bin", "publish-cluster")
	if err := os.RemoveAll(clusterDir); err != nil {
		fmt.Println("publish:", err)
		return 1
	}
	env := append(os.Environ(), "CLUSTER_DIR="+clusterDir, "CLUSTER_PORT_BASE="+strconv.Itoa(portBase),
		"CLUSTER_AUDIT=1", "CLUSTER_REGISTRY=1")
	cluster := func(verb string) error {
		cmd := exec.Command(filepath.Join(harness.RepoRoot(), "hack", "cluster", "cluster.sh"), verb)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	defer func() { _ = cluster("down") }()
	if err := cluster("up"); err != nil {
		fmt.Println("publish: cluster-up failed:", err)
		return 1
	}
	kubeconfig = filepath.Join(clusterDir, "kubeconfig")
	registry = "127.0.0.1:" + strconv.Itoa(portBase+90)
	// kubectl's discovery cache is keyed by the apiserver's address, which every run of the suite
	// reuses: a cache of its own keeps the API an earlier cluster served (another version of
	// MyProxy) from answering for this one.
	if err := os.Setenv("KUBECACHEDIR", filepath.Join(clusterDir, "kubectl-cache")); err != nil {
		fmt.Println("publish:", err)
		return 1
	}
	if err := os.Setenv("REGISTRY_CA", filepath.Join(clusterDir, "pki", "ca.crt")); err != nil {
		fmt.Println("publish:", err)
		return 1
	}
	return m.Run()
}

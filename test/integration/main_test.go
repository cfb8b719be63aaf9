// Package integration runs the operator binary against envtest: a real kube-apiserver and etcd
// (from bin/cluster, via KUBEBUILDER_ASSETS) without controllers, nodes or kubelets.
package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/example/myproxy-operator/test/harness"
)

var (
	cfg         *rest.Config
	kubeconfig  string
	operatorBin string
	// auditLog records every list of Secrets (release records are Secrets), and nothing else.
	auditLog string
)

// operatorUser is the user the operator processes act as.
const operatorUser = "admin"

const secretListsPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [list]
  resources: [{group: "", resources: [secrets]}]
- level: None
`

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Println("integration: KUBEBUILDER_ASSETS is not set; run `make test`, which builds the control plane and sets it")
		os.Exit(1)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "myproxy-integration-")
	if err != nil {
		fmt.Println("integration:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(secretListsPolicy), 0o600); err != nil {
		fmt.Println("integration:", err)
		return 1
	}
	auditLog = filepath.Join(dir, "audit.log")
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(harness.RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	// envtest's default Service range (a /24) holds 254 Services; the soak keeps hundreds at once
	// and envtest deletes no namespace, so the Services of earlier tests stay.
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.0.0.0/16").
		Set("audit-log-path", auditLog).Set("audit-policy-file", policy)
	cfg, err = env.Start()
	if err != nil {
		fmt.Println("integration: starting envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()

	admin, err := env.AddUser(envtest.User{Name: operatorUser, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		fmt.Println("integration: adding admin user:", err)
		return 1
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		fmt.Println("integration:", err)
		return 1
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		fmt.Println("integration:", err)
		return 1
	}
	if operatorBin, err = harness.BuildOperator(dir); err != nil {
		fmt.Println("integration:", err)
		return 1
	}
	return m.Run()
}

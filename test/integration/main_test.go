// Package integration runs the operator binary against envtest: a real kube-apiserver and etcd
// (from bin/cluster, via KUBEBUILDER_ASSETS) without controllers, nodes or kubelets. The long
// fault tests are apart, in test/chaos; both share test/fixture.
package integration

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/example/myproxy-operator/test/fixture"
)

var (
	env         *fixture.Env
	cfg         *rest.Config
	kubeconfig  string
	operatorBin string
	auditLog    string // Secret lists (fixture.Env.AuditLog)
)

// operatorUser is the user the operator processes act as.
const operatorUser = fixture.OperatorUser

func TestMain(m *testing.M) {
	os.Exit(fixture.Main(m, "integration", func(e *fixture.Env) {
		env, cfg, kubeconfig, operatorBin, auditLog = e, e.Cfg, e.Kubeconfig, e.OperatorBin, e.AuditLog
	}))
}

package harness

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// DeployerRules are the rules of the deployer role make manifests writes for MyProxy
// (config/rbac/myproxy_deployer_role.yaml), for the ServiceAccounts its releases run as.
func DeployerRules(t testing.TB) []rbacv1.PolicyRule {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "config", "rbac", "myproxy_deployer_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(raw, &role); err != nil {
		t.Fatal(err)
	}
	return role.Rules
}

// GrantServiceAccount creates the ServiceAccount name in ns, with a Role of rules bound to it.
func GrantServiceAccount(t testing.TB, c client.Client, ns, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}},
	} {
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
}

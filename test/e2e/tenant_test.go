package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/tenancy"
	"github.com/example/myproxy-operator/test/harness"
)

// waitCanI waits until kubectl auth can-i answers want for user's verb on resource in ns (the
// aggregation controller folds generated roles into the built-in ones a moment later).
func waitCanI(t *testing.T, user, verb, resource, ns, want string) {
	t.Helper()
	harness.Eventually(t, 60*time.Second, user+" may "+verb+" "+resource+": "+want, func(context.Context) (bool, string) {
		out, _ := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "auth", "can-i", verb, resource, "-n", ns, "--as", user)
		return strings.TrimSpace(out) == want, out
	})
}

// tenantUser is the user the tenant scenarios act as (kubectl --as).
const tenantUser = "tenant"

// bindTenant gives tenantUser the built-in edit role in ns alone, and waits until the apiserver
// grants it (what edit grants on MyProxies comes from the deployed aggregated roles, so the
// callers that rely on it wait for that too).
func bindTenant(t *testing.T, ns string) {
	t.Helper()
	kubectl(t, "create", "rolebinding", "tenant-edit", "-n", ns, "--clusterrole=edit", "--user="+tenantUser)
	waitCanI(t, tenantUser, "create", "configmaps", ns, "yes")
}

// tenantAccount is the ServiceAccount the tenant scenario's releases run as.
const tenantAccount = "myproxy-deployer"

// viewerSeesNoManifest checks that a user holding the built-in view role in ns reads no
// rendered manifest: not in the status of the MyProxy name, and no release record (Secrets).
func viewerSeesNoManifest(t *testing.T, ns, name string) {
	t.Helper()
	kubectl(t, "create", "rolebinding", "viewer-view", "-n", ns, "--clusterrole=view", "--user=viewer")
	waitCanI(t, "viewer", "get", "myproxies.gateway.example.com", ns, "yes")
	st := kubectl(t, "--as", "viewer", "get", "-n", ns, "myproxy/"+name, "-o", "jsonpath={.status}")
	if !strings.Contains(st, `"deployedRelease"`) || strings.Contains(st, "manifest") || strings.Contains(st, "nginx.conf") {
		t.Errorf("the viewer reads a rendered manifest, or no deployedRelease, in the status:\n%s", st)
	}
	if out, err := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "--as", "viewer", "get", "secrets", "-n", ns,
		"-l", "owner=helm"); err == nil || !strings.Contains(out, "Forbidden") {
		t.Errorf("the viewer may list the release records (err %v):\n%s", err, out)
	}
}

// tenantServiceAccountBoundsTheRelease runs the operator, as its deployed ServiceAccount, with
// --default-service-account and the impersonation rule an administrator adds for it. In a
// namespace whose ServiceAccount of that name holds the generated deployer role without the
// right to create Deployments, a MyProxy a tenant applies fails with a condition naming the
// refused verb and the ServiceAccount, and nothing of its release stays behind.
//
// The test's kubeconfig makes the operator act as its ServiceAccount by impersonation, and
// one request carries one impersonation: Helm's requests as the tenant's ServiceAccount are
// sent by the kubeconfig's own user. The operator's rights to impersonate are checked as its
// ServiceAccount at start (tenancy.CheckRights), which fails without the rule added here.
func tenantServiceAccountBoundsTheRelease(t *testing.T, c client.Client, operatorKubeconfig string, args []string) {
	t.Helper()
	ctx := context.Background()
	rule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"},
		ResourceNames: []string{tenantAccount}, Verbs: tenancy.Verbs}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "myproxy-e2e-tenant-identity"}, Rules: []rbacv1.PolicyRule{rule}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: systemNamespace, Name: managerSA}}}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
	}
	op := harness.StartOperator(t, operatorBin, operatorKubeconfig, append(slices.Clone(args), "--"+tenancy.DefaultServiceAccountFlag+"="+tenantAccount))
	defer op.Stop(t)

	ns := harness.Namespace(t, c, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	t.Cleanup(func() {
		_, _ = harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "delete", "namespace", ns, "--wait=false")
	})
	bindTenant(t, ns)
	rules := harness.DeployerRules(t)
	for i, r := range rules {
		if slices.Contains(r.Resources, "deployments") {
			rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "create" })
		}
	}
	harness.GrantServiceAccount(t, c, ns, tenantAccount, rules)
	waitCanI(t, tenantUser, "create", "myproxies.gateway.example.com", ns, "yes")
	kubectl(t, "--as", tenantUser, "apply", "-n", ns, "-f", filepath.Join(harness.RepoRoot(), sample))
	name, _, _ := sampleSpec(t)
	mp := harness.WaitForCondition(t, c, ns, name, "ReleaseFailed", "True", 120*time.Second)
	_, _, msg := harness.Condition(mp, "ReleaseFailed")
	t.Logf("as the tenant's ServiceAccount: ReleaseFailed: %s", msg)
	for _, want := range []string{serviceaccount.MakeUsername(ns, tenantAccount), `cannot create resource "deployments"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("ReleaseFailed says %q, want it to name %q", msg, want)
		}
	}
	// The reconciler retries with a growing backoff; between attempts the failed install's
	// uninstall has removed every object and record of it.
	harness.Eventually(t, 120*time.Second, "nothing of the failed release left", func(context.Context) (bool, string) {
		out, err := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "get", "deployments,services,configmaps,secrets",
			"-n", ns, "-l", "app.kubernetes.io/instance="+name, "-o", "name")
		records, err2 := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "get", "secrets", "-n", ns,
			"-l", "owner=helm,name="+name, "-o", "name")
		return err == nil && err2 == nil && strings.TrimSpace(out+records) == "", out + records
	})
	kubectl(t, "--as", tenantUser, "delete", "-n", ns, "myproxy/"+name, "--timeout=120s")
}

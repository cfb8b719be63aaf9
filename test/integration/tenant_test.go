package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/tenancy"
	"github.com/example/myproxy-operator/test/certs"
	"github.com/example/myproxy-operator/test/harness"
)

func without(resources ...string) func(rbacv1.PolicyRule) bool {
	return func(r rbacv1.PolicyRule) bool {
		for _, res := range r.Resources {
			for _, drop := range resources {
				if res == drop {
					return false
				}
			}
		}
		return true
	}
}

// deployerRules are the deployer role's rules that keep accepts.
func deployerRules(t *testing.T, keep func(rbacv1.PolicyRule) bool) []rbacv1.PolicyRule {
	t.Helper()
	var rules []rbacv1.PolicyRule
	for _, r := range harness.DeployerRules(t) {
		if keep(r) {
			rules = append(rules, r)
		}
	}
	return rules
}

// With serviceAccountName in its watch, a kind's Helm actions and lookups run as that
// ServiceAccount of the custom resource's namespace: what its RBAC refuses fails the release
// with a condition naming the refused verb and user, and leaves nothing of the release behind;
// a missing ServiceAccount is a condition naming it, and creating it (bound to the deployer
// role make manifests writes) deploys the release at once; a custom resource deleted after its
// ServiceAccount is let go with an Event instead of hanging on its finalizer.
func TestReleasesRunAsTheTenantsServiceAccount(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	const account = "deployer"
	startOperator(t, harness.Watch{Extra: tenancy.ServiceAccountKey + ": " + account})

	// A ServiceAccount that may read Deployments but not create them, and may not read Secrets
	// (what the chart's lookup of the TLS Secret needs).
	narrow := newNamespace(t, c, nil)
	rules := append(deployerRules(t, without("deployments", "secrets")), rbacv1.PolicyRule{
		APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "update", "patch", "delete"}})
	harness.GrantServiceAccount(t, c, narrow, account, rules)
	pair := certs.Valid(t, "edge")
	tls := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: narrow, Name: "tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: pair.Cert, corev1.TLSPrivateKeyKey: pair.Key}}
	if err := c.Create(ctx, tls); err != nil {
		t.Fatal(err)
	}
	user := serviceaccount.MakeUsername(narrow, account)
	// The chart's check of the TLS Secret (kind.yaml) reads it as the ServiceAccount too: it is
	// refused before anything is rendered, naming the field, where the operator's own identity
	// would have read it.
	refused := map[string]struct {
		spec      map[string]any
		condition string
		want      []string
	}{
		"plain": {spec: map[string]any{}, condition: "ReleaseFailed", want: []string{user, `cannot create resource "deployments"`}},
		"secured": {spec: map[string]any{"tls": map[string]any{"secretName": "tls"}}, condition: "Irreconcilable",
			want: []string{"spec.tls.secretName", user, `cannot get resource "secrets"`}},
	}
	for name, tc := range refused {
		if err := c.Create(ctx, harness.MyProxy(narrow, name, tc.spec)); err != nil {
			t.Fatal(err)
		}
	}
	for name, tc := range refused {
		mp := harness.WaitForCondition(t, c, narrow, name, tc.condition, "True", timeout)
		_, _, msg := harness.Condition(mp, tc.condition)
		for _, want := range tc.want {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %s says %q, want it to name %q", name, tc.condition, msg, want)
			}
		}
		// The reconciler retries with a growing backoff, and each attempt creates what it may
		// before the refused object; between attempts the failed install's uninstall has
		// removed every object and record of it.
		instance := client.MatchingLabels{"app.kubernetes.io/instance": name}
		harness.Eventually(t, timeout, name+": nothing of the failed release left", func(ctx context.Context) (bool, string) {
			var cms corev1.ConfigMapList
			var svcs corev1.ServiceList
			var deps appsv1.DeploymentList
			for _, list := range []client.ObjectList{&cms, &svcs, &deps} {
				if err := c.List(ctx, list, client.InNamespace(narrow), instance); err != nil {
					return false, err.Error()
				}
			}
			recs := releaseRecords(ctx, t, c, narrow, name)
			n := len(cms.Items) + len(svcs.Items) + len(deps.Items)
			return n == 0 && len(recs) == 0, fmt.Sprintf("%d objects, %d release records", n, len(recs))
		})
	}

	// No ServiceAccount yet: a condition names it. The generated deployer role is enough, the
	// checked and looked-up TLS Secret included.
	ns := newNamespace(t, c, nil)
	own := tls.DeepCopy()
	own.Namespace, own.ResourceVersion = ns, ""
	if err := c.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{"tls": map[string]any{"secretName": own.Name}})); err != nil {
		t.Fatal(err)
	}
	mp := harness.WaitForCondition(t, c, ns, "edge", "Irreconcilable", "True", timeout)
	if _, _, msg := harness.Condition(mp, "Irreconcilable"); !strings.Contains(msg, "ServiceAccount "+ns+"/"+account+" does not exist") {
		t.Errorf("Irreconcilable says %q, want it to name the missing ServiceAccount", msg)
	}
	harness.GrantServiceAccount(t, c, ns, account, deployerRules(t, func(rbacv1.PolicyRule) bool { return true }))
	harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", timeout)
	waitDeployment(t, c, ns, "edge", "created as the tenant", func(*appsv1.Deployment) bool { return true })

	// The ServiceAccount goes first (as when the namespace is deleted): the custom resource is
	// let go, with an Event saying why.
	if err := c.Delete(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: account}}); err != nil {
		t.Fatal(err)
	}
	edge := harness.MyProxy(ns, "edge", nil)
	if err := c.Delete(ctx, edge); err != nil {
		t.Fatal(err)
	}
	harness.WaitForGone(t, c, edge, timeout)
	if ev := harness.WaitForEvent(t, c, ns, "edge", tenancy.ReasonUninstallSkipped, timeout); !strings.Contains(ev, "ServiceAccount "+ns+"/"+account) {
		t.Errorf("the %s Event %q does not name the ServiceAccount", tenancy.ReasonUninstallSkipped, ev)
	}
}

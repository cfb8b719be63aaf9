package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/test/harness"
)

const (
	systemNamespace = "myproxy-operator-system"
	managerSA       = "myproxy-operator-controller-manager"
)

// impersonating writes a kubeconfig that acts as the deployed ServiceAccount: the admin's
// credentials, impersonating system:serviceaccount:<ns>:<sa> and its groups.
func impersonating(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, u := range cfg["users"].([]any) {
		user := u.(map[string]any)["user"].(map[string]any)
		user["as"] = "system:serviceaccount:" + systemNamespace + ":" + managerSA
		user["as-groups"] = []string{"system:serviceaccounts", "system:serviceaccounts:" + systemNamespace, "system:authenticated"}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// make deploy installs the operator into myproxy-operator-system; its Pod is admitted under the
// restricted Pod Security Standard and becomes Available (kwok runs it). No container runs here,
// so the operator binary then runs out of cluster *as the deployed ServiceAccount*: the samples
// reach Deployed only if the deployed RBAC grants everything the operator does.
func TestDeployAsServiceAccount(t *testing.T) {
	env := []string{"KUBECONFIG=" + kubeconfig}
	const img = "registry.example.com/myproxy-operator:e2e"
	harness.Run(t, env, "make", "deploy", "IMG="+img)
	undeployed := false
	t.Cleanup(func() {
		if !undeployed {
			_, _ = harness.RunErr(env, "make", "undeploy")
		}
	})
	deployment := "deployment/myproxy-operator-controller-manager"
	kubectl(t, "wait", "-n", systemNamespace, "--for=condition=Available", deployment, "--timeout=120s")
	if got := kubectl(t, "get", "-n", systemNamespace, deployment, "-o", "jsonpath={.spec.template.spec.containers[0].image}"); got != img {
		t.Errorf("manager image %q, want %q (IMG)", got, img)
	}

	from := time.Now()
	asManager := impersonating(t)
	args := []string{
		"--watches-file=" + filepath.Join(harness.RepoRoot(), "watches.yaml"),
		"--leader-elect", "--leader-election-namespace=" + systemNamespace,
	}
	op := harness.StartOperator(t, operatorBin, asManager, args)
	c := harness.NewClient(t, harness.ConfigFromKubeconfig(t, kubeconfig))
	ns := harness.Namespace(t, c, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	name, _, _ := sampleSpec(t)
	kubectl(t, "apply", "-n", ns, "-f", sample)
	kubectl(t, "wait", "-n", ns, "--for=condition=Deployed", "myproxy/"+name, "--timeout=120s")
	kubectl(t, "wait", "-n", ns, "--for=condition=Available", "myproxy/"+name, "--timeout=120s")
	harness.WaitForEvent(t, c, ns, name, "Installed", 30*time.Second)                         // events: create
	kubectl(t, "get", "lease", "-n", systemNamespace, "myproxy-operator.gateway.example.com") // leases
	kubectl(t, "delete", "-n", ns, "myproxy/"+name, "--timeout=120s")                         // uninstall, finalizer removal
	tenantStaysInTheNamespace(t, ns)
	refusedNothingSince(t, from)
	op.Stop(t)
	tenantServiceAccountBoundsTheRelease(t, c, asManager, args)
	op = harness.StartOperator(t, operatorBin, asManager, args)

	// Undeploy while the operator runs: MyProxies first (uninstalled), then the rest.
	kubectl(t, "apply", "-n", ns, "-f", sample)
	kubectl(t, "wait", "-n", ns, "--for=condition=Deployed", "myproxy/"+name, "--timeout=120s")
	harness.Run(t, env, "make", "undeploy")
	undeployed = true
	op.Stop(t)
	if left := kubectl(t, "get", "deployments,services,configmaps,secrets", "-n", ns, "-l", "app.kubernetes.io/instance="+name, "-o", "name"); left != "" {
		t.Errorf("undeploy orphaned objects of a release:\n%s", left)
	}
	harness.Eventually(t, 120*time.Second, "undeploy removed everything", func(context.Context) (bool, string) {
		out, _ := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "get", "namespace/"+systemNamespace,
			"crd/myproxies.gateway.example.com", "clusterrole/myproxy-operator-manager-role", "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == "", "left: " + out
	})
}

// refusedNothingSince fails t for every request the apiserver's authorizer refused the deployed
// ServiceAccount since from (the audit log is the ground truth; a refusal the operator retried
// past or only logged counts as well).
func refusedNothingSince(t *testing.T, from time.Time) {
	t.Helper()
	sa := "system:serviceaccount:" + systemNamespace + ":" + managerSA
	_, refused := harness.AuditedPermissions(t, filepath.Join(clusterDir, "logs", "audit.log"), sa, from)
	for _, p := range harness.SortedPermissions(refused) {
		t.Errorf("refused to %s: %s", managerSA, p)
	}
}

// make deploy SHARDS=a,b runs the default shard's manager and one per named shard, each
// admitted under the restricted Pod Security Standard and Available (kwok runs them), and
// each told its shard; make undeploy SHARDS=a,b removes them all.
func TestDeployShards(t *testing.T) {
	env := []string{"KUBECONFIG=" + kubeconfig}
	harness.Run(t, env, "make", "deploy", "SHARDS=a,b")
	undeployed := false
	t.Cleanup(func() {
		if !undeployed {
			_, _ = harness.RunErr(env, "make", "undeploy", "SHARDS=a,b")
		}
	})
	for deployment, flags := range map[string]string{
		"myproxy-operator-controller-manager":   "--shards=a,b",
		"myproxy-operator-controller-manager-a": "--shards=a,b --shard=a",
		"myproxy-operator-controller-manager-b": "--shards=a,b --shard=b",
	} {
		kubectl(t, "wait", "-n", systemNamespace, "--for=condition=Available", "deployment/"+deployment, "--timeout=120s")
		args := kubectl(t, "get", "-n", systemNamespace, "deployment/"+deployment, "-o", "jsonpath={.spec.template.spec.containers[0].args}")
		for _, flag := range strings.Fields(flags) {
			if !strings.Contains(args, `"`+flag+`"`) {
				t.Errorf("%s runs with %s, without %s", deployment, args, flag)
			}
		}
	}
	pods := kubectl(t, "get", "pods", "-n", systemNamespace, "-l", "app.kubernetes.io/name=myproxy-operator", "-o", "name")
	if n := len(strings.Fields(pods)); n != 3 {
		t.Errorf("the metrics Service selects %d manager Pods, want 3:\n%s", n, pods)
	}
	harness.Run(t, env, "make", "undeploy", "SHARDS=a,b")
	undeployed = true
	harness.Eventually(t, 120*time.Second, "undeploy removed every shard", func(context.Context) (bool, string) {
		out, _ := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "get", "namespace/"+systemNamespace, "--ignore-not-found", "-o", "name")
		return strings.TrimSpace(out) == "", "left: " + out
	})
}

// hostileProxies are MyProxies that would, if accepted, make the operator write outside their
// namespace (a header name whose carriage returns end nginx.conf's YAML scalar and start a
// Deployment in kube-system) or make nginx serve its TLS key (a header name that closes the
// location and opens another).
var hostileProxies = map[string]string{
	"yaml-injection":  `"X-A\rapiVersion: apps/v1\rkind: Deployment\rmetadata:\r  name: pwn\r  namespace: kube-system\r"`,
	"nginx-injection": `"X-A \"1\"; } location /leak/ { alias /etc/nginx/tls/; autoindex on; } location /z { proxy_set_header X-B"`,
}

// tenantStaysInTheNamespace acts as a user who holds the built-in edit role in ns alone: the
// hostile MyProxies are refused by the apiserver at apply, naming the field; a MyProxy whose
// header value holds what nginx would read as a variable is accepted and deployed; nothing
// appears in kube-system.
func tenantStaysInTheNamespace(t *testing.T, ns string) {
	t.Helper()
	bindTenant(t, ns)
	waitCanI(t, tenantUser, "create", "myproxies.gateway.example.com", ns, "yes")
	for name, header := range hostileProxies {
		manifest := "apiVersion: gateway.example.com/v1alpha1\nkind: MyProxy\nmetadata:\n  name: " + name +
			"\nspec:\n  routes:\n  - path: /a/\n    upstream: http://a\n    setHeaders:\n      " + header + ": v\n"
		out, err := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "--as", tenantUser, "apply", "-n", ns,
			"-f", harness.WriteTemp(t, name+"-*.yaml", []byte(manifest)))
		if err == nil {
			t.Errorf("%s: accepted by kubectl apply:\n%s", name, out)
		} else if !strings.Contains(out, "setHeaders") {
			t.Errorf("%s: the refusal does not name the field:\n%s", name, out)
		}
	}
	literal := "apiVersion: gateway.example.com/v1alpha1\nkind: MyProxy\nmetadata:\n  name: dollar\nspec:\n" +
		"  routes:\n  - path: /a/\n    upstream: http://a\n    setHeaders: {X-Price: \"$5 or $remote_addr\"}\n"
	kubectl(t, "--as", tenantUser, "apply", "-n", ns, "-f", harness.WriteTemp(t, "dollar-*.yaml", []byte(literal)))
	kubectl(t, "wait", "-n", ns, "--for=condition=Deployed", "myproxy/dollar", "--timeout=120s")
	conf := kubectl(t, "get", "-n", ns, "configmap/dollar", "-o", "jsonpath={.data.nginx\\.conf}")
	if !strings.Contains(conf, `proxy_set_header X-Price "${myproxy_dollar}5 or ${myproxy_dollar}remote_addr";`) {
		t.Errorf("the header value is not written literally:\n%s", conf)
	}
	if out, _ := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "get", "deployments", "-n", "kube-system", "-o", "name"); strings.Contains(out, "pwn") {
		t.Errorf("a Deployment appeared in kube-system: %s", out)
	}
	viewerSeesNoManifest(t, ns, "dollar")
	kubectl(t, "--as", tenantUser, "delete", "-n", ns, "myproxy/dollar", "--timeout=120s")
}

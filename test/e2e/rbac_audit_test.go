package e2e

import (
	"context"
	"crypto/tls"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/test/certs"
	"github.com/example/myproxy-operator/test/harness"
)

// notRequested are permissions the operator needs that no request of its own exercises:
// the apiserver checks them while admitting another request.
var notRequested = map[harness.Permission]string{
	{Group: "gateway.example.com", Resource: "myproxies/finalizers", Verb: "update"}: "the OwnerReferencesPermissionEnforcement admission plugin (on in OpenShift) " +
		"requires it to set blockOwnerDeletion in the owner references of release objects",
}

// The deployed RBAC is derived from observation: the operator runs as its deployed
// ServiceAccount through every path (install, a status that follows a lost Pod, upgrade, forced
// upgrade, failing upgrade with repeated Events, TLS with the Secret check and lookup, secure
// metrics, leader election, uninstall, shutdown), the apiserver's audit log records every
// request it makes, and the verbs used per resource must be exactly those granted: none
// refused, none granted unused.
func TestRBACIsWhatTheOperatorUses(t *testing.T) {
	env := []string{"KUBECONFIG=" + kubeconfig}
	harness.Run(t, env, "make", "deploy", "IMG=registry.example.com/myproxy-operator:e2e")
	t.Cleanup(func() { _, _ = harness.RunErr(env, "make", "undeploy") })
	kubectl(t, "wait", "-n", systemNamespace, "--for=condition=Available", "deployment/myproxy-operator-controller-manager", "--timeout=120s")
	c := harness.NewClient(t, harness.ConfigFromKubeconfig(t, kubeconfig))
	ctx := context.Background()
	ns := harness.Namespace(t, c, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})

	// A scraper allowed to read the metrics.
	if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "scraper", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "myproxy-operator-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "scraper", Namespace: ns}}}
	if err := c.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), binding) })

	from := time.Now()
	addr := harness.FreeAddr(t)
	op := harness.StartOperator(t, operatorBin, impersonating(t), []string{
		"--watches-file=" + filepath.Join(harness.RepoRoot(), "watches.yaml"),
		"--leader-elect", "--leader-election-namespace=" + systemNamespace,
		"--metrics-bind-address=" + addr, "--metrics-secure",
	})

	// TLS: the Secret check reads the Secret, the chart looks it up.
	pair := certs.Valid(t, "audited")
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "audited-tls", Namespace: ns}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": pair.Cert, "tls.key": pair.Key}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	mp := harness.MyProxy(ns, "audited", map[string]any{"tls": map[string]any{"secretName": "audited-tls"}})
	if err := c.Create(ctx, mp); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "wait", "-n", ns, "--for=condition=Deployed", "myproxy/audited", "--timeout=120s")

	// The proxy loses its Pod and a quota of none keeps another from being made. No Helm action
	// follows (a Deployment's status does not wake the Helm reconciler): the status controller
	// alone patches the MyProxy's status. Whether the install's own status write already showed
	// the Pod ready depends on timing; this change does not. The next upgrade brings Pods back.
	kubectl(t, "wait", "-n", ns, "--for=condition=Available", "myproxy/audited", "--timeout=120s")
	kubectl(t, "create", "quota", "no-pods", "-n", ns, "--hard=pods=0")
	kubectl(t, "wait", "-n", ns, "--for=jsonpath={.status.hard.pods}=0", "resourcequota/no-pods", "--timeout=120s")
	kubectl(t, "delete", "pods", "-n", ns, "-l", "app.kubernetes.io/instance=audited", "--wait=false")
	kubectl(t, "wait", "-n", ns, "--for=condition=Available=False", "myproxy/audited", "--timeout=120s")
	kubectl(t, "delete", "resourcequota", "no-pods", "-n", ns)

	// Upgrade, then a forced one (Helm replaces the objects instead of patching them).
	// Helm patches the objects that change: the Deployment, the Service and the nginx ConfigMap.
	kubectl(t, "patch", "-n", ns, "myproxy/audited", "--type=merge", "-p",
		`{"spec":{"replicas":2,"service":{"port":8080},"routes":[{"path":"/","upstream":"http://web.default.svc:8080"}]}}`)
	waitJSONPath(t, ns, "deployment/audited", "{.spec.replicas}", "2")
	waitJSONPath(t, ns, "service/audited", "{.spec.ports[0].port}", "8080")
	kubectl(t, "annotate", "-n", ns, "myproxy/audited", "helm.sdk.operatorframework.io/upgrade-force=true")
	kubectl(t, "patch", "-n", ns, "myproxy/audited", "--type=merge", "-p", `{"spec":{"replicas":3}}`)
	waitJSONPath(t, ns, "deployment/audited", "{.spec.replicas}", "3")
	kubectl(t, "annotate", "-n", ns, "myproxy/audited", "helm.sdk.operatorframework.io/upgrade-force-")

	// A failing upgrade, retried until its Event repeats (the recorder patches the Event).
	kubectl(t, "patch", "-n", ns, "myproxy/audited", "--type=merge", "-p",
		`{"spec":{"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[]}}}}}`)
	harness.Eventually(t, 120*time.Second, "a repeated UpgradeFailed Event", func(context.Context) (bool, string) {
		out := kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=audited,reason=UpgradeFailed",
			"-o", "jsonpath={.items[*].count}")
		for _, f := range strings.Fields(out) {
			if n, _ := strconv.Atoi(f); n >= 2 {
				return true, ""
			}
		}
		return false, "counts " + out
	})
	kubectl(t, "patch", "-n", ns, "myproxy/audited", "--type=json", "-p", `[{"op":"remove","path":"/spec/affinity"}]`)
	kubectl(t, "wait", "-n", ns, "--for=condition=Irreconcilable=False", "myproxy/audited", "--timeout=120s")

	// Secure metrics: the operator asks the apiserver to authenticate and authorise the scraper.
	token := strings.TrimSpace(kubectl(t, "create", "token", "scraper", "-n", ns))
	scraper := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed serving certificate
	harness.Eventually(t, 60*time.Second, "metrics for the scraper", func(context.Context) (bool, string) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := scraper.Do(req)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})

	// Uninstall, then shutdown (the Lease is released).
	kubectl(t, "delete", "-n", ns, "myproxy/audited", "--timeout=120s")
	op.Stop(t)

	sa := "system:serviceaccount:" + systemNamespace + ":" + managerSA
	used, refused := harness.AuditedPermissions(t, filepath.Join(clusterDir, "logs", "audit.log"), sa, from)
	granted := grantedTo(t, systemNamespace, managerSA)
	for _, p := range harness.SortedPermissions(refused) {
		t.Errorf("refused: %s", p)
	}
	for _, p := range harness.SortedPermissions(used) {
		if !granted[p] {
			t.Errorf("used but not granted: %s", p)
		}
	}
	for _, p := range harness.SortedPermissions(granted) {
		if !used[p] {
			if p.Verb == "list" && used[harness.Permission{Group: p.Group, Resource: p.Resource, Verb: "watch"}] {
				// client-go's informers open with a watch-list stream where the apiserver serves
				// one (as here), and list when it does not.
				continue
			}
			if why, ok := notRequested[p]; ok {
				t.Logf("granted, exercised by admission rather than a request: %s: %s", p, why)
				continue
			}
			t.Errorf("granted but never used: %s", p)
		}
	}
	t.Logf("%d permissions used, %d granted", len(used), len(granted))
}

func waitJSONPath(t *testing.T, ns, obj, path, want string) {
	t.Helper()
	harness.Eventually(t, 120*time.Second, obj+" "+path+"="+want, func(context.Context) (bool, string) {
		// The object may not exist yet (a Deployment the operator is about to create).
		got, err := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "get", "-n", ns, obj, "-o", "jsonpath="+path)
		if err != nil && !strings.Contains(got, "NotFound") {
			t.Fatalf("kubectl get -n %s %s: %v\n%s", ns, obj, err, got)
		}
		return err == nil && got == want, got
	})
}

// grantedTo expands the rules of every role that config/default binds to the ServiceAccount.
func grantedTo(t *testing.T, namespace, sa string) map[harness.Permission]bool {
	t.Helper()
	objs := map[string]unstructured.Unstructured{}
	var bindings []unstructured.Unstructured
	out := harness.Run(t, nil, harness.Tool(t, "KUSTOMIZE", "kustomize"), "build", filepath.Join(harness.RepoRoot(), "config", "default"))
	for _, doc := range strings.Split(out, "\n---\n") {
		var u unstructured.Unstructured
		if err := yamlToObject(doc, &u.Object); err != nil || u.Object == nil {
			continue
		}
		switch u.GetKind() {
		case "Role", "ClusterRole":
			objs[u.GetKind()+"/"+u.GetName()] = u
		case "RoleBinding", "ClusterRoleBinding":
			bindings = append(bindings, u)
		}
	}
	granted := map[harness.Permission]bool{}
	for _, b := range bindings {
		var binding rbacv1.RoleBinding // ClusterRoleBinding has the same fields
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b.Object, &binding); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(binding.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == namespace
		}) {
			continue
		}
		role, ok := objs[binding.RoleRef.Kind+"/"+binding.RoleRef.Name]
		if !ok {
			t.Fatalf("%s %s binds %s %s, which config/default lacks", b.GetKind(), b.GetName(), binding.RoleRef.Kind, binding.RoleRef.Name)
		}
		var r rbacv1.ClusterRole
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(role.Object, &r); err != nil {
			t.Fatal(err)
		}
		for _, rule := range r.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						granted[harness.Permission{Group: g, Resource: res, Verb: v}] = true
					}
				}
			}
		}
	}
	return granted
}

func yamlToObject(doc string, out *map[string]any) error { return yaml.Unmarshal([]byte(doc), out) }

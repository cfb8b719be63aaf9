package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/example/myproxy-operator/test/harness"
)

const staticSiteWatch = `
- group: web.example.com
  version: v1alpha1
  kind: StaticSite
  chart: helm-charts/staticsite
`

// escapeChart is a chart whose releases, by name, try to leave their namespace: rendering
// into kube-public, rendering a ClusterRole, looking up a Secret of kube-system. Any other name
// renders a ConfigMap of its own, which is what make manifests sees offline.
var escapeChart = map[string]string{
	"Chart.yaml":         "apiVersion: v2\nname: escape\nversion: 0.1.0\n",
	"values.yaml":        "# -- A note the ConfigMap carries.\nnote: hello\n",
	"values.schema.json": `{"type": "object", "properties": {"note": {"type": "string"}}}`,
	"templates/escape.yaml": `{{- if eq .Release.Name "elsewhere" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: planted
  namespace: kube-public
{{- else if eq .Release.Name "clusterwide" }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: escape-{{ .Release.Namespace }}
rules: []
{{- else }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  note: {{ .Values.note | quote }}
  {{- if eq .Release.Name "peek" }}
  stolen: {{ (lookup "v1" "Secret" "kube-system" "bootstrap").data | toJson | quote }}
  {{- end }}
{{- end }}
`,
}

// demoWatch serves the chart `helm create demo` writes, as it comes: no values.schema.json,
// no kind.yaml.
const demoWatch = `
- group: demo.example.com
  version: v1
  kind: Demo
  chart: helm-charts/demo
`

// helmCreatedKindRuns applies, in ns, a Demo of the chart `helm create` writes: the spec schema
// inferred from its values.yaml refuses a wrong type at kubectl apply, a good one becomes
// Ready (its Deployment available), its test hook is never run, and deleting it leaves nothing.
func helmCreatedKindRuns(t *testing.T, ns string) {
	t.Helper()
	bad := "apiVersion: demo.example.com/v1\nkind: Demo\nmetadata:\n  name: bad\nspec:\n  replicaCount: two\n"
	out, err := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "apply", "-n", ns, "-f", harness.WriteTemp(t, "bad-*.yaml", []byte(bad)))
	if err == nil || !strings.Contains(out, "spec.replicaCount") {
		t.Errorf("a Demo with replicaCount: two was not refused naming the field: %v\n%s", err, out)
	}
	if doc := kubectl(t, "explain", "demo.spec.replicaCount"); !strings.Contains(doc, "replicaset count") {
		t.Errorf("kubectl explain does not show the values.yaml comment:\n%s", doc)
	}
	// A key no template reads is accepted, and kubectl warns of it (make deploy installed the
	// kind's warning policy, which the apiserver takes up within seconds); keys the chart reads
	// but values.yaml does not set (nameOverride), or only mentions in comments (under
	// resources), are accepted without a warning.
	typo := harness.WriteTemp(t, "typo-*.yaml", []byte("apiVersion: demo.example.com/v1\nkind: Demo\nmetadata:\n  name: typo\nspec:\n"+
		"  replicaCont: 2\n  nameOverride: web\n  resources: {limits: {cpu: 500m}}\n"))
	harness.Eventually(t, 60*time.Second, "kubectl apply warns of the key no template reads", func(context.Context) (bool, string) {
		out, err := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "apply", "--dry-run=server", "-n", ns, "-f", typo)
		return err == nil && strings.Contains(out, "Warning: ") && strings.Contains(out, "spec.replicaCont: no template of chart demo reads this key") &&
			!strings.Contains(out, "nameOverride") && !strings.Contains(out, "resources"), fmt.Sprintf("%v: %s", err, out)
	})
	good := "apiVersion: demo.example.com/v1\nkind: Demo\nmetadata:\n  name: web\nspec:\n  replicaCount: 2\n  service: {port: 8080}\n"
	kubectl(t, "apply", "-n", ns, "-f", harness.WriteTemp(t, "good-*.yaml", []byte(good)))
	kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "demo/web", "--timeout=120s")
	if got := kubectl(t, "get", "-n", ns, "deployment/web-demo", "-o", "jsonpath={.status.availableReplicas}"); got != "2" {
		t.Errorf("the Demo's Deployment has %q available replicas, want 2 (from the spec)", got)
	}
	if got := kubectl(t, "get", "-n", ns, "service/web-demo", "-o", "jsonpath={.spec.ports[0].port}"); got != "8080" {
		t.Errorf("the Demo's Service port %q, want 8080 (from the spec)", got)
	}
	if left := kubectl(t, "get", "pods", "-n", ns, "--ignore-not-found", "-o", "name", "web-demo-test-connection"); left != "" {
		t.Errorf("the chart's test hook ran: %s", left)
	}
	kubectl(t, "delete", "-n", ns, "demo/web", "--timeout=120s")
	if left := kubectl(t, "get", "deployments,services,serviceaccounts,secrets", "-n", ns, "-l", "app.kubernetes.io/instance=web", "-o", "name"); left != "" {
		t.Errorf("deleting the Demo left objects:\n%s", left)
	}
	if left := kubectl(t, "get", "secrets", "-n", ns, "-l", "owner=helm,name=web", "-o", "name"); left != "" {
		t.Errorf("deleting the Demo left release records:\n%s", left)
	}
}

const escapeWatch = `
- group: web.example.com
  version: v1alpha1
  kind: Escape
  chart: helm-charts/escape
`

// escapesAreRefused applies, in ns, an Escape of each name that tries to leave the namespace:
// each gets ReleaseFailed naming the object, and nothing is written outside ns (nor inside).
func escapesAreRefused(t *testing.T, ns string) {
	t.Helper()
	refused := map[string]string{
		"elsewhere":   "refused to write ConfigMap kube-public/planted",
		"clusterwide": "refused to write ClusterRole.rbac.authorization.k8s.io escape-" + ns + " (cluster-scoped)",
		"peek":        "refused to look up Secret kube-system/bootstrap",
	}
	for name := range refused {
		obj := "apiVersion: web.example.com/v1alpha1\nkind: Escape\nmetadata:\n  name: " + name + "\nspec: {}\n"
		kubectl(t, "apply", "-n", ns, "-f", harness.WriteTemp(t, name+"-*.yaml", []byte(obj)))
	}
	for name, want := range refused {
		kubectl(t, "wait", "-n", ns, "--for=condition=ReleaseFailed", "escape/"+name, "--timeout=60s")
		msg := kubectl(t, "get", "-n", ns, "escape/"+name, "-o", `jsonpath={.status.conditions[?(@.type=="ReleaseFailed")].message}`)
		if !strings.Contains(msg, want) {
			t.Errorf("%s: ReleaseFailed says %q, want it to name %q", name, msg, want)
		}
	}
	for _, args := range [][]string{
		{"get", "configmap/planted", "-n", "kube-public", "--ignore-not-found", "-o", "name"},
		{"get", "clusterrole/escape-" + ns, "--ignore-not-found", "-o", "name"},
		{"get", "configmaps,secrets", "-n", ns, "-l", "owner=helm,name in (elsewhere,clusterwide,peek)", "-o", "name"},
		{"get", "configmap/peek", "-n", ns, "--ignore-not-found", "-o", "name"},
	} {
		if out := kubectl(t, args...); out != "" {
			t.Errorf("kubectl %s: %s, want nothing", strings.Join(args, " "), out)
		}
	}
	for name := range refused {
		kubectl(t, "delete", "-n", ns, "escape/"+name, "--timeout=60s")
	}
}

func staticSite(name, pages string) string {
	return `apiVersion: web.example.com/v1alpha1
kind: StaticSite
metadata:
  name: ` + name + `
spec:
  replicas: 2
  pages:
` + pages
}

// A chart author adds a kind with files alone: the example staticsite chart (with its
// kind.yaml) copied into helm-charts/, an entry in watches.yaml, `make manifests`. No Go file
// changes and the operator binary is the project's own. Deployed with `make deploy`, the
// operator, running as the deployed ServiceAccount, serves both kinds side by side: status
// declared by each chart, Events, drift correction, a clear refusal of a release name that
// the other kind holds, and uninstall; and the built-in edit and view roles cover the new kind.
// A third kind, whose chart renders out of the namespace for some names, is refused for those.
func TestASecondKindThroughFilesAlone(t *testing.T) {
	project := harness.CopyProject(t)
	harness.CopyDir(t, filepath.Join(harness.RepoRoot(), "examples", "staticsite"), filepath.Join(project, "helm-charts", "staticsite"))
	watches, err := os.OpenFile(filepath.Join(project, "watches.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watches.WriteString(staticSiteWatch + escapeWatch + demoWatch); err != nil {
		t.Fatal(err)
	}
	_ = watches.Close()
	for path, content := range escapeChart {
		full := filepath.Join(project, "helm-charts", "escape", path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	harness.Run(t, nil, harness.Tool(t, "HELM", "helm"), "create", filepath.Join(project, "helm-charts", "demo"))
	notes := harness.Run(t, nil, "make", "-C", project, "manifests")
	if !strings.Contains(notes, "Demo.demo.example.com: spec schema inferred from") {
		t.Errorf("make manifests does not say the Demo schema is inferred:\n%s", notes)
	}
	for _, generated := range []string{"config/crd/bases/web.example.com_staticsites.yaml", "config/crd/bases/gateway.example.com_myproxies.yaml"} {
		if _, err := os.Stat(filepath.Join(project, generated)); err != nil {
			t.Fatalf("make manifests did not write %s: %v", generated, err)
		}
	}
	role := readFile(t, filepath.Join(project, "config", "rbac", "role.yaml"))
	if !strings.Contains(role, "resources: [staticsites/status]") {
		t.Fatalf("make manifests did not grant the new kind:\n%s", role)
	}
	if !strings.Contains(role, "resources: [ingresses]") {
		t.Errorf("make manifests did not grant what the Demo chart renders once a tenant sets ingress.enabled:\n%s", role)
	}

	env := []string{"KUBECONFIG=" + kubeconfig}
	kustomize := "KUSTOMIZE=" + harness.Tool(t, "KUSTOMIZE", "kustomize")
	harness.Run(t, env, "make", "-C", project, "deploy", "IMG=registry.example.com/myproxy-operator:e2e", kustomize)
	undeployed := false
	t.Cleanup(func() {
		if !undeployed {
			_, _ = harness.RunErr(env, "make", "-C", project, "undeploy", kustomize)
		}
	})
	kubectl(t, "wait", "--for=condition=Established", "crd/staticsites.web.example.com", "--timeout=60s")
	from := time.Now()
	harness.StartOperatorIn(t, project, operatorBin, impersonating(t), []string{
		"--watches-file=watches.yaml", "--leader-elect", "--leader-election-namespace=" + systemNamespace,
	})
	c := harness.NewClient(t, harness.ConfigFromKubeconfig(t, kubeconfig))
	ns := harness.Namespace(t, c, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})

	// make manifests gave the new kind its user roles: the built-in edit and view roles, bound
	// in the namespace, let their users create and read StaticSites (once the aggregation
	// controller has folded them in), and view does not let its user create them.
	kubectl(t, "create", "rolebinding", "site-editor", "-n", ns, "--clusterrole=edit", "--user=site-editor")
	kubectl(t, "create", "rolebinding", "site-viewer", "-n", ns, "--clusterrole=view", "--user=site-viewer")
	for _, can := range []struct{ user, verb, want string }{
		{"site-editor", "create", "yes"}, {"site-viewer", "list", "yes"}, {"site-viewer", "create", "no"},
	} {
		waitCanI(t, can.user, can.verb, "staticsites.web.example.com", ns, can.want)
	}

	proxy, _, _ := sampleSpec(t)
	kubectl(t, "apply", "-n", ns, "-f", filepath.Join(harness.RepoRoot(), sample))
	site := harness.WriteTemp(t, "site-*.yaml", []byte(staticSite("docs", "    index.html: hello\n    about.html: about\n")))
	kubectl(t, "apply", "-n", ns, "-f", site)
	for _, res := range []string{"myproxy/" + proxy, "staticsite/docs"} {
		kubectl(t, "wait", "-n", ns, "--for=condition=Deployed", res, "--timeout=120s")
		kubectl(t, "wait", "-n", ns, "--for=condition=Ready", res, "--timeout=120s")
	}
	kubectl(t, "wait", "-n", ns, "--for=condition=Serving", "staticsite/docs", "--timeout=60s")
	kubectl(t, "wait", "-n", ns, "--for=condition=Available", "myproxy/"+proxy, "--timeout=60s")
	want := "2 2 http://docs." + ns + ".svc:80/"
	if got := kubectl(t, "get", "-n", ns, "site/docs", "-o", "jsonpath={.status.pages} {.status.availableReplicas} {.status.url}"); got != want {
		t.Errorf("StaticSite status %q, want %q", got, want)
	}
	if got := kubectl(t, "get", "-n", ns, "site/docs"); !strings.Contains(got, "http://docs."+ns+".svc:80/") || !strings.Contains(got, "PAGES") {
		t.Errorf("kubectl get shows no declared columns:\n%s", got)
	}
	harness.WaitForEvent(t, c, ns, "docs", "Installed", 30*time.Second)

	// Status follows the objects: a third page reaches status.pages.
	kubectl(t, "patch", "-n", ns, "site/docs", "--type=merge", "-p", `{"spec":{"pages":{"contact.html":"mail us"}}}`)
	harness.Eventually(t, 60*time.Second, "status.pages follows the ConfigMap", func(context.Context) (bool, string) {
		got := kubectl(t, "get", "-n", ns, "site/docs", "-o", "jsonpath={.status.pages}")
		return got == "3", "pages=" + got
	})

	// Drift: a deleted object of the release comes back.
	before := kubectl(t, "get", "-n", ns, "configmap/docs", "-o", "jsonpath={.metadata.uid}")
	kubectl(t, "delete", "-n", ns, "configmap/docs")
	harness.Eventually(t, 60*time.Second, "the deleted ConfigMap is restored", func(context.Context) (bool, string) {
		out, _ := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "get", "-n", ns, "configmap/docs", "-o", "jsonpath={.metadata.uid}")
		return out != "" && out != before && !strings.Contains(out, "NotFound"), "uid " + out
	})

	// A StaticSite named as the MyProxy would share its Helm release: it is refused with a
	// condition naming the holder, and neither its install nor its deletion touches the proxy.
	proxyUID := kubectl(t, "get", "-n", ns, "deployment/"+proxy, "-o", "jsonpath={.metadata.uid}")
	clash := harness.WriteTemp(t, "clash-*.yaml", []byte(staticSite(proxy, "    index.html: clash\n")))
	kubectl(t, "apply", "-n", ns, "-f", clash)
	kubectl(t, "wait", "-n", ns, "--for=condition=ReleaseFailed", "staticsite/"+proxy, "--timeout=60s")
	msg := kubectl(t, "get", "-n", ns, "staticsite/"+proxy, "-o", `jsonpath={.status.conditions[?(@.type=="ReleaseFailed")].message}`)
	if !strings.Contains(msg, `is taken in namespace "`+ns+`" by MyProxy "`+proxy+`"`) {
		t.Errorf("ReleaseFailed message %q does not name the MyProxy holding the name", msg)
	}
	kubectl(t, "delete", "-n", ns, "staticsite/"+proxy, "--timeout=60s")
	if got := kubectl(t, "get", "-n", ns, "deployment/"+proxy, "-o", "jsonpath={.metadata.uid}"); got != proxyUID {
		t.Errorf("the proxy's Deployment changed (uid %s, was %s)", got, proxyUID)
	}
	if got := kubectl(t, "get", "-n", ns, "configmap/"+proxy, "-o", "jsonpath={.metadata.labels.app\\.kubernetes\\.io/name}"); got != "myproxy" {
		t.Errorf("the proxy's ConfigMap is now %q's", got)
	}
	kubectl(t, "wait", "-n", ns, "--for=condition=Available", "myproxy/"+proxy, "--timeout=60s")

	// Uninstall: the site's objects and release records go; the proxy stays.
	kubectl(t, "delete", "-n", ns, "staticsite/docs", "--timeout=120s")
	if left := kubectl(t, "get", "deployments,services,configmaps,secrets", "-n", ns, "-l", "app.kubernetes.io/instance=docs", "-o", "name"); left != "" {
		t.Errorf("uninstall left objects of the site:\n%s", left)
	}
	if left := kubectl(t, "get", "secrets", "-n", ns, "-l", "owner=helm,name=docs", "-o", "name"); left != "" {
		t.Errorf("uninstall left release records:\n%s", left)
	}
	kubectl(t, "delete", "-n", ns, "myproxy/"+proxy, "--timeout=120s")

	// A fourth kind, the chart `helm create` writes, in a namespace whose Pod Security allows
	// its Pods (it sets no securityContext).
	helmCreatedKindRuns(t, harness.Namespace(t, c, nil))

	// A third kind whose chart tries to leave the namespace writes nothing, and the operator
	// sends no request that its rights would refuse (the confinement refuses first).
	escapesAreRefused(t, ns)
	refusedNothingSince(t, from)
	harness.Run(t, env, "make", "-C", project, "undeploy", kustomize)
	undeployed = true
}

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/myproxy-operator/test/harness"
)

// versionsGroup keeps the kind of this test apart from the MyProxies of the other tests, which
// share the cluster.
const versionsGroup = "versions.example.com"

// auditedUpdates counts, by namespace/name, the updates of the custom resources of resource (not
// their status) that user sent since from and the apiserver answered 200: the audit log is the
// ground truth of what was rewritten.
func auditedUpdates(t *testing.T, user, resource string, from time.Time) map[string]int {
	t.Helper()
	f, err := os.Open(filepath.Join(clusterDir, "logs", "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			Stage, Verb     string
			RequestReceived time.Time `json:"requestReceivedTimestamp"`
			User            struct{ Username string }
			ObjectRef       *struct{ Resource, Subresource, Namespace, Name string } `json:"objectRef"`
			ResponseStatus  *struct{ Code int }                                      `json:"responseStatus"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Stage != "ResponseComplete" || e.Verb != "update" || e.User.Username != user ||
			e.RequestReceived.Before(from) || e.ObjectRef == nil || e.ObjectRef.Resource != resource || e.ObjectRef.Subresource != "" ||
			e.ResponseStatus == nil || e.ResponseStatus.Code != 200 {
			continue
		}
		out[e.ObjectRef.Namespace+"/"+e.ObjectRef.Name]++
	}
	return out
}

// A chart author renames a value (replicas to replicaCount), as a kind's API changes with its
// chart. Without a declaration, make manifests refuses it, naming the field. Declared as a new
// version in kind.yaml, make manifests keeps the old version's schema beside the new one; make
// install, and the operator restarted (as make run runs it, out of the cluster, as the manager
// role make manifests generated) converts between them: every resource keeps its value, read at
// either version; no Deployment changes; every resource stored at the old version is rewritten
// once, even across a kill -9 of the operator in the middle (the audit log counts the rewrites),
// and the CRD's storedVersions trimmed; the old version still takes writes, scale included.
func TestAKindsAPIChangesWithItsChart(t *testing.T) {
	project := harness.CopyProject(t)
	harness.EditFile(t, filepath.Join(project, "watches.yaml"), "group: gateway.example.com", "group: "+versionsGroup)
	env := []string{"KUBECONFIG=" + kubeconfig}
	kustomize := "KUSTOMIZE=" + harness.Tool(t, "KUSTOMIZE", "kustomize")
	harness.Run(t, nil, "make", "-C", project, "manifests")
	harness.Run(t, env, "make", "-C", project, "install", kustomize)
	crd := "myproxies." + versionsGroup
	// Bounded: after a failure, resources whose finalizer the stopped operator can no longer
	// remove keep the CRD terminating.
	t.Cleanup(func() {
		_, _ = harness.RunErr(env, "kubectl", "delete", "crd", crd, "--ignore-not-found", "--timeout=60s")
	})
	kubectl(t, "wait", "--for=condition=Established", "crd/"+crd, "--timeout=60s")
	c := harness.NewClient(t, harness.ConfigFromKubeconfig(t, kubeconfig))
	ns := harness.Namespace(t, c, nil)
	asManager := func() string {
		return harness.ServiceAccountKubeconfig(t, c, harness.ConfigFromKubeconfig(t, kubeconfig), ns, fmt.Sprintf("manager-%d", time.Now().UnixNano()%100000),
			[]byte(readFile(t, filepath.Join(project, "config", "rbac", "role.yaml"))))
	}
	run := func(kubeconfig string, args ...string) *harness.Operator {
		return harness.StartOperatorIn(t, project, operatorBin, kubeconfig, append([]string{"--watches-file=watches.yaml",
			"--metrics-bind-address=0", "--health-probe-bind-address=0"}, args...), "WATCH_NAMESPACE="+ns)
	}
	op := run(asManager())

	const n = 40
	replicas := func(i int) int { return i%3 + 1 }
	var manifests strings.Builder
	for i := range n {
		fmt.Fprintf(&manifests, "---\napiVersion: %s/v1alpha1\nkind: MyProxy\nmetadata: {name: proxy%d}\nspec: {replicas: %d}\n", versionsGroup, i, replicas(i))
	}
	kubectl(t, "apply", "-n", ns, "-f", harness.WriteTemp(t, "proxies-*.yaml", []byte(manifests.String())))
	kubectl(t, "wait", "-n", ns, "--for=condition=Deployed", "myproxies."+versionsGroup, "--all", "--timeout=180s")
	deployments := func() string {
		return kubectl(t, "get", "deployments", "-n", ns, "-o", `jsonpath={range .items[*]}{.metadata.name} {.metadata.generation} {.spec.replicas}{"\n"}{end}`)
	}
	before := deployments()
	op.Stop(t)

	// The rename, as a chart author makes it.
	harness.RenameReplicas(t, project)
	out, err := harness.RunErr(nil, "make", "-C", project, "manifests")
	if err == nil || !strings.Contains(out, "spec.replicas: v1alpha1 has no spec.replicas") {
		t.Fatalf("make manifests took the rename without a declaration (%v):\n%s", err, out)
	}
	// Declared: a new version, with the move from the old one. It also gives a route a field
	// that v1alpha1's routes do not have.
	harness.DeclareReplicasRenamed(t, project)
	harness.EditFile(t, filepath.Join(project, "helm-charts", "myproxy", "values.schema.json"), `"timeoutSeconds": {`,
		`"retries": {"description": "Times a failed request is tried again.", "type": "integer", "minimum": 0, "maximum": 5},
          "timeoutSeconds": {`)
	harness.Run(t, nil, "make", "-C", project, "manifests")
	harness.Run(t, env, "make", "-C", project, "install", kustomize)

	// The operator restarted on the new chart; its rewrites are slowed by a low request rate so
	// that a kill -9 lands while it migrates.
	from := time.Now()
	account := asManager()
	user := managerUser(t, account)
	webhook := "--webhook-bind-address=" + harness.FreeAddr(t)
	op = run(account, webhook, "--kube-api-qps=2", "--kube-api-burst=1")
	harness.Eventually(t, 180*time.Second, "the migration under way", func(context.Context) (bool, string) {
		done := len(auditedUpdates(t, user, "myproxies", from))
		return done > 0, fmt.Sprintf("%d rewritten", done)
	})
	op.Kill()
	if done := len(auditedUpdates(t, user, "myproxies", from)); done >= n {
		t.Fatalf("the operator rewrote all %d resources before it was killed", done)
	}
	// The release of a resource whose upgrade the kill interrupted is unlocked at once: the killed
	// process writes nothing more.
	op = run(account, webhook, "--unlock-pending-after=1s")
	harness.Eventually(t, 180*time.Second, "storedVersions trimmed to v1beta1", func(context.Context) (bool, string) {
		got := kubectl(t, "get", "crd", crd, "-o", "jsonpath={.status.storedVersions}")
		return got == `["v1beta1"]`, got
	})
	rewrites := auditedUpdates(t, user, "myproxies", from)
	for i := range n {
		if got := rewrites[fmt.Sprintf("%s/proxy%d", ns, i)]; got != 1 {
			t.Errorf("proxy%d was rewritten %d times, want once", i, got)
		}
	}

	// Every value kept, at either version; no Deployment changed; no release lost a value.
	at := func(version, field string) string { // standard output alone: kubectl warns of a deprecated version on standard error
		out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", "myproxies."+version+"."+versionsGroup, "-n", ns, "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.spec.`+field+`} {end}`).Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	var want strings.Builder
	for i := range n {
		fmt.Fprintf(&want, "proxy%d=%d ", i, replicas(i))
	}
	for version, field := range map[string]string{"v1beta1": "replicaCount", "v1alpha1": "replicas"} {
		if got := sortedFields(at(version, field)); got != sortedFields(want.String()) {
			t.Errorf("read at %s: %s\nwant %s", version, got, want.String())
		}
	}
	harness.Consistently(t, 5*time.Second, "no Deployment changes", func(context.Context) (bool, string) {
		now := deployments()
		return now == before, now
	})
	for _, i := range []int{0, 1, 2} {
		values := harness.Run(t, env, harness.Tool(t, "HELM", "helm"), "get", "values", "-n", ns, fmt.Sprintf("proxy%d", i), "-o", "json")
		if !strings.Contains(values, fmt.Sprintf(`"replicaCount":%d`, replicas(i))) {
			t.Errorf("proxy%d's release values %s: want replicaCount %d", i, values, replicas(i))
		}
	}
	// The old version still takes writes: a scale, and a new resource.
	kubectl(t, "scale", "-n", ns, "myproxy.v1alpha1."+versionsGroup+"/proxy0", "--replicas=3")
	waitJSONPath(t, ns, "deployment/proxy0", "{.spec.replicas}", "3")
	kubectl(t, "apply", "-n", ns, "-f", harness.WriteTemp(t, "late-*.yaml", []byte(fmt.Sprintf(
		"apiVersion: %s/v1alpha1\nkind: MyProxy\nmetadata: {name: late}\nspec: {replicas: 2}\n", versionsGroup))))
	waitJSONPath(t, ns, "deployment/late", "{.spec.replicas}", "2")
	if got := kubectl(t, "get", "myproxy."+versionsGroup, "-n", ns, "late", "-o", "jsonpath={.spec.replicaCount}"); got != "2" {
		t.Errorf("written at v1alpha1, read at v1beta1: replicaCount %q", got)
	}
	oldClientKeepsNewerFields(t, ns)
	kubectl(t, "delete", "myproxies."+versionsGroup, "-n", ns, "--all", "--timeout=180s")
	op.Stop(t)
}

// oldClientKeepsNewerFields writes a MyProxy at v1beta1 with a route's retries, which v1alpha1's
// routes lack; a client of v1alpha1 reads it, reorders its routes, changes its replicas and
// replaces it whole: the retries stay with their route.
func oldClientKeepsNewerFields(t *testing.T, ns string) {
	t.Helper()
	kubectl(t, "apply", "-n", ns, "-f", harness.WriteTemp(t, "routed-*.yaml", []byte(fmt.Sprintf(
		"apiVersion: %s/v1beta1\nkind: MyProxy\nmetadata: {name: routed}\nspec:\n  replicaCount: 1\n  routes:\n"+
			"  - {path: /b, upstream: 'http://b.example'}\n  - {path: /a, upstream: 'http://a.example', retries: 2}\n", versionsGroup))))
	raw, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", "myproxy.v1alpha1."+versionsGroup, "-n", ns, "routed", "-o", "json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var whole map[string]any
	if err := json.Unmarshal(raw, &whole); err != nil {
		t.Fatal(err)
	}
	spec, _ := whole["spec"].(map[string]any)
	routes, _ := spec["routes"].([]any)
	if len(routes) != 2 || slices.ContainsFunc(routes, func(r any) bool { _, ok := r.(map[string]any)["retries"]; return ok }) {
		t.Fatalf("read at v1alpha1, routes %v: want two, without retries", routes)
	}
	spec["routes"], spec["replicas"] = []any{routes[1], routes[0]}, 2
	edited, _ := json.Marshal(whole)
	kubectl(t, "replace", "-f", harness.WriteTemp(t, "routed-*.json", edited))
	got := kubectl(t, "get", "myproxy.v1beta1."+versionsGroup, "-n", ns, "routed", "-o",
		`jsonpath={.spec.replicaCount} {.spec.routes[0].path}:{.spec.routes[0].retries} {.spec.routes[1].path}:{.spec.routes[1].retries}`)
	if want := "2 /a:2 /b:"; got != want {
		t.Errorf("replaced at v1alpha1, read at v1beta1: %q, want %q", got, want)
	}
}

// managerUser is the user a ServiceAccount kubeconfig authenticates as.
func managerUser(t *testing.T, kubeconfig string) string {
	t.Helper()
	return strings.TrimSpace(harness.Run(t, nil, "kubectl", "--kubeconfig", kubeconfig, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"))
}

// sortedFields sorts the space-separated fields of s.
func sortedFields(s string) string {
	f := strings.Fields(s)
	slices.Sort(f)
	return strings.Join(f, " ")
}

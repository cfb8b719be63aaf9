package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/test/harness"
)

func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return harness.RunErr(nil, "kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
}

// Status mirrors the release's Deployment and Service within seconds, and the scale
// subresource drives spec.replicas.
func TestStatusAndScale(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{"replicas": 2})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", timeout)
	mp := harness.WaitForCondition(t, c, ns, "edge", "Available", "False", timeout)
	dep := waitDeployment(t, c, ns, "edge", "installed", func(*appsv1.Deployment) bool { return true })

	wantSelector := metav1.FormatLabelSelector(dep.Spec.Selector)
	harness.Eventually(t, timeout, "status fields", func(ctx context.Context) (bool, string) {
		mp, _ = harness.GetMyProxy(ctx, c, ns, "edge")
		st, _, _ := unstructured.NestedMap(mp.Object, "status")
		ok := st["url"] == fmt.Sprintf("http://edge.%s.svc:80", ns) && st["selector"] == wantSelector &&
			st["observedGeneration"] == mp.GetGeneration() && st["image"] == dep.Spec.Template.Spec.Containers[0].Image
		return ok, fmt.Sprintf("status %v (generation %d)", st, mp.GetGeneration())
	})

	// The Deployment becomes available (envtest has no controllers: write its status as they would).
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
			Reason: "MinimumReplicasAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
	if err := c.Status().Update(ctx, dep); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	harness.Eventually(t, timeout, "readyReplicas and Available follow the Deployment", func(ctx context.Context) (bool, string) {
		mp, _ = harness.GetMyProxy(ctx, c, ns, "edge")
		ready, _, _ := unstructured.NestedInt64(mp.Object, "status", "readyReplicas")
		s, _, _ := harness.Condition(mp, "Available")
		return ready == 2 && s == "True", fmt.Sprintf("readyReplicas=%d Available=%s", ready, s)
	})
	t.Logf("status followed the Deployment in %s", time.Since(start).Round(time.Millisecond))
	if out, err := kubectl(t, "wait", "-n", ns, "--for=condition=Available", "myproxy/edge", "--timeout=5s"); err != nil {
		t.Errorf("kubectl wait --for=condition=Available: %v\n%s", err, out)
	}

	// kubectl scale goes through the scale subresource to spec.replicas, then to the Deployment.
	if out, err := kubectl(t, "scale", "-n", ns, "myproxy/edge", "--replicas=3"); err != nil {
		t.Fatalf("kubectl scale: %v\n%s", err, out)
	}
	waitDeployment(t, c, ns, "edge", "scaled through the scale subresource", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })
	out, err := kubectl(t, "get", "-n", ns, "myproxy/edge", "-o", "jsonpath={.spec.replicas} {.status.selector}", "--subresource=scale")
	if err != nil || !strings.HasPrefix(out, "3 ") {
		// The scale subresource reports spec.replicas and the selector an HPA needs.
		t.Errorf("scale subresource: %q (%v)", out, err)
	}
	harness.Eventually(t, timeout, "observedGeneration follows the scale", func(ctx context.Context) (bool, string) {
		mp, _ = harness.GetMyProxy(ctx, c, ns, "edge")
		g, _, _ := unstructured.NestedInt64(mp.Object, "status", "observedGeneration")
		return g == mp.GetGeneration(), fmt.Sprintf("observedGeneration=%d generation=%d", g, mp.GetGeneration())
	})
}

// Bad MyProxies are refused at kubectl apply, by the CRD generated from values.schema.json, with
// a message that names the field.
func TestInvalidMyProxiesAreRefusedByKubectl(t *testing.T) {
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	longName := strings.Repeat("a", 54)
	cases := []struct {
		name, spec, want string
	}{
		{name: "negative replicas", spec: `replicas: -1`, want: "spec.replicas"},
		{name: "absurd replicas", spec: `replicas: 100000`, want: "spec.replicas"},
		{name: "malformed image", spec: `image: "Nginx Latest!"`, want: "spec.image"},
		{name: "unknown field", spec: `replicaCount: 2`, want: `unknown field "spec.replicaCount"`},
		{name: "route path without slash", spec: "routes:\n  - {path: api, upstream: 'http://api:80'}", want: "spec.routes[0].path"},
		{name: "duplicate route paths", spec: "routes:\n  - {path: /a, upstream: 'http://a:80'}\n  - {path: /a, upstream: 'http://b:80'}",
			want: "routes: each path may appear only once"},
		{name: "upstream not http(s)", spec: "routes:\n  - {path: /a, upstream: 'ftp://files:21'}", want: "spec.routes[0].upstream"},
		{name: "service port out of range", spec: "service: {port: 70000}", want: "spec.service.port"},
		{name: "unknown service type", spec: "service: {type: External}", want: "spec.service.type"},
		{name: longName, spec: `replicas: 1`, want: "must be at most 53 characters"},
		{name: "9lives", spec: `replicas: 1`, want: "must start with a letter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "bad"
			if tc.name == longName || tc.name == "9lives" {
				name = tc.name
			}
			doc := fmt.Sprintf("apiVersion: gateway.example.com/v1alpha1\nkind: MyProxy\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  %s\n",
				name, ns, strings.ReplaceAll(tc.spec, "\n", "\n  "))
			path := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := kubectl(t, "apply", "-f", path)
			if err == nil {
				t.Fatalf("kubectl apply accepted it:\n%s\n%s", doc, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("refusal does not name %q:\n%s", tc.want, out)
			}
		})
	}
	// The refusals left nothing behind.
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(harness.MyProxyGVK.GroupVersion().WithKind("MyProxyList"))
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil || len(list.Items) != 0 {
		t.Errorf("MyProxies after refusals: %d (err %v)", len(list.Items), err)
	}
}

// The Helm reconciler's status writes keep the fields the status controller owns: a reader
// never sees status.url go while a MyProxy is upgraded (helm-operator-plugins' updater alone
// writes status as {conditions, deployedRelease}). No version of it carries the rendered
// manifest, which the plugins' updater puts in deployedRelease.
func TestStatusFieldsStayThroughAnUpgrade(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	const name = "steady"
	if err := c.Create(ctx, harness.MyProxy(ns, name, map[string]any{"replicas": 1})); err != nil {
		t.Fatal(err)
	}
	manifest := func(u *unstructured.Unstructured) string {
		m, _, _ := unstructured.NestedString(u.Object, "status", "deployedRelease", "manifest")
		return m
	}
	// fields are the status without the manifest, for messages.
	fields := func(u *unstructured.Unstructured) map[string]any {
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		delete(st, "deployedRelease")
		return st
	}
	var mp *unstructured.Unstructured
	harness.Eventually(t, timeout, "the status fields of the installed release", func(ctx context.Context) (bool, string) {
		var err error
		if mp, err = harness.GetMyProxy(ctx, c, ns, name); err != nil {
			return false, err.Error()
		}
		g, _, _ := unstructured.NestedInt64(mp.Object, "status", "observedGeneration")
		url, _, _ := unstructured.NestedString(mp.Object, "status", "url")
		return url != "" && g == mp.GetGeneration(), fmt.Sprintf("status %v", fields(mp))
	})
	if name, _, _ := unstructured.NestedString(mp.Object, "status", "deployedRelease", "name"); name != "steady" {
		t.Errorf("status.deployedRelease.name is %q, want the release's", name)
	}

	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(harness.MyProxyGVK.GroupVersion().WithKind(harness.MyProxyGVK.Kind + "List"))
	w, err := wc.Watch(ctx, list, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: mp.GetResourceVersion(), FieldSelector: "metadata.name=" + name}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	patchSpec(t, c, ns, name, `{"replicas":2}`)

	// Every version of the MyProxy from here on, until the upgraded release is deployed and its
	// generation observed, has the url.
	upgraded, deadline := false, time.After(timeout)
	for {
		select {
		case ev, open := <-w.ResultChan():
			if !open {
				t.Fatal("the watch of the MyProxy closed")
			}
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("watch event %s: %v", ev.Type, ev.Object)
			}
			if url, _, _ := unstructured.NestedString(u.Object, "status", "url"); url == "" {
				t.Fatalf("version %s (generation %d) has no status.url: status %v", u.GetResourceVersion(), u.GetGeneration(), fields(u))
			}
			if manifest(u) != "" {
				t.Fatalf("version %s carries the rendered manifest in status", u.GetResourceVersion())
			}
			// The reconciler's write after the upgrade says so in Deployed.
			_, reason, _ := harness.Condition(u, "Deployed")
			upgraded = upgraded || reason == "UpgradeSuccessful"
			if g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); upgraded && g == u.GetGeneration() {
				return
			}
		case <-deadline:
			t.Fatalf("the upgrade was not reported within %s (Deployed by the upgrade seen: %t)", timeout, upgraded)
		}
	}
}

package status

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
)

var myProxyGVK = schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"}

// readerCache serves a cache's reads from a client; nothing else of the cache is used.
type readerCache struct {
	cache.Cache
	reader client.Reader
}

func (c readerCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reader.Get(ctx, key, obj, opts...)
}

// watchRecorder is a controller that records the watches added to it.
type watchRecorder struct {
	controller.Controller
	mu      sync.Mutex
	sources int
}

func (w *watchRecorder) Watch(source.TypedSource[ctrl.Request]) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sources++
	return nil
}

const proxyManifest = `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: edge
  labels: {app.kubernetes.io/component: proxy}
---
apiVersion: v1
kind: Service
metadata:
  name: edge
  labels: {app.kubernetes.io/component: proxy}
`

// statusReconciler returns a Reconciler for the project's MyProxy chart over objs, set up
// as SetupWithManager would, without a manager.
func statusReconciler(t *testing.T, objs ...client.Object) (*Reconciler, client.Client, *watchRecorder) {
	t.Helper()
	decl, err := chartapi.LoadCompiled(filepath.Join("..", "..", "helm-charts", "myproxy"))
	if err != nil {
		t.Fatal(err)
	}
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(myProxyGVK)
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).WithStatusSubresource(cr).Build()
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{myProxyGVK, appsv1.SchemeGroupVersion.WithKind("Deployment"), corev1.SchemeGroupVersion.WithKind("Service")} {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	watches := &watchRecorder{}
	r := &Reconciler{Client: c, GVK: myProxyGVK, Declaration: decl, Applied: NewAppliedGenerations(nil, myProxyGVK, Namespaced(mapper)),
		objects: readerCache{reader: c}, controller: watches}
	return r, c, watches
}

func myProxy(conditions ...any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"replicas": int64(2)},
	}}
	u.SetGroupVersionKind(myProxyGVK)
	u.SetNamespace("team")
	u.SetName("edge")
	u.SetGeneration(1)
	if len(conditions) > 0 {
		u.Object["status"] = map[string]any{"conditions": conditions,
			"deployedRelease": map[string]any{"name": "edge"}}
	}
	return u
}

func getMyProxy(t *testing.T, c client.Client, key types.NamespacedName) *unstructured.Unstructured {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(myProxyGVK)
	if err := c.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// condition is a True condition of a type, as a stored status holds it.
func condition(typ string) map[string]any {
	return map[string]any{"type": typ, "status": "True", "reason": "Test", "lastTransitionTime": "2026-01-01T00:00:00Z"}
}

func TestReconcilerWritesTheDeclaredStatus(t *testing.T) {
	labels := map[string]string{"app.kubernetes.io/component": "proxy", "app.kubernetes.io/instance": "edge"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "edge", Labels: labels, Generation: 1},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1"}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
	}
	service := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "edge", Labels: labels},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	cr := myProxy(condition(names.ConditionDeployed))
	r, c, watches := statusReconciler(t, cr, deployment, service)
	key := types.NamespacedName{Namespace: "team", Name: "edge"}
	// Before the Helm reconciler's post hook has told it the release's objects (a restart),
	// it writes nothing.
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if got := getMyProxy(t, c, key); len(got.Object["status"].(map[string]any)) != 2 || watches.sources != 0 {
		t.Fatalf("status %v written, or %d kinds watched, before the release's objects were known", got.Object["status"], watches.sources)
	}
	if err := r.Applied.Applied(cr, &release.Release{Manifest: proxyManifest}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	got := getMyProxy(t, c, key)
	tests := []struct {
		field []string
		want  any
	}{
		{field: []string{"replicas"}, want: int64(2)},
		{field: []string{"readyReplicas"}, want: int64(2)},
		{field: []string{"image"}, want: "nginx:1"},
		{field: []string{"url"}, want: "http://edge.team.svc:80"},
		{field: []string{"selector"}, want: "app.kubernetes.io/component=proxy,app.kubernetes.io/instance=edge"},
	}
	for _, tt := range tests {
		v, _, _ := unstructured.NestedFieldNoCopy(got.Object, append([]string{"status"}, tt.field...)...)
		if v != tt.want {
			t.Errorf("status.%v = %v (%T), want %v", tt.field, v, v, tt.want)
		}
	}
	conds := map[string]string{}
	list, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	for _, item := range list {
		m := item.(map[string]any)
		conds[m["type"].(string)] = m["status"].(string)
	}
	for _, typ := range []string{names.ConditionDeployed, names.ConditionReady, "Available"} {
		if conds[typ] != "True" {
			t.Errorf("condition %s is %q, want True (all: %v)", typ, conds[typ], conds)
		}
	}
	if watches.sources != 2 {
		t.Errorf("%d kinds watched, want 2 (the Deployment's and the Service's)", watches.sources)
	}
}

func TestReconcilerWaitsForTheHelmReconciler(t *testing.T) {
	r, c, watches := statusReconciler(t, myProxy())
	key := types.NamespacedName{Namespace: "team", Name: "edge"}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	got := getMyProxy(t, c, key)
	if _, found := got.Object["status"]; found || watches.sources != 0 {
		t.Errorf("status written (%v) or kinds watched (%d) before the Helm reconciler's first status", got.Object["status"], watches.sources)
	}
}

func TestReconcilerForgetsDeletedResources(t *testing.T) {
	r, _, _ := statusReconciler(t)
	key := types.NamespacedName{Namespace: "team", Name: "gone"}
	var gone []types.NamespacedName
	r.Gone = func(k types.NamespacedName) { gone = append(gone, k) }
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if len(gone) != 1 || gone[0] != key {
		t.Errorf("Gone told %v, want %v", gone, key)
	}
}

// An install or upgrade writes status once: the updater's write, filled by the Reconciler,
// carries what the Reconciler would have patched next, and it then finds nothing to patch.
func TestTheUpdaterWriteLeavesTheReconcilerNothingToPatch(t *testing.T) {
	labels := map[string]string{"app.kubernetes.io/component": "proxy", "app.kubernetes.io/instance": "edge"}
	service := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "edge", Labels: labels},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	cr := myProxy(condition(names.ConditionInitialized))
	r, c, _ := statusReconciler(t, cr, service)
	var patches int
	r.Client = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}})
	key := types.NamespacedName{Namespace: "team", Name: "edge"}
	// The post hook runs before the updater writes: the release and its generation are known.
	if err := r.Applied.Applied(cr, &release.Release{Manifest: proxyManifest}); err != nil {
		t.Fatal(err)
	}
	// The updater's write, as it builds it: its conditions and deployedRelease only.
	written := getMyProxy(t, c, key)
	written.Object["status"] = map[string]any{"conditions": []any{condition(names.ConditionDeployed)},
		"deployedRelease": map[string]any{"name": "edge", "manifest": proxyManifest}}
	if err := pluginWrite(c, PluginWrites{Cached: c, GVK: myProxyGVK, Fill: r.Fill}, written); err != nil {
		t.Fatal(err)
	}
	got := getMyProxy(t, c, key)
	if v, _, _ := unstructured.NestedFieldNoCopy(got.Object, "status", "url"); v != "http://edge.team.svc:80" {
		t.Errorf("status.url = %v after the updater's write, want the Reconciler's", v)
	}
	if v, _, _ := unstructured.NestedFieldNoCopy(got.Object, "status", names.StatusObservedGeneration); v != int64(1) {
		t.Errorf("status.observedGeneration = %v after the updater's write, want 1", v)
	}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if patches != 0 {
		t.Errorf("the Reconciler patched %d times after the updater's filled write, want 0", patches)
	}
	// A change the write could not know of (the Deployment appears) is the Reconciler's to write.
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "edge", Labels: labels, Generation: 1},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:1"}}}}}}
	if err := c.Create(context.Background(), deployment); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if patches != 1 {
		t.Errorf("the Reconciler patched %d times after the Deployment appeared, want 1", patches)
	}
}

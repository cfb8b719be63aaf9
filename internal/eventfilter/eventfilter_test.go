package eventfilter

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

type recordingHandler struct{ adds, updates, deletes int }

func (h *recordingHandler) OnAdd(any, bool)   { h.adds++ }
func (h *recordingHandler) OnUpdate(any, any) { h.updates++ }
func (h *recordingHandler) OnDelete(any)      { h.deletes++ }

func TestUpdateFilter(t *testing.T) {
	rec := &recordingHandler{}
	var h toolscache.ResourceEventHandler = filteredHandler{rec, Filter{Update: func(old, new any) bool { return old != new }}}
	h.OnAdd("a", false)
	h.OnUpdate("same", "same")
	h.OnUpdate("old", "new")
	h.OnDelete("a")
	if rec.adds != 1 || rec.updates != 1 || rec.deletes != 1 {
		t.Errorf("adds=%d updates=%d deletes=%d, want 1 each (one update filtered out)", rec.adds, rec.updates, rec.deletes)
	}
}

func TestIgnoreLabelled(t *testing.T) {
	release := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.p.v1", Labels: map[string]string{"owner": "helm"}}}
	tls := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cert"}}
	rec := &recordingHandler{}
	var h toolscache.ResourceEventHandler = filteredHandler{rec, IgnoreLabelled("owner", "helm")}
	h.OnAdd(release, false)
	h.OnUpdate(release, release)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/x", Obj: release})
	if rec.adds+rec.updates+rec.deletes != 0 {
		t.Fatalf("events of a labelled object passed: %+v", rec)
	}
	h.OnAdd(tls, false)
	h.OnUpdate(tls, tls)
	h.OnDelete(tls)
	if rec.adds != 1 || rec.updates != 1 || rec.deletes != 1 {
		t.Errorf("events of an unlabelled object were dropped: %+v", rec)
	}
}

func myProxy(mutate func(u *unstructured.Unstructured)) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.example.com/v1alpha1", "kind": "MyProxy",
		"metadata": map[string]any{"name": "p", "namespace": "ns", "resourceVersion": "1", "generation": int64(1)},
		"spec":     map[string]any{"replicas": int64(1)},
		"status":   map[string]any{"conditions": []any{}},
	}}
	if mutate != nil {
		mutate(u)
	}
	return u
}

func TestIgnoreStatusOnlyChanges(t *testing.T) {
	old := myProxy(func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"keep"}) })
	cases := []struct {
		what   string
		mutate func(u *unstructured.Unstructured)
		passes bool
	}{
		{what: "status written", mutate: func(u *unstructured.Unstructured) {
			u.SetResourceVersion("2")
			_ = unstructured.SetNestedField(u.Object, "x", "status", "deployedRelease", "name")
		}, passes: false},
		{what: "finalizer added", mutate: func(u *unstructured.Unstructured) {
			u.SetFinalizers([]string{"keep", "uninstall-helm-release"})
		}, passes: false},
		{what: "finalizer removed", mutate: func(u *unstructured.Unstructured) { u.SetFinalizers(nil) }, passes: true},
		{what: "spec changed", mutate: func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(2), "spec", "replicas")
		}, passes: true},
		{what: "annotation added", mutate: func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"helm.sdk.operatorframework.io/upgrade-force": "true"})
		}, passes: true},
		{what: "label changed", mutate: func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"team": "a"}) }, passes: true},
		{what: "deletion started", mutate: func(u *unstructured.Unstructured) {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
		}, passes: true},
	}
	f := IgnoreStatusOnlyChanges()
	for _, c := range cases {
		n := old.DeepCopy()
		c.mutate(n)
		if got := f.Update(old, n); got != c.passes {
			t.Errorf("%s: passes = %v, want %v", c.what, got, c.passes)
		}
	}
}

func TestIgnoreBookkeepingUpdates(t *testing.T) {
	old := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", ResourceVersion: "1", Labels: map[string]string{"app": "p"}}}
	cases := []struct {
		what   string
		mutate func(d *appsv1.Deployment)
		passes bool
	}{
		{what: "status", mutate: func(d *appsv1.Deployment) { d.ResourceVersion = "2"; d.Status.ReadyReplicas = 1 }, passes: false},
		{what: "revision annotation", mutate: func(d *appsv1.Deployment) {
			d.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
			d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
		}, passes: false},
		{what: "spec edited", mutate: func(d *appsv1.Deployment) { r := int32(5); d.Spec.Replicas = &r }, passes: true},
		{what: "label removed", mutate: func(d *appsv1.Deployment) { d.Labels = nil }, passes: true},
		{what: "annotation added by a user", mutate: func(d *appsv1.Deployment) { d.Annotations = map[string]string{"note": "x"} }, passes: true},
	}
	for _, c := range cases {
		n := old.DeepCopy()
		c.mutate(n)
		if got := IgnoreBookkeepingUpdates(old, n); got != c.passes {
			t.Errorf("%s: passes = %v, want %v", c.what, got, c.passes)
		}
		// The Helm reconciler's watches deliver unstructured objects: the same verdict, and
		// the informer's objects left as they were.
		ou, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
		nu, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(n)
		uo, un := &unstructured.Unstructured{Object: ou}, &unstructured.Unstructured{Object: nu}
		before := un.DeepCopy()
		if got := IgnoreBookkeepingUpdates(uo, un); got != c.passes {
			t.Errorf("%s, unstructured: passes = %v, want %v", c.what, got, c.passes)
		}
		if !reflect.DeepEqual(before.Object, un.Object) {
			t.Errorf("%s: the filter changed the object it was given", c.what)
		}
	}
}

// A shard hears nothing of a custom resource another shard acts on but the update that hands
// it over, and its deletes; combined with the status filter, both must pass.
func TestIgnoreClaimedElsewhereBothWithStatusChanges(t *testing.T) {
	cr := func(owner string, replicas int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": replicas}}}
		if owner != "" {
			u.SetAnnotations(map[string]string{"owner": owner})
		}
		return u
	}
	other := func(o client.Object) bool { return o.GetAnnotations()["owner"] == "b" }
	f := Both(IgnoreStatusOnlyChanges(), IgnoreClaimedElsewhere(other))
	rec := &recordingHandler{}
	var h toolscache.ResourceEventHandler = filteredHandler{rec, f}
	h.OnAdd(cr("b", 1), false)         // dropped: b's
	h.OnUpdate(cr("b", 1), cr("b", 2)) // dropped: b's
	h.OnUpdate(cr("b", 2), cr("", 2))  // passes: handed over
	h.OnUpdate(cr("a", 2), cr("a", 2)) // dropped: no change
	h.OnAdd(cr("a", 1), false)         // passes
	h.OnDelete(cr("b", 2))             // passes
	if rec.adds != 1 || rec.updates != 1 || rec.deletes != 1 {
		t.Errorf("adds=%d updates=%d deletes=%d, want 1 each", rec.adds, rec.updates, rec.deletes)
	}
}

func TestIgnoreStatusUpdatesIsThePluginsDependentRule(t *testing.T) {
	obj := func(replicas int64, status, version, revision string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"spec":   map[string]any{"replicas": replicas},
			"status": map[string]any{"phase": status},
		}}
		u.SetResourceVersion(version)
		u.SetAnnotations(map[string]string{"deployment.kubernetes.io/revision": revision})
		return u
	}
	base := obj(1, "a", "1", "1")
	for name, tt := range map[string]struct {
		newObj *unstructured.Unstructured
		want   bool
	}{
		"status and resourceVersion": {obj(1, "b", "2", "1"), false},
		"the Deployment revision":    {obj(1, "a", "2", "2"), true}, // bookkeeping to the fast path only
		"spec":                       {obj(2, "a", "2", "1"), true},
	} {
		if got := IgnoreStatusUpdates(base, tt.newObj); got != tt.want {
			t.Errorf("%s: passed %v, want %v", name, got, tt.want)
		}
	}
}

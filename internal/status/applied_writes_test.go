package status

import (
	"context"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var pluginGVK = schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"}

// sent records the objects a status Update sends.
type sent struct {
	client.SubResourceWriter
	objects []map[string]any
}

func (s *sent) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	s.objects = append(s.objects, runtime.DeepCopyJSON(obj.(*unstructured.Unstructured).Object))
	return nil
}

type writer struct {
	client.Client
	status *sent
}

func (w writer) Status() client.SubResourceWriter { return w.status }

// cachedAt answers Get with its object, or NotFound without one, as the cache reader does.
type cachedAt struct{ obj *unstructured.Unstructured }

func (c cachedAt) Get(_ context.Context, key client.ObjectKey, out client.Object, _ ...client.GetOption) error {
	if c.obj == nil {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "myproxies"}, key.Name)
	}
	out.(*unstructured.Unstructured).Object = c.obj.Object
	return nil
}

func (cachedAt) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func object(kind schema.GroupVersionKind, version string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(kind)
	u.SetNamespace("ns")
	u.SetName("p")
	u.SetResourceVersion(version)
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// stored is a status as the apiserver holds it: the reconciler's fields and the status
// controller's.
func stored() map[string]any {
	return map[string]any{
		"conditions":         []any{map[string]any{"type": "Deployed", "status": "True"}, map[string]any{"type": "Ready", "status": "True"}},
		"deployedRelease":    map[string]any{"name": "p"},
		"url":                "http://p.ns.svc",
		"observedGeneration": int64(3),
	}
}

// written is a status as the updater builds it: its own schema only.
func written(deployedRelease bool) map[string]any {
	s := map[string]any{"conditions": []any{map[string]any{"type": "Deployed", "status": "True", "reason": "UpgradeSuccessful"}}}
	if deployedRelease {
		s["deployedRelease"] = map[string]any{"name": "p", "manifest": "new"}
	}
	return s
}

// sentAs is what the apiserver may store of a status the updater built: the same, without
// the release manifest.
func sentAs(built map[string]any) map[string]any {
	out := runtime.DeepCopyJSON(built)
	if rel, ok := out["deployedRelease"].(map[string]any); ok {
		delete(rel, "manifest")
	}
	return out
}

// sends updates obj through Client over the cache holding cached, and returns the statuses
// sent.
func sends(t *testing.T, cached *unstructured.Unstructured, obj *unstructured.Unstructured) []map[string]any {
	t.Helper()
	return sendsFilled(t, cached, obj, nil)
}

// sendsFilled is sends with fill bringing the written status up to date.
func sendsFilled(t *testing.T, cached *unstructured.Unstructured, obj *unstructured.Unstructured,
	fill func(context.Context, *unstructured.Unstructured)) []map[string]any {
	t.Helper()
	s := &sent{}
	if err := pluginWrite(writer{status: s}, PluginWrites{Cached: cachedAt{obj: cached}, GVK: pluginGVK, Fill: fill}, obj); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, o := range s.objects {
		st, _ := o["status"].(map[string]any)
		out = append(out, st)
	}
	return out
}

// pluginWrite is the updater's status Update of obj through the operator's client of the
// reconciler (package controller): prepared, and sent when it changes the status.
func pluginWrite(c client.Client, p PluginWrites, obj client.Object) error {
	if !p.Prepare(context.Background(), obj) {
		return nil
	}
	return c.Status().Update(context.Background(), obj)
}

func update(t *testing.T, cached *unstructured.Unstructured, obj *unstructured.Unstructured) map[string]any {
	t.Helper()
	got := sends(t, cached, obj)
	if len(got) != 1 {
		t.Fatalf("%d status updates sent, want 1", len(got))
	}
	return got[0]
}

// The manifest never leaves the operator, and an update that would store the stored status
// again is not sent: the updater compares the manifest with a status that has none, and would
// otherwise write at every reconcile.
func TestTheManifestIsLeftOutAndAnUnchangedStatusNotSent(t *testing.T) {
	built := stored()
	built["deployedRelease"] = map[string]any{"name": "p", "manifest": "apiVersion: v1\nkind: Secret\n"}
	if got := sends(t, object(pluginGVK, "7", stored()), object(pluginGVK, "7", built)); len(got) != 0 {
		t.Errorf("sent %v, want nothing: the status stored is the same", got)
	}
	// Without the cached version to compare with, it is sent, still without the manifest.
	got := update(t, object(pluginGVK, "6", stored()), object(pluginGVK, "7", built))
	if !reflect.DeepEqual(got, sentAs(built)) {
		t.Errorf("sent status %v, want %v", got, sentAs(built))
	}
}

func TestTheUpdaterWriteKeepsTheOtherFieldsOfTheStoredVersion(t *testing.T) {
	cached := object(pluginGVK, "7", stored())
	got := update(t, cached, object(pluginGVK, "7", written(true)))
	want := sentAs(written(true))
	want["url"], want["observedGeneration"] = "http://p.ns.svc", int64(3)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sent status %v, want %v", got, want)
	}
	if !reflect.DeepEqual(cached.Object["status"], stored()) {
		t.Errorf("the cached object changed: %v", cached.Object["status"])
	}
}

func TestTheUpdaterKeepsWhatItOwns(t *testing.T) {
	// The updater removes deployedRelease (uninstall, failures): it stays removed, and its
	// conditions are its own, not the cached ones.
	got := update(t, object(pluginGVK, "7", stored()), object(pluginGVK, "7", written(false)))
	if _, ok := got["deployedRelease"]; ok {
		t.Errorf("deployedRelease came back from the cache: %v", got)
	}
	if want := written(false)["conditions"]; !reflect.DeepEqual(got["conditions"], want) {
		t.Errorf("conditions %v, want the updater's %v", got["conditions"], want)
	}
	if got["url"] != "http://p.ns.svc" {
		t.Errorf("url not carried over: %v", got)
	}
}

func TestNothingIsCarriedFromAnotherVersion(t *testing.T) {
	for name, cached := range map[string]*unstructured.Unstructured{
		"cache behind or ahead": object(pluginGVK, "6", stored()),
		"not cached":            nil,
	} {
		t.Run(name, func(t *testing.T) {
			if got := update(t, cached, object(pluginGVK, "7", written(true))); !reflect.DeepEqual(got, sentAs(written(true))) {
				t.Errorf("sent status %v, want the updater's as built", got)
			}
		})
	}
}

func TestOtherKindsAreSentAsBuilt(t *testing.T) {
	other := schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "Other"}
	if got := update(t, object(other, "7", stored()), object(other, "7", written(true))); !reflect.DeepEqual(got, written(true)) {
		t.Errorf("sent status %v, want the updater's as built", got)
	}
}

// fillURL returns a fill that sets status.url, as the Reconciler sets the fields a chart declares.
func fillURL(url string) func(context.Context, *unstructured.Unstructured) {
	return func(_ context.Context, u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, url, "status", "url")
	}
}

// The updater's write carries what the Reconciler would write next, over the fields carried
// over; a write the fill makes equal to the stored status is not sent.
func TestTheUpdaterWriteCarriesTheReconcilersFields(t *testing.T) {
	got := sendsFilled(t, object(pluginGVK, "7", stored()), object(pluginGVK, "7", written(true)), fillURL("http://new.ns.svc"))
	if len(got) != 1 || got[0]["url"] != "http://new.ns.svc" || got[0]["observedGeneration"] != int64(3) {
		t.Fatalf("sent %v, want one write with the filled url and the carried observedGeneration", got)
	}
	// Without the cached version, the filled field goes out all the same.
	got = sendsFilled(t, nil, object(pluginGVK, "7", written(true)), fillURL("http://new.ns.svc"))
	if len(got) != 1 || got[0]["url"] != "http://new.ns.svc" {
		t.Fatalf("sent %v, want the filled url", got)
	}
	if got := sendsFilled(t, object(pluginGVK, "7", stored()), object(pluginGVK, "7", stored()), fillURL("http://p.ns.svc")); len(got) != 0 {
		t.Errorf("sent %v, want nothing: filled, the status is the one stored", got)
	}
}

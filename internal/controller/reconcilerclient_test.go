package controller

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/status"
)

var gvk = schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"}

func object(kind schema.GroupVersionKind, finalizers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kind)
	u.SetNamespace("team")
	u.SetName("edge")
	u.SetFinalizers(finalizers)
	return u
}

func finalizerSetup(t *testing.T, stored *unstructured.Unstructured) (client.Client, client.Client) {
	t.Helper()
	raw := fake.NewClientBuilder().WithObjects(stored).WithStatusSubresource(stored).Build()
	return raw, reconcilerClient(raw, stored.GroupVersionKind(), status.PluginWrites{Cached: raw, GVK: stored.GroupVersionKind()})
}

func get(t *testing.T, c client.Client, kind schema.GroupVersionKind) *unstructured.Unstructured {
	t.Helper()
	u := object(kind)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestTheReconcilerReadsItsOwnNameForEitherStoredName(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stored []string
		want   []string
	}{
		{"operator-sdk's", []string{"a.example.com/x", names.UninstallFinalizer}, []string{"a.example.com/x", names.ReconcilerFinalizer}},
		{"the plugins'", []string{names.ReconcilerFinalizer, "a.example.com/x"}, []string{names.ReconcilerFinalizer, "a.example.com/x"}},
		{"both", []string{names.ReconcilerFinalizer, "a.example.com/x", names.UninstallFinalizer}, []string{names.ReconcilerFinalizer, "a.example.com/x"}},
		{"none", []string{"a.example.com/x"}, []string{"a.example.com/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := finalizerSetup(t, object(gvk, tc.stored...))
			if got := get(t, c, gvk).GetFinalizers(); !slices.Equal(got, tc.want) {
				t.Errorf("read %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWritesStoreOperatorSDKsNameAndHandBackTheReconcilers(t *testing.T) {
	raw, c := finalizerSetup(t, object(gvk, names.ReconcilerFinalizer))
	ctx := context.Background()
	u := get(t, c, gvk)
	u.SetFinalizers(append(u.GetFinalizers(), "a.example.com/x"))
	if err := c.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	if got, want := u.GetFinalizers(), []string{names.ReconcilerFinalizer, "a.example.com/x"}; !slices.Equal(got, want) {
		t.Errorf("after Update the reconciler holds %v, want %v", got, want)
	}
	if got, want := get(t, raw, gvk).GetFinalizers(), []string{names.UninstallFinalizer, "a.example.com/x"}; !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v (an old name moves to the new one at the next write)", got, want)
	}

	// A status write hands back the stored object: the reconciler must still find its name, or
	// it would never remove the finalizer.
	u.Object["status"] = map[string]any{}
	if err := unstructured.SetNestedField(u.Object, "x", "status", "note"); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(u.GetFinalizers(), names.ReconcilerFinalizer) {
		t.Errorf("after a status Update the reconciler holds %v", u.GetFinalizers())
	}

	u.SetFinalizers(slices.DeleteFunc(u.GetFinalizers(), func(f string) bool { return f == names.ReconcilerFinalizer }))
	if err := c.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	if got, want := get(t, raw, gvk).GetFinalizers(), []string{"a.example.com/x"}; !slices.Equal(got, want) {
		t.Errorf("after the reconciler removed its finalizer, stored %v, want %v", got, want)
	}
}

func TestOtherKindsAreLeftAlone(t *testing.T) {
	other := schema.GroupVersionKind{Group: "web.example.com", Version: "v1", Kind: "Site"}
	raw := fake.NewClientBuilder().WithObjects(object(other, names.UninstallFinalizer)).Build()
	c := reconcilerClient(raw, gvk, status.PluginWrites{Cached: raw, GVK: gvk})
	if got := get(t, c, other).GetFinalizers(); !slices.Equal(got, []string{names.UninstallFinalizer}) {
		t.Errorf("another kind read %v", got)
	}
}

// The updater's status Update that would store the stored status is not sent; with options (a
// dry run) it is sent as asked.
func TestAnUnchangedStatusIsSentOnlyWithOptions(t *testing.T) {
	stored := object(gvk, names.UninstallFinalizer)
	stored.Object["status"] = map[string]any{"url": "http://edge"}
	sent := 0
	raw := fake.NewClientBuilder().WithObjects(stored).WithStatusSubresource(stored).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			sent++
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}).Build()
	c := reconcilerClient(raw, gvk, status.PluginWrites{Cached: raw, GVK: gvk})
	u := get(t, c, gvk)
	delete(u.Object, "status") // the updater's write lacks the fields it does not own
	if err := c.Status().Update(context.Background(), u); err != nil || sent != 0 {
		t.Fatalf("plain write of the stored status: %v, %d sent, want none", err, sent)
	}
	if err := c.Status().Update(context.Background(), u, client.DryRunAll); err != nil || sent != 1 {
		t.Errorf("dry-run write of the stored status: %v, %d sent, want 1", err, sent)
	}
}

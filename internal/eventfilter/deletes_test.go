package eventfilter

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/example/myproxy-operator/internal/ownwrites"
)

func TestReleaseObjectDeletes(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"}
	owner := func(name string, deleting bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace("team")
		u.SetName(name)
		u.SetUID(types.UID(name))
		if deleting {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
			u.SetFinalizers([]string{"uninstall-helm-release"})
		}
		return u
	}
	reader := fake.NewClientBuilder().WithObjects(owner("live", false), owner("deleting", true)).Build()
	service := func(name, ownerName string) *unstructured.Unstructured {
		svc := &unstructured.Unstructured{Object: map[string]any{}}
		svc.SetAPIVersion("v1")
		svc.SetKind("Service")
		svc.SetNamespace("team")
		svc.SetName(name)
		if ownerName != "" {
			svc.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(owner(ownerName, false), gvk)})
		}
		return svc
	}
	// as a typed informer delivers it: no apiVersion, no kind
	typedService := func(name, ownerName string) *corev1.Service {
		svc := &corev1.Service{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(service(name, ownerName).Object, svc); err != nil {
			t.Fatal(err)
		}
		svc.TypeMeta = metav1.TypeMeta{}
		return svc
	}
	own := ownwrites.New()
	for _, name := range []string{"helm-deleted", "helm-deleted-uninstalling", "helm-deleted-orphan", "helm-deleted-typed"} {
		own.Deleting(ownwrites.Key{GroupKind: schema.GroupKind{Kind: "Service"}, NamespacedName: types.NamespacedName{Namespace: "team", Name: name}})
	}
	pass := ReleaseObjectDeletes(reader, scheme.Scheme, map[schema.GroupVersionKind]bool{gvk: true}, own)
	cases := []struct {
		name string
		obj  any
		want bool
	}{
		{name: "deleted by someone else: drift, whatever the release's state", obj: service("svc", "live"), want: true},
		{name: "deleted by Helm (a failing install's rollback)", obj: service("helm-deleted", "live"), want: false},
		{name: "deleted by Helm while its owner is being deleted (uninstall-wait)", obj: service("helm-deleted-uninstalling", "deleting"), want: true},
		{name: "deleted by Helm, owner gone", obj: service("helm-deleted-orphan", "gone"), want: false},
		{name: "not controlled by a watched kind", obj: service("svc", ""), want: true},
		{name: "tombstone of drift", obj: toolscache.DeletedFinalStateUnknown{Obj: service("svc", "live")}, want: true},
		{name: "deleted by Helm, typed without its kind", obj: typedService("helm-deleted-typed", "live"), want: false},
		{name: "deleted by someone else, typed without its kind", obj: typedService("svc", "live"), want: true},
	}
	for _, c := range cases {
		if got := pass(c.obj); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

package helmconfig

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	sdkhandler "github.com/operator-framework/operator-lib/handler"
	"helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/resource"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/tenancy"
)

// cr is the custom resource the configurations are for.
var cr = func() client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"})
	u.SetNamespace("team")
	u.SetName("p")
	u.SetUID("uid")
	return u
}()

// countingDiscovery is a fake discovery client that counts server-version requests.
func countingDiscovery(calls *int) *fakediscovery.FakeDiscovery {
	fake := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{}, FakedServerVersion: &version.Info{GitVersion: "v1.35.4", Major: "1", Minor: "35"}}
	fake.Resources = []*metav1.APIResourceList{{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment"}}}}
	fake.AddReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) { *calls++; return false, nil, nil })
	return fake
}

// configs are the Configs of a kind over the fake discovery, and a REST config that is never
// dialled.
func configs(t *testing.T, fake *fakediscovery.FakeDiscovery) *Configs {
	t.Helper()
	c, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, meta.NewDefaultRESTMapper(nil),
		Settings{Managed: names.ManagedValue, Records: NewRecords(nil)})
	if err != nil {
		t.Fatal(err)
	}
	c.learn = fake
	return c
}

func TestCapabilitiesAreLearntOncePerTTL(t *testing.T) {
	var calls int
	now := time.Unix(0, 0)
	c := configs(t, countingDiscovery(&calls))
	c.now = func() time.Time { return now }
	for range 5 {
		cfg, _, err := c.For(context.Background(), cr, logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Capabilities == nil || cfg.Capabilities.KubeVersion.Version != "v1.35.4" {
			t.Fatalf("capabilities = %+v, want the server's version", cfg.Capabilities)
		}
		if !cfg.Capabilities.APIVersions.Has("apps/v1/Deployment") {
			t.Errorf("API versions %v lack apps/v1/Deployment", cfg.Capabilities.APIVersions)
		}
	}
	if calls != 1 {
		t.Errorf("5 configurations asked the server version %d times, want 1", calls)
	}
	now = now.Add(TTL + time.Second)
	if _, _, err := c.For(context.Background(), cr, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("after the TTL the server version was asked %d times in all, want 2", calls)
	}
}

func TestEachConfigurationGetsItsOwnCapabilities(t *testing.T) {
	var calls int
	c := configs(t, countingDiscovery(&calls))
	a, _, _ := c.For(context.Background(), cr, logr.Discard())
	b, _, _ := c.For(context.Background(), cr, logr.Discard())
	a.Capabilities.KubeVersion.Version = "changed"
	if b.Capabilities.KubeVersion.Version != "v1.35.4" {
		t.Errorf("a change to one configuration's capabilities leaked into another")
	}
}

func TestReachabilityIsCheckedOncePerTTLAndFailuresAreNotRemembered(t *testing.T) {
	var calls int
	now := time.Unix(0, 0)
	fake := countingDiscovery(&calls)
	down := errors.New("connection refused")
	var result error
	fake.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) { return result != nil, nil, result })
	c := configs(t, fake)
	c.now = func() time.Time { return now }
	cfg, _, err := c.For(context.Background(), cr, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := cfg.KubeClient.IsReachable(); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Errorf("version asked %d times, want once: the capabilities learnt answer within the TTL", calls)
	}
	now = now.Add(TTL + time.Second)
	result = down
	if err := cfg.KubeClient.IsReachable(); !errors.Is(err, down) {
		t.Fatalf("unreachable cluster after the TTL: %v, want %v", err, down)
	}
	result = nil
	if err := cfg.KubeClient.IsReachable(); err != nil || calls != 2 {
		t.Errorf("after a failure: %v, version asked %d times, want 2 (a failure is not remembered)", err, calls)
	}
	if _, ok := cfg.KubeClient.(kube.InterfaceWaitOptions); !ok {
		t.Errorf("the wrapped kube client lost Helm's optional interfaces")
	}
}

func TestRefreshReportsAChangeOfTheAPIOnce(t *testing.T) {
	var calls int
	fake := countingDiscovery(&calls)
	c := configs(t, fake)
	if changed, err := c.Refresh(); err != nil || changed {
		t.Fatalf("first refresh: changed=%v err=%v, want no change", changed, err)
	}
	fake.Resources = append(fake.Resources, &metav1.APIResourceList{GroupVersion: "monitoring.coreos.com/v1",
		APIResources: []metav1.APIResource{{Name: "servicemonitors", Kind: "ServiceMonitor"}}})
	// A reconcile learns the new API first (its TTL ran out): the next Refresh still reports it.
	c.now = func() time.Time { return time.Now().Add(2 * TTL) }
	if _, _, err := c.For(context.Background(), cr, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if changed, _ := c.Refresh(); !changed {
		t.Error("a new API version was not reported")
	}
	if changed, _ := c.Refresh(); changed {
		t.Error("the same API was reported twice")
	}
}

func mapping(group, kind string, namespaced bool) *meta.RESTMapping {
	scope := meta.RESTScopeRoot
	if namespaced {
		scope = meta.RESTScopeNamespace
	}
	return &meta.RESTMapping{GroupVersionKind: schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}, Scope: scope}
}

// Every object Helm builds is checked against the release's reach, and the first one outside
// it fails the whole build, named.
func TestBuiltObjectsAreConfined(t *testing.T) {
	obj := func(m *meta.RESTMapping, ns, name string) *resource.Info {
		return &resource.Info{Mapping: m, Namespace: ns, Name: name}
	}
	deployment := mapping("apps", "Deployment", true)
	clusterRole := mapping("rbac.authorization.k8s.io", "ClusterRole", false)
	for _, tc := range []struct {
		name    string
		policy  tenancy.Policy
		objs    kube.ResourceList
		refused string // "" when allowed, else what the error names
	}{
		{name: "own namespace", objs: kube.ResourceList{obj(deployment, "team", "a")}},
		{name: "another namespace", objs: kube.ResourceList{obj(deployment, "team", "a"), obj(deployment, "kube-system", "pwn")},
			refused: "Deployment.apps kube-system/pwn"},
		{name: "another namespace, allowed", policy: tenancy.Policy{Namespaces: []string{"monitoring"}},
			objs: kube.ResourceList{obj(deployment, "monitoring", "a")}},
		{name: "cluster-scoped", objs: kube.ResourceList{obj(clusterRole, "team", "admin")},
			refused: "ClusterRole.rbac.authorization.k8s.io admin (cluster-scoped)"},
		{name: "cluster-scoped, allowed", policy: tenancy.Policy{ClusterScoped: []string{"ClusterRole.rbac.authorization.k8s.io"}},
			objs: kube.ResourceList{obj(clusterRole, "", "admin")}},
		{name: "scope unknown", objs: kube.ResourceList{{Name: "x", Namespace: "team", Object: &metav1.PartialObjectMetadata{}}},
			refused: "its scope is unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &kubeClient{configs: &Configs{Settings: Settings{Reach: tc.policy}}, releaseNS: "team"}
			err := c.confine(tc.objs)
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("error %v, want one naming %q", err, tc.refused)
			}
		})
	}
}

// A lookup is refused before it is sent when it reads a namespaced object outside the
// release's reach, or lists a namespaced kind across namespaces; cluster-scoped kinds may be
// read.
func TestLookupsAreConfined(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Node"}, meta.RESTScopeRoot)
	guard := lookupGuard(tenancy.Policy{Namespaces: []string{"shared"}}, "team", mapper)
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	for _, tc := range []struct {
		read    Read
		refused bool
	}{
		{read: Read{Resource: secrets, Namespace: "team", Name: "tls"}},
		{read: Read{Resource: secrets, Namespace: "shared", Name: "tls"}},
		{read: Read{Resource: secrets, Namespace: "kube-system", Name: "tls"}, refused: true},
		{read: Read{Resource: secrets, Namespace: "kube-system"}, refused: true},
		{read: Read{Resource: secrets}, refused: true},
		{read: Read{Resource: secrets, Name: "tls"}, refused: true},
		{read: Read{Resource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}}},
		{read: Read{Resource: schema.GroupVersionResource{Group: "x.io", Version: "v1", Resource: "unknowns"}}, refused: true},
		{read: Read{Resource: schema.GroupVersionResource{Group: "x.io", Version: "v1", Resource: "unknowns"}, Namespace: "team", Name: "a"}},
	} {
		err := guard(tc.read)
		if (err != nil) != tc.refused {
			t.Errorf("%s: error %v, refused want %v", tc.read.Key(), err, tc.refused)
		}
	}
}

func labelled(obj runtime.Object) *resource.Info {
	u, _ := obj.(*unstructured.Unstructured)
	i := &resource.Info{Object: obj, Mapping: &meta.RESTMapping{}}
	if u != nil {
		i.Name = u.GetName()
		i.Mapping.GroupVersionKind = u.GroupVersionKind()
	}
	return i
}

// owning is a kube client whose releases belong to MyProxy team/p.
func owning() (*kubeClient, *unstructured.Unstructured) {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, {Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"}} {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"})
	owner.SetNamespace("team")
	owner.SetName("p")
	owner.SetUID("uid-p")
	return &kubeClient{configs: &Configs{mapper: mapper, Settings: Settings{Managed: names.ManagedValue}}, owner: owner}, owner
}

func object(apiVersion, kind, namespace, name string, annotations map[string]any) *unstructured.Unstructured {
	md := map[string]any{"name": name, "labels": map[string]any{"app.kubernetes.io/name": "myproxy"}}
	if namespace != "" {
		md["namespace"] = namespace
	}
	if annotations != nil {
		md["annotations"] = annotations
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": md,
		"data": map[string]any{"nginx.conf": "events {}\n"}}}
}

func TestOwnLabelsEveryObjectAndPointsAtTheResourceAsThePluginsDo(t *testing.T) {
	c, owner := owning()
	plain := object("v1", "ConfigMap", "team", "plain", nil)
	dep := object("apps/v1", "Deployment", "team", "p", nil)
	hook := object("v1", "ConfigMap", "team", "hook", map[string]any{"helm.sh/hook": "pre-install"})
	kept := object("v1", "ConfigMap", "team", "kept", map[string]any{"helm.sh/resource-policy": "keep"})
	elsewhere := object("v1", "ConfigMap", "other", "elsewhere", nil)
	cluster := object("rbac.authorization.k8s.io/v1", "ClusterRole", "", "role", nil)
	objs := kube.ResourceList{labelled(plain), labelled(dep), labelled(hook), labelled(kept), labelled(elsewhere), labelled(cluster)}
	if err := c.own(objs); err != nil {
		t.Fatal(err)
	}
	if err := c.own(objs); err != nil { // a manifest stored with the owner reference already
		t.Fatal(err)
	}
	controller := []metav1.OwnerReference{*metav1.NewControllerRef(owner, owner.GroupVersionKind())}
	for _, tc := range []struct {
		obj         *unstructured.Unstructured
		owners      []metav1.OwnerReference
		annotations bool
	}{
		{obj: plain, owners: controller},
		{obj: dep, owners: controller},
		{obj: hook},
		{obj: kept, annotations: true},
		{obj: elsewhere, annotations: true},
		{obj: cluster, annotations: true},
	} {
		o := tc.obj
		if !names.ManagedSelector(names.ManagedValue).Matches(labels.Set(o.GetLabels())) || o.GetLabels()["app.kubernetes.io/name"] != "myproxy" {
			t.Errorf("%s %s: labels %v, want the managed label beside the chart's", o.GetKind(), o.GetName(), o.GetLabels())
		}
		if got := o.GetOwnerReferences(); !reflect.DeepEqual(got, tc.owners) {
			t.Errorf("%s %s: owner references %+v, want %+v", o.GetKind(), o.GetName(), got, tc.owners)
		}
		if _, got := o.GetAnnotations()[sdkhandler.TypeAnnotation]; got != tc.annotations {
			t.Errorf("%s %s: owner annotations %v, want %v", o.GetKind(), o.GetName(), o.GetAnnotations(), tc.annotations)
		}
		if conf, _, _ := unstructured.NestedString(o.Object, "data", "nginx.conf"); conf != "events {}\n" {
			t.Errorf("%s %s: data changed: %q", o.GetKind(), o.GetName(), conf)
		}
	}
}

func TestOwnRefusesAnObjectItCannotLabel(t *testing.T) {
	c, _ := owning()
	if err := c.own(kube.ResourceList{labelled(&runtime.Unknown{})}); err == nil {
		t.Error("an object without metadata was labelled")
	}
}

func TestParsePath(t *testing.T) {
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	for _, tc := range []struct {
		path string
		want Read
		ok   bool
	}{
		{path: "/api/v1/namespaces/ns/secrets/tls", want: Read{Resource: secrets, Namespace: "ns", Name: "tls"}, ok: true},
		{path: "/api/v1/namespaces/ns/secrets", want: Read{Resource: secrets, Namespace: "ns"}, ok: true},
		{path: "/api/v1/secrets", want: Read{Resource: secrets}, ok: true},
		{path: "/api/v1/namespaces/ns", want: Read{Resource: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Name: "ns"}, ok: true},
		{path: "/apis/apps/v1/namespaces/ns/deployments/d/status",
			want: Read{Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespace: "ns", Name: "d"}, ok: true},
		{path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.example.com",
			want: Read{Resource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, Name: "x.example.com"}, ok: true},
		{path: "/api/v1"},
		{path: "/apis/apps/v1"},
		{path: "/apis"},
		{path: "/version"},
	} {
		got, ok := ParsePath(tc.path)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParsePath(%q) = %+v, %v; want %+v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRecorderCountsEachObjectReadOnce(t *testing.T) {
	r := &Recorder{}
	var counts []int
	r.OnRead(func(n int) { counts = append(counts, n) })
	rd := Read{Resource: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: "ns", Name: "a"}
	r.add(rd)
	r.add(rd)
	if reads := r.Reads(); len(reads) != 1 || reads[0] != rd {
		t.Errorf("reads = %+v, want the Secret once", reads)
	}
	if len(counts) != 2 || counts[1] != 1 {
		t.Errorf("OnRead counts = %v, want [1 1]", counts)
	}
	r.Start()
	if len(r.Reads()) != 0 {
		t.Error("Start did not forget earlier reads")
	}
}

// An owner reference is possible to an owner in the same namespace, or to a cluster-scoped one.
func TestCanOwn(t *testing.T) {
	namespaced := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Namespaced"}
	cluster := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Cluster"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(namespaced, meta.RESTScopeNamespace)
	mapper.Add(cluster, meta.RESTScopeRoot)
	obj := func(gvk schema.GroupVersionKind, namespace string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(namespace)
		return u
	}
	tests := []struct {
		name             string
		owner, dependent *unstructured.Unstructured
		want             bool
	}{
		{name: "same namespace", owner: obj(namespaced, "a"), dependent: obj(namespaced, "a"), want: true},
		{name: "other namespace", owner: obj(namespaced, "a"), dependent: obj(namespaced, "b"), want: false},
		{name: "cluster-scoped dependent of a namespaced owner", owner: obj(namespaced, "a"), dependent: obj(cluster, ""), want: false},
		{name: "any dependent of a cluster-scoped owner", owner: obj(cluster, ""), dependent: obj(namespaced, "b"), want: true},
	}
	for _, tt := range tests {
		got, err := CanOwn(mapper, tt.owner, tt.dependent)
		if err != nil || got != tt.want {
			t.Errorf("%s: got %v (%v), want %v", tt.name, got, err, tt.want)
		}
	}
	if _, err := CanOwn(mapper, obj(namespaced, "a"), obj(schema.GroupVersionKind{Kind: "Unknown", Version: "v1"}, "a")); err == nil {
		t.Error("a kind the API does not serve: no error")
	}
}

// The object of another release that stopped a write is read off the kube client's error and
// off Helm's own check, so that the resource waits for that object or its release to go.
func TestTakenNamesTheObjectAndItsRelease(t *testing.T) {
	own := &TakenError{Kind: "Service", Namespace: "a", Name: "svc", Release: "other", ReleaseNamespace: "a"}
	for _, tc := range []struct {
		err  error
		want *TakenError
	}{
		{fmt.Errorf("install: %w", own), own},
		{errors.New(`unable to continue with install: ConfigMap "cd-cm" in namespace "a" exists and cannot be imported into the current release: ` +
			`invalid ownership metadata; annotation validation error: key "meta.helm.sh/release-name" must equal "bravo": current value is "alpha"`),
			&TakenError{Kind: "ConfigMap", Namespace: "a", Name: "cd-cm", Release: "alpha", ReleaseNamespace: "a"}},
		{errors.New(`unable to continue with install: Secret "s" in namespace "a" exists and cannot be imported into the current release: ` +
			`invalid ownership metadata; annotation validation error: key "meta.helm.sh/release-name" must equal "bravo": current value is "alpha"; ` +
			`annotation validation error: key "meta.helm.sh/release-namespace" must equal "a": current value is "b"`),
			&TakenError{Kind: "Secret", Namespace: "a", Name: "s", Release: "alpha", ReleaseNamespace: "b"}},
		{errors.New("timed out"), nil},
		{nil, nil},
	} {
		got := Taken(tc.err)
		if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
			t.Errorf("Taken(%v) = %+v, want %+v", tc.err, got, tc.want)
		}
	}
}

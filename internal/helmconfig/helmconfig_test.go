package helmconfig

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/cli-runtime/pkg/resource"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/renderinputs"
	"github.com/example/myproxy-operator/internal/tenancy"
)

type configGetter func() *action.Configuration

// cr is the custom resource the configurations are for.
var cr = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p"}}

func (g configGetter) ActionConfigFor(context.Context, client.Object) (*action.Configuration, error) {
	return g(), nil
}

// countingDiscovery is a fake discovery client that counts server-version requests.
func countingDiscovery(calls *int) *fakediscovery.FakeDiscovery {
	fake := &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{}, FakedServerVersion: &version.Info{GitVersion: "v1.35.4", Major: "1", Minor: "35"}}
	fake.Resources = []*metav1.APIResourceList{{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{{Name: "deployments", Kind: "Deployment"}}}}
	fake.AddReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) { *calls++; return false, nil, nil })
	return fake
}

func TestCapabilitiesAreLearntOncePerTTL(t *testing.T) {
	var calls int
	now := time.Unix(0, 0)
	g := New(configGetter(func() *action.Configuration { return &action.Configuration{KubeClient: &kube.Client{}} }), countingDiscovery(&calls), names.ManagedValue, tenancy.Policy{})
	g.now = func() time.Time { return now }

	for i := 0; i < 5; i++ {
		cfg, err := g.ActionConfigFor(context.Background(), cr)
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
	if _, err := g.ActionConfigFor(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("after the TTL the server version was asked %d times in all, want 2", calls)
	}
}

func TestEachConfigurationGetsItsOwnCapabilities(t *testing.T) {
	var calls int
	g := New(configGetter(func() *action.Configuration { return &action.Configuration{KubeClient: &kube.Client{}} }), countingDiscovery(&calls), names.ManagedValue, tenancy.Policy{})
	a, _ := g.ActionConfigFor(context.Background(), cr)
	b, _ := g.ActionConfigFor(context.Background(), cr)
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
	g := New(configGetter(func() *action.Configuration { return &action.Configuration{KubeClient: &kube.Client{}} }),
		fake, names.ManagedValue, tenancy.Policy{})
	g.now = func() time.Time { return now }
	cfg, err := g.ActionConfigFor(context.Background(), cr)
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
	if _, ok := cfg.KubeClient.(kube.InterfaceResources); !ok {
		t.Errorf("the wrapped kube client lost Helm's optional interfaces")
	}
}

func TestRefreshReportsAChangeOfTheAPIOnce(t *testing.T) {
	var calls int
	fake := countingDiscovery(&calls)
	g := New(configGetter(func() *action.Configuration { return &action.Configuration{KubeClient: &kube.Client{}} }), fake, names.ManagedValue, tenancy.Policy{})
	if changed, err := g.Refresh(); err != nil || changed {
		t.Fatalf("first refresh: changed=%v err=%v, want no change", changed, err)
	}
	fake.Resources = append(fake.Resources, &metav1.APIResourceList{GroupVersion: "monitoring.coreos.com/v1",
		APIResources: []metav1.APIResource{{Name: "servicemonitors", Kind: "ServiceMonitor"}}})
	// A reconcile learns the new API first (its TTL ran out): the next Refresh still reports it.
	g.now = func() time.Time { return time.Now().Add(2 * TTL) }
	if _, err := g.ActionConfigFor(context.Background(), cr); err != nil {
		t.Fatal(err)
	}
	if changed, _ := g.Refresh(); !changed {
		t.Error("a new API version was not reported")
	}
	if changed, _ := g.Refresh(); changed {
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
			c := &kubeClient{getter: &Getter{reach: tc.policy}, releaseNS: "team"}
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
		read    renderinputs.Read
		refused bool
	}{
		{read: renderinputs.Read{Resource: secrets, Namespace: "team", Name: "tls"}},
		{read: renderinputs.Read{Resource: secrets, Namespace: "shared", Name: "tls"}},
		{read: renderinputs.Read{Resource: secrets, Namespace: "kube-system", Name: "tls"}, refused: true},
		{read: renderinputs.Read{Resource: secrets, Namespace: "kube-system"}, refused: true},
		{read: renderinputs.Read{Resource: secrets}, refused: true},
		{read: renderinputs.Read{Resource: secrets, Name: "tls"}, refused: true},
		{read: renderinputs.Read{Resource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}}},
		{read: renderinputs.Read{Resource: schema.GroupVersionResource{Group: "x.io", Version: "v1", Resource: "unknowns"}}, refused: true},
		{read: renderinputs.Read{Resource: schema.GroupVersionResource{Group: "x.io", Version: "v1", Resource: "unknowns"}, Namespace: "team", Name: "a"}},
	} {
		err := guard(tc.read)
		if (err != nil) != tc.refused {
			t.Errorf("%s: error %v, refused want %v", tc.read.Key(), err, tc.refused)
		}
	}
}

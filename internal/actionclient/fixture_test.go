package actionclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	releasei "helm.sh/helm/v4/pkg/release"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/helmconfig"
)

// The custom resource of the tests.
var (
	crGVK = schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"}
	crKey = types.NamespacedName{Namespace: "ns", Name: "p"}
)

// cr is the custom resource ns/p with spec, as the apiserver serves it (integers as int64).
func cr(spec map[string]any) *unstructured.Unstructured {
	raw, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		panic(err)
	}
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(raw, &u.Object); err != nil {
		panic(err)
	}
	u.SetGroupVersionKind(crGVK)
	u.SetNamespace(crKey.Namespace)
	u.SetName(crKey.Name)
	u.SetUID("uid-p")
	return u
}

// helm is what the actions of the tests run on: Helm's in-memory release storage, which
// outlives each action client (a new client stands for a new operator process over the same
// records), a kube client that applies nothing, the cluster's capabilities, and a fake
// apiserver that answers lookups. It counts what reaches storage.
type helm struct {
	mem  *driver.Memory
	kube *kubefake.FailingKubeClient
	caps *common.Capabilities
	api  *lookupServer

	mu      sync.Mutex
	queries int // history reads
	creates int
	updates int
	reads   *helmconfig.Recorder // of the last configuration
}

func newHelm(t *testing.T) *helm {
	return &helm{mem: driver.NewMemory(), kube: &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}},
		caps: common.DefaultCapabilities.Copy(), api: newLookupServer(t)}
}

// For implements Configs.
func (h *helm) For(_ context.Context, _ client.Object, _ logr.Logger) (*action.Configuration, *helmconfig.Recorder, error) {
	reads := &helmconfig.Recorder{}
	h.mu.Lock()
	h.reads = reads
	h.mu.Unlock()
	return &action.Configuration{Releases: storage.Init(counting{Memory: h.mem, h: h}), KubeClient: h.kube,
		Capabilities: h.caps, RESTClientGetter: lookupGetter{host: h.api.URL, reads: reads}}, reads, nil
}

// last is the release's last revision as stored.
func (h *helm) last(t *testing.T) *release.Release {
	t.Helper()
	rel, err := storage.Init(h.mem).Last(crKey.Name)
	if err != nil {
		t.Fatal(err)
	}
	return rel.(*release.Release)
}

// store writes rel as it is (a record another process or the helm CLI wrote).
func (h *helm) store(t *testing.T, rel *release.Release) {
	t.Helper()
	if err := storage.Init(h.mem).Create(rel); err != nil {
		t.Fatal(err)
	}
}

// fail marks the release's last revision failed, as stored.
func (h *helm) fail(t *testing.T) {
	t.Helper()
	rel := h.last(t)
	rel.Info.Status = rcommon.StatusFailed
	if err := h.mem.Update(fmt.Sprintf("sh.helm.release.v1.%s.v%d", rel.Name, rel.Version), rel); err != nil {
		t.Fatal(err)
	}
}

// failedUpgrade stores a release of chrt whose revision 2, the upgrade to spec over an install
// of no values, failed (a retry's starting point; a failed revision 1 is a failed install).
func (h *helm) failedUpgrade(t *testing.T, chrt *chart.Chart, o Options, spec map[string]any) {
	t.Helper()
	k := newKind(t, h, chrt, o)
	for _, s := range []map[string]any{{}, spec} {
		if _, _, err := k.reconcileAs(s); err != nil {
			t.Fatal(err)
		}
	}
	h.fail(t)
}

// records is how many records are stored.
func (h *helm) records() int {
	all, _ := h.mem.List(func(releasei.Releaser) bool { return true })
	return len(all)
}

func (h *helm) counts() (queries, writes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queries, h.creates + h.updates
}

// counting is Helm's in-memory driver, counting what reaches it.
type counting struct {
	*driver.Memory
	h *helm
}

func (c counting) Query(l map[string]string) ([]releasei.Releaser, error) {
	c.h.mu.Lock()
	c.h.queries++
	c.h.mu.Unlock()
	return c.Memory.Query(l)
}

func (c counting) Create(key string, r releasei.Releaser) error {
	c.h.mu.Lock()
	c.h.creates++
	c.h.mu.Unlock()
	return c.Memory.Create(key, r)
}

func (c counting) Update(key string, r releasei.Releaser) error {
	c.h.mu.Lock()
	c.h.updates++
	c.h.mu.Unlock()
	return c.Memory.Update(key, r)
}

// lookupServer serves one Secret, ns/tls, whose resourceVersion the test changes.
type lookupServer struct {
	*httptest.Server
	mu sync.Mutex
	rv string
}

func newLookupServer(t *testing.T) *lookupServer {
	a := &lookupServer{rv: "1"}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/v1" { // discovery, as Helm's lookup asks first
			_, _ = fmt.Fprint(w, `{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"secrets","namespaced":true,"kind":"Secret","verbs":["get","list"]}]}`)
			return
		}
		if r.URL.Path != "/api/v1/namespaces/ns/secrets/tls" {
			http.NotFound(w, r)
			return
		}
		_, _ = fmt.Fprintf(w, `{"kind":"Secret","apiVersion":"v1","metadata":{"name":"tls","namespace":"ns","uid":"u1","resourceVersion":%q}}`, a.rv)
	}))
	t.Cleanup(a.Close)
	return a
}

// lookupGetter is the REST client getter of Helm's engine: the lookup server, recorded.
type lookupGetter struct {
	host  string
	reads *helmconfig.Recorder
}

func (g lookupGetter) ToRESTConfig() (*rest.Config, error) {
	cfg := &rest.Config{Host: g.host}
	cfg.Wrap(g.reads.Transport)
	return cfg, nil
}
func (lookupGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) { return nil, nil }
func (lookupGetter) ToRESTMapper() (meta.RESTMapper, error)                         { return nil, nil }
func (lookupGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig                  { return nil }

// testChart is a chart of one template, with one default value.
func testChart(template string) *chart.Chart {
	return &chart.Chart{
		Metadata:  &chart.Metadata{APIVersion: "v2", Name: "myproxy", Version: "0.1.0"},
		Templates: []*common.File{{Name: "templates/cm.yaml", Data: []byte(template)}},
		Values:    map[string]any{"replicas": 1},
	}
}

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  replicas: {{ .Values.replicas | quote }}\n"

// kind is the action client of one kind over h: a new one stands for a new operator process.
type kind struct {
	t       *testing.T
	h       *helm
	c       *Client
	events  *record.FakeRecorder
	metrics *prometheus.Registry
}

// newKind returns the client of chrt over h, with digests unless o says otherwise; o's other
// fields are taken as they are.
func newKind(t *testing.T, h *helm, chrt *chart.Chart, o Options) *kind {
	t.Helper()
	k := &kind{t: t, h: h, events: record.NewFakeRecorder(1000), metrics: prometheus.NewRegistry()}
	m, err := NewMetrics(k.metrics, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.Chart, o.Configs, o.Recorder, o.Metrics = chrt, h, k.events, m
	if o.Translate == nil {
		o.Translate = func(_ context.Context, obj *unstructured.Unstructured) (map[string]any, error) {
			spec, _ := obj.Object["spec"].(map[string]any)
			return spec, nil
		}
	}
	if o.Unlock.Leading == nil && o.Unlock.PendingAfter == 0 {
		o.Unlock.PendingAfter = time.Hour
	}
	k.c = New(o)
	return k
}

// digested is Options with digests.
func digested() Options { return Options{Digests: NewDigests(nil, crGVK, nil, "")} }

// begin begins a reconcile of obj.
func (k *kind) begin(obj *unstructured.Unstructured) *reconcile {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	k.t.Cleanup(cancel)
	r, err := k.c.begin(ctx, obj)
	if err != nil {
		k.t.Fatal(err)
	}
	return r
}

// checks is how many upgrade checks rendered (dry runs reached Helm).
func (k *kind) checks() int {
	k.t.Helper()
	families, err := k.metrics.Gather()
	if err != nil {
		k.t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		if f.GetName() != "myproxy_operator_helm_action_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" && l.GetValue() == string(ActionCheck) {
					n += int(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return n
}

// reconcileAs runs what the reconciler does with a custom resource of spec that is not being
// deleted: read the release; install it when there is none; else check, then upgrade or
// correct drift as the check says. It returns the reconcile and the release it left.
func (k *kind) reconcileAs(spec map[string]any) (*reconcile, *release.Release, error) {
	k.t.Helper()
	r := k.begin(cr(spec))
	cur, err := r.get(crKey.Name)
	switch {
	case isNotFound(err):
		rel, err := r.install(actionOptions{})
		return r, rel, err
	case err != nil:
		return r, nil, err
	}
	checked, err := r.check()
	if err != nil {
		return r, nil, err
	}
	if checked.Manifest != cur.Manifest || cur.Info.Status != "deployed" {
		rel, err := r.upgrade(actionOptions{})
		return r, rel, err
	}
	return r, cur, r.reconcileObjects()
}

func isNotFound(err error) bool { return errors.Is(err, driver.ErrReleaseNotFound) }

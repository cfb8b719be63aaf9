package actionclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/example/myproxy-operator/internal/renderinputs"
)

// apiserver serves one Secret, whose resourceVersion the test changes.
type apiserver struct {
	*httptest.Server
	mu sync.Mutex
	rv string
}

func newAPIServer(t *testing.T) *apiserver {
	a := &apiserver{rv: "1"}
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

// restGetter hands out the REST config of the test's apiserver (or an unreachable one).
type restGetter struct{ host string }

func (g restGetter) ToRESTConfig() (*rest.Config, error) {
	host := g.host
	if host == "" {
		host = "http://127.0.0.1:1"
	}
	return &rest.Config{Host: host}, nil
}
func (restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) { return nil, nil }
func (restGetter) ToRESTMapper() (meta.RESTMapper, error)                         { return nil, nil }

// fakeTracker records what each custom resource follows.
type fakeTracker struct {
	followed map[renderinputs.CR][]renderinputs.Read
}

func (f *fakeTracker) Follow(_ context.Context, cr renderinputs.CR, reads []renderinputs.Read) error {
	if f.followed == nil {
		f.followed = map[renderinputs.CR][]renderinputs.Read{}
	}
	f.followed[cr] = reads
	return nil
}

func (f *fakeTracker) Forget(cr renderinputs.CR) { delete(f.followed, cr) }

// What a lookup sees is no input of the digest: a release whose rendering looked anything up is
// rendered again at every check, in this process and the next, and the objects it read are
// followed, so that a change of one wakes it.
func TestAReleaseThatLookedUpIsRenderedAtEveryCheck(t *testing.T) {
	api := newAPIServer(t)
	fake := &recordingClient{lookups: []string{"/api/v1/namespaces/ns/secrets/tls"}}
	fake.cfg = &action.Configuration{Capabilities: chartutil.DefaultCapabilities.Copy(), RESTClientGetter: restGetter{host: api.URL}}
	renderinputs.InstallRecorder(fake.cfg, nil)
	tracker := &fakeTracker{}
	getter := digesterOf(fake, testOptions{Lookups: tracker})
	chrt, vals := testChart("kind: ConfigMap"), map[string]any{}

	if _, err := reconcileOf(t, getter).Install("p", "ns", chrt, vals); err != nil {
		t.Fatal(err)
	}
	if got := fake.labels[LookupsLabel]; got != "1" {
		t.Errorf("install labelled %s=%q, want 1 (one object looked up)", LookupsLabel, got)
	}
	reads := tracker.followed[renderinputs.CR{GVK: crGVK, NamespacedName: crKey}]
	if len(reads) != 1 || reads[0].Name != "tls" || reads[0].Namespace != "ns" {
		t.Fatalf("the custom resource follows %+v, want the Secret ns/tls it looked up", reads)
	}
	fake.dryRunManifest = "installed" // the rendering is the deployed one
	for i := range 2 {
		if n := dryRunsOf(t, getter, fake, chrt, vals); n != 1 {
			t.Errorf("check %d of a release that looked up: dry runs = %d, want 1", i+1, n)
		}
	}
	if n := dryRunsOf(t, digesterOf(fake, testOptions{Lookups: tracker}), fake, chrt, vals); n != 1 {
		t.Errorf("a restarted operator trusted a release whose rendering looked something up: dry runs = %d, want 1", n)
	}

	// Uninstall forgets the custom resource.
	fake.rel = &release.Release{Name: "p", Info: &release.Info{Status: release.StatusDeployed}}
	fake.ActionInterface = uninstallOK{}
	if _, err := reconcileOf(t, getter).Uninstall("p"); err != nil {
		t.Fatal(err)
	}
	if len(tracker.followed) != 0 {
		t.Errorf("after uninstall the custom resource still follows %v", tracker.followed)
	}
}

type uninstallOK struct{ helmclient.ActionInterface }

func (uninstallOK) Uninstall(string, ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	return &release.UninstallReleaseResponse{}, nil
}

func TestCapabilitiesEnterTheDigestOfChartsThatReadThem(t *testing.T) {
	plain := testChart("kind: ConfigMap")
	probing := testChart(`{{ if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}kind: ServiceMonitor{{ end }}`)
	for _, tc := range []struct {
		name      string
		chrt      *chart.Chart
		wantAfter int
	}{
		{name: "chart without .Capabilities", chrt: plain, wantAfter: 0},
		{name: "chart testing an API version", chrt: probing, wantAfter: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &recordingClient{}
			c := tc.chrt
			_, _ = digestedClient(t, fake).Install("p", "ns", c, map[string]any{})
			fake.Config().Capabilities.APIVersions = append(fake.Config().Capabilities.APIVersions, "monitoring.coreos.com/v1")
			if n := dryRunsOfAReconcile(t, fake, c, map[string]any{}); n != tc.wantAfter {
				t.Errorf("after a new API appeared: dry runs = %d, want %d", n, tc.wantAfter)
			}
		})
	}
}

func TestDryRunOptionReachesTheCheck(t *testing.T) {
	var seen []string
	fake := &optionsClient{record: func(u *action.Upgrade) { seen = append(seen, u.DryRunOption) }}
	getter := digesterOf(fake, testOptions{DryRunOption: "client"})
	ac := reconcileOf(t, getter)
	_, _ = ac.Upgrade("p", "ns", testChart("kind: ConfigMap"), nil,
		func(u *action.Upgrade) error { u.DryRun = true; u.DryRunOption = "server"; return nil })
	if strings.Join(seen, ",") != "client" {
		t.Errorf("the check ran with dry-run option %v, want client", seen)
	}
}

type optionsClient struct {
	recordingClient
	record func(*action.Upgrade)
}

func (o *optionsClient) Upgrade(name, ns string, c *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	var u action.Upgrade
	for _, f := range opts {
		_ = f(&u)
	}
	o.record(&u)
	return &release.Release{Name: name}, nil
}

// helmClient runs Helm's own install and upgrade, on in-memory storage and a fake kube client:
// what the test checks is what Helm stores.
type helmClient struct {
	helmclient.ActionInterface
	cfg     *action.Configuration
	dryRuns int
}

// newHelmClient runs Helm's actions on in-memory storage, with lookups served by api and
// recorded, as helmconfig sets up a Configuration.
func newHelmClient(api *apiserver) *helmClient {
	cfg := &action.Configuration{
		Releases:         storage.Init(driver.NewMemory()),
		KubeClient:       &fake.PrintingKubeClient{Out: io.Discard},
		Capabilities:     chartutil.DefaultCapabilities.Copy(),
		RESTClientGetter: restGetter{host: api.URL},
		Log:              func(string, ...any) {},
	}
	renderinputs.InstallRecorder(cfg, nil)
	return &helmClient{cfg: cfg}
}

func (h *helmClient) Config() *action.Configuration { return h.cfg }

func (h *helmClient) Get(name string, _ ...helmclient.GetOption) (*release.Release, error) {
	return h.cfg.Releases.Last(name)
}

func (h *helmClient) Install(name, ns string, c *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	i := action.NewInstall(h.cfg)
	i.ReleaseName, i.Namespace = name, ns
	for _, o := range opts {
		_ = o(i)
	}
	return i.Run(c, vals)
}

func (h *helmClient) Upgrade(name, ns string, c *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	u := action.NewUpgrade(h.cfg)
	u.Namespace = ns
	for _, o := range opts {
		_ = o(u)
	}
	if u.DryRun {
		h.dryRuns++
	}
	return u.Run(name, c, vals)
}

// Helm stores the labels of a revision after its rendering ran, so the count of lookups that
// the rendering did reaches the release record.
func TestHelmStoresTheLookupCountOfTheRendering(t *testing.T) {
	api := newAPIServer(t)
	h := newHelmClient(api)
	cfg := h.cfg
	tracker := &fakeTracker{}
	getter := digesterOf(h, testOptions{Lookups: tracker})
	// The lookup's kind is a variable: nothing in the template text names it.
	chrt := testChart(`{{ $kind := "Secret" }}{{ $s := lookup "v1" $kind .Release.Namespace "tls" }}` +
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  rv: {{ $s.metadata.resourceVersion | quote }}\n")

	for _, step := range []struct {
		name string
		run  func(helmclient.ActionInterface) (*release.Release, error)
	}{
		{name: "install", run: func(ac helmclient.ActionInterface) (*release.Release, error) {
			return ac.Install("p", "ns", chrt, map[string]any{})
		}},
		{name: "upgrade", run: func(ac helmclient.ActionInterface) (*release.Release, error) {
			_, _ = ac.Get("p")
			return ac.Upgrade("p", "ns", chrt, map[string]any{"replicas": 2})
		}},
	} {
		rel, err := step.run(reconcileOf(t, getter))
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		stored, err := cfg.Releases.Get("p", rel.Version)
		if err != nil {
			t.Fatal(err)
		}
		if got := stored.Labels[LookupsLabel]; got != "1" {
			t.Errorf("%s: stored %s=%q, want 1", step.name, LookupsLabel, got)
		}
		if !strings.Contains(stored.Manifest, `rv: "1"`) {
			t.Errorf("%s: the lookup did not reach the template:\n%s", step.name, stored.Manifest)
		}
		reads := tracker.followed[renderinputs.CR{GVK: crGVK, NamespacedName: crKey}]
		if len(reads) != 1 || reads[0].Name != "tls" {
			t.Errorf("%s: followed %+v, want the Secret ns/tls", step.name, reads)
		}
	}
}

// The fast path answers "unchanged" only when Helm's own dry run renders the deployed manifest:
// each change of an input that the chart reads is run through both, on Helm's real actions.
func TestTheDigestAnswersOnlyWhatARenderingWould(t *testing.T) {
	api := newAPIServer(t)
	h := newHelmClient(api)
	cfg := h.cfg
	getter := digesterOf(h, testOptions{Lookups: &fakeTracker{}})
	chrt := testChart("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n" +
		`  monitoring: {{ .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" | quote }}` + "\n" +
		`  replicas: {{ .Values.replicas | quote }}` + "\n")
	vals := map[string]any{"replicas": 1}
	if _, err := reconcileOf(t, getter).Install("p", "ns", chrt, vals); err != nil {
		t.Fatal(err)
	}

	// rendersDeployed runs Helm's own dry run, bypassing the digest.
	rendersDeployed := func() bool {
		cur, err := cfg.Releases.Last("p")
		if err != nil {
			t.Fatal(err)
		}
		u := action.NewUpgrade(cfg)
		u.Namespace, u.DryRun, u.DryRunOption = "ns", true, "server"
		rel, err := u.Run("p", chrt, vals)
		if err != nil {
			t.Fatal(err)
		}
		return rel.Manifest == cur.Manifest
	}
	for _, step := range []struct {
		name   string
		change func()
	}{
		{name: "nothing", change: func() {}},
		{name: "a new API", change: func() {
			cfg.Capabilities.APIVersions = append(cfg.Capabilities.APIVersions, "monitoring.coreos.com/v1")
		}},
		{name: "the values", change: func() { vals = map[string]any{"replicas": 2} }},
		{name: "an unread API", change: func() {
			cfg.Capabilities.APIVersions = append(cfg.Capabilities.APIVersions, "unrelated.example.com/v1")
		}},
	} {
		step.change()
		ac := reconcileOf(t, getter)
		cur, err := ac.Get("p")
		if err != nil {
			t.Fatal(err)
		}
		h.dryRuns = 0
		// The reconciler's check: a dry run on the server, which looks objects up.
		checked, err := ac.Upgrade("p", "ns", chrt, vals,
			func(u *action.Upgrade) error { u.DryRun, u.DryRunOption = true, "server"; return nil })
		if err != nil {
			t.Fatal(err)
		}
		fast := h.dryRuns == 0
		same := rendersDeployed()
		if fast && !same {
			t.Errorf("%s: answered unchanged from the digest, but a rendering differs from the deployed manifest", step.name)
		}
		if strings.HasPrefix(step.name, "nothing") && !fast {
			t.Errorf("%s: rendered although no input changed", step.name)
		}
		if fast != same {
			t.Logf("%s: rendered although the manifest is the same (allowed: a check is never wrong by rendering)", step.name)
		}
		if !same {
			if checked.Manifest == cur.Manifest {
				t.Errorf("%s: the check returned the deployed manifest for changed inputs", step.name)
			}
			if _, err := ac.Upgrade("p", "ns", chrt, vals); err != nil { // what the reconciler does next
				t.Fatal(err)
			}
		}
	}
}

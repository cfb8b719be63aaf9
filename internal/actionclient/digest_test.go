package actionclient

import (
	"context"
	"net/http"
	"testing"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/renderinputs"
)

// recordingClient is a fake Helm action client: it keeps one release and counts calls.
type recordingClient struct {
	helmclient.ActionInterface
	rel                     *release.Release
	gets, dryRuns, upgrades int
	labels                  map[string]string // labels of the last install or upgrade
	cfg                     *action.Configuration
	// lookups are apiserver paths each rendering reads through the Configuration's REST config,
	// as Helm's lookup function does.
	lookups []string
	// manifest of the next dry run ("rendered" when empty)
	dryRunManifest string
}

// Config returns a Configuration with the capabilities and a recorder, as helmconfig builds it.
func (f *recordingClient) Config() *action.Configuration {
	if f.cfg == nil {
		f.cfg = &action.Configuration{Capabilities: chartutil.DefaultCapabilities.Copy(), RESTClientGetter: restGetter{}}
		renderinputs.InstallRecorder(f.cfg, nil)
	}
	return f.cfg
}

// render reads what the chart looks up, through the recording REST config.
func (f *recordingClient) render() {
	if len(f.lookups) == 0 {
		return
	}
	cfg, err := f.Config().RESTClientGetter.ToRESTConfig()
	if err != nil {
		panic(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		panic(err)
	}
	for _, path := range f.lookups {
		resp, err := (&http.Client{Transport: rt}).Get(cfg.Host + path)
		if err != nil {
			panic(err)
		}
		_ = resp.Body.Close()
	}
}

func (f *recordingClient) Get(string, ...helmclient.GetOption) (*release.Release, error) {
	f.gets++
	return f.rel, nil
}

func (f *recordingClient) Install(name, _ string, _ *chart.Chart, _ map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	var i action.Install
	for _, o := range opts {
		_ = o(&i)
	}
	rel := &release.Release{Name: name, Version: 1, Labels: i.Labels, Manifest: "installed", Info: &release.Info{Status: release.StatusDeployed}}
	f.render() // Helm renders after it created the release with the labels map
	f.labels = i.Labels
	f.rel = rel
	return f.rel, nil
}

func (f *recordingClient) Upgrade(name, _ string, _ *chart.Chart, _ map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	var u action.Upgrade
	for _, o := range opts {
		_ = o(&u)
	}
	f.render()
	if u.DryRun {
		f.dryRuns++
		m := f.dryRunManifest
		if m == "" {
			m = "rendered"
		}
		return &release.Release{Name: name, Manifest: m}, nil
	}
	f.upgrades++
	f.labels = u.Labels // Helm reads the labels after rendering
	version := 1
	if f.rel != nil {
		version = f.rel.Version + 1
	}
	f.rel = &release.Release{Name: name, Version: version, Labels: u.Labels, Manifest: "upgraded", Info: &release.Info{Status: release.StatusDeployed}}
	return f.rel, nil
}

func testChart(template string) *chart.Chart {
	return &chart.Chart{
		Metadata:  &chart.Metadata{Name: "myproxy", Version: "0.1.0"},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte(template)}},
		Values:    map[string]any{"replicas": 1},
	}
}

func digestedClient(t *testing.T, fake *recordingClient) helmclient.ActionInterface {
	t.Helper()
	return digestedClientWith(t, fake, testOptions{})
}

// testOptions are what a test chooses of a getter: its Digests' lookups and stamp, and the
// check's dry-run option.
type testOptions struct {
	Lookups             LookupTracker
	Stamp, DryRunOption string
}

// digestedClientWith returns the action client of one reconcile. Each call stands for a new
// operator process: it knows only what the release labels say.
func digestedClientWith(t *testing.T, fake *recordingClient, o testOptions) helmclient.ActionInterface {
	t.Helper()
	return reconcileOf(t, digesterOf(fake, o))
}

// digesterOf returns a getter with digests over ac: a new one stands for a new operator process.
func digesterOf(ac helmclient.ActionInterface, o testOptions) helmclient.ActionClientGetter {
	return New(getterOf(ac), Options{Digests: &Digests{Lookups: o.Lookups, Stamp: o.Stamp}, DryRunOption: o.DryRunOption,
		Recorder: record.NewFakeRecorder(1000)})
}

// getterOf hands out ac for every resource.
func getterOf(ac helmclient.ActionInterface) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(context.Context, client.Object) (helmclient.ActionInterface, error) {
		return ac, nil
	})
}

// The custom resource of the tests.
var (
	crGVK = schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"}
	crKey = types.NamespacedName{Namespace: "ns", Name: "p"}
)

// reconcileOf returns the action client of one reconcile of custom resource ns/p.
func reconcileOf(t *testing.T, getter helmclient.ActionClientGetter) helmclient.ActionInterface {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(crGVK)
	cr.SetNamespace(crKey.Namespace)
	cr.SetName(crKey.Name)
	ac, err := getter.ActionClientFor(ctx, cr)
	if err != nil {
		t.Fatal(err)
	}
	return ac
}

// dryRunsOf runs through getter what the reconciler does to decide on an upgrade (read the
// release, then a dry-run upgrade) and returns how many dry runs reached Helm.
func dryRunsOf(t *testing.T, getter helmclient.ActionClientGetter, fake *recordingClient, chrt *chart.Chart, vals map[string]any) int {
	t.Helper()
	fake.dryRuns = 0
	ac := reconcileOf(t, getter)
	_, _ = ac.Get("p")
	if _, err := ac.Upgrade("p", "ns", chrt, vals, dryRun); err != nil {
		t.Fatal(err)
	}
	return fake.dryRuns
}

// dryRunsOfAReconcile is dryRunsOf in a new operator process.
func dryRunsOfAReconcile(t *testing.T, fake *recordingClient, chrt *chart.Chart, vals map[string]any) int {
	t.Helper()
	return dryRunsOf(t, digesterOf(fake, testOptions{}), fake, chrt, vals)
}

func TestDigestSkipsTheDryRunOnlyForTheSameChartAndValues(t *testing.T) {
	chrt := testChart("kind: ConfigMap")
	vals := map[string]any{"replicas": 2}
	fake := &recordingClient{}
	if _, err := digestedClient(t, fake).Install("p", "ns", chrt, vals); err != nil {
		t.Fatal(err)
	}
	d := fake.labels[DigestLabel]
	if len(d) != 32 {
		t.Fatalf("install labelled the release %q=%q, want a 32-character digest", DigestLabel, d)
	}

	// The next reconcile: same chart, same values. The dry run is answered with the release.
	ac := digestedClient(t, fake)
	cur, _ := ac.Get("p")
	got, err := ac.Upgrade("p", "ns", chrt, map[string]any{"replicas": 2}, dryRun)
	if err != nil {
		t.Fatal(err)
	}
	if got != cur || fake.dryRuns != 0 {
		t.Errorf("same chart and values: dry runs = %d, returned %v; want 0 and the deployed release", fake.dryRuns, got.Manifest)
	}

	changes := map[string]func() (*chart.Chart, map[string]any){
		"values":   func() (*chart.Chart, map[string]any) { return chrt, map[string]any{"replicas": 3} },
		"template": func() (*chart.Chart, map[string]any) { return testChart("kind: Secret"), vals },
		"chart defaults": func() (*chart.Chart, map[string]any) {
			c := testChart("kind: ConfigMap")
			c.Values["x"] = 1
			return c, vals
		},
	}
	for what, change := range changes {
		c, v := change()
		if n := dryRunsOfAReconcile(t, fake, c, v); n != 1 {
			t.Errorf("changed %s: dry runs = %d, want 1", what, n)
		}
	}
}

// The managed label value (the shard) is stamped on every rendered object: a release installed
// by one shard is not what another shard's rendering of the same chart and values is.
func TestDigestSeesTheStamp(t *testing.T) {
	chrt, vals := testChart("kind: ConfigMap"), map[string]any{}
	fake := &recordingClient{}
	if _, err := digestedClientWith(t, fake, testOptions{Stamp: "a"}).Install("p", "ns", chrt, vals); err != nil {
		t.Fatal(err)
	}
	if n := dryRunsOf(t, digesterOf(fake, testOptions{Stamp: "a"}), fake, chrt, vals); n != 0 {
		t.Errorf("same shard: dry runs = %d, want 0", n)
	}
	if n := dryRunsOf(t, digesterOf(fake, testOptions{Stamp: "b"}), fake, chrt, vals); n != 1 {
		t.Errorf("another shard: dry runs = %d, want 1", n)
	}
}

func TestDigestNeverSkipsForAReleaseThatIsNotDeployed(t *testing.T) {
	chrt, vals := testChart("kind: ConfigMap"), map[string]any{}
	fake := &recordingClient{}
	_, _ = digestedClient(t, fake).Install("p", "ns", chrt, vals)
	fake.rel.Info.Status = release.StatusFailed
	if n := dryRunsOfAReconcile(t, fake, chrt, vals); n != 1 {
		t.Errorf("failed release: dry runs = %d, want 1", n)
	}
}

func TestUpgradeRecordsTheNewDigestAndGetIsReadOnceUntilAChange(t *testing.T) {
	chrt := testChart("kind: ConfigMap")
	fake := &recordingClient{}
	_, _ = digestedClient(t, fake).Install("p", "ns", chrt, map[string]any{"replicas": 1})
	first := fake.labels[DigestLabel]

	fake.gets = 0
	ac := digestedClient(t, fake)
	_, _ = ac.Get("p")
	_, _ = ac.Get("p")
	if fake.gets != 1 {
		t.Errorf("two reads in one reconcile reached storage %d times, want 1", fake.gets)
	}
	if _, err := ac.Upgrade("p", "ns", chrt, map[string]any{"replicas": 2}); err != nil {
		t.Fatal(err)
	}
	if fake.labels[DigestLabel] == "" || fake.labels[DigestLabel] == first {
		t.Errorf("upgrade labelled %q, want a new digest (was %q)", fake.labels[DigestLabel], first)
	}
	rel, _ := ac.Get("p")
	if fake.gets != 2 || rel.Manifest != "upgraded" {
		t.Errorf("read after an upgrade: storage reads = %d, manifest %q; want a fresh read of the upgrade", fake.gets, rel.Manifest)
	}
}

// Helm copies a release's labels into the next revision, also into one made by hand: those
// labels describe another rendering, and the check must run, in this process and the next.
func TestLabelsCopiedIntoAHandMadeRevisionAreNotTrusted(t *testing.T) {
	chrt, vals := testChart("kind: ConfigMap"), map[string]any{}
	fake := &recordingClient{}
	getter := digesterOf(fake, testOptions{})
	if _, err := reconcileOf(t, getter).Install("p", "ns", chrt, vals); err != nil {
		t.Fatal(err)
	}
	if got := fake.rel.Labels[RevisionLabel]; got != "1" {
		t.Fatalf("install labelled %s=%q, want 1", RevisionLabel, got)
	}
	handMade := *fake.rel // `helm upgrade --reuse-values --set ...`: revision 2, labels of revision 1
	handMade.Version, handMade.Manifest = 2, "edited by hand"
	fake.rel = &handMade
	for name, g := range map[string]helmclient.ActionClientGetter{
		"same process": getter,
		"new process":  digesterOf(fake, testOptions{}),
	} {
		if n := dryRunsOf(t, g, fake, chrt, vals); n != 1 {
			t.Errorf("%s: dry runs = %d, want 1: the hand-made revision was taken for the operator's", name, n)
		}
	}
}

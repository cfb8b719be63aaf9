package integration

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	"github.com/prometheus/client_golang/prometheus"
	v3chart "helm.sh/helm/v3/pkg/chart"
	v3release "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	releasei "helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	eventrecord "k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/shard"
	"github.com/example/myproxy-operator/test/harness"
)

// The action client (actionclient.Client) makes promises that only the plugins' own reconciler,
// driving it, can show. Here that reconciler drives the real client, in this process against the
// envtest apiserver, with a probe on the calls the reconciler makes, and probes on what reaches
// the cluster below the client (the release storage, Helm's kube client), and each promise is
// checked from what the probes saw:
//
//   - claims: everything that reaches the cluster (a record read or written, an object built,
//     created, updated or deleted) happens while a claim is open, so a handover (Claims.Release)
//     waits for all of it;
//   - digests: a check they answer reaches nothing below: no dry run, no Event, no metric, no
//     record read beyond the one that begins the reconcile;
//   - unlocking: the reconciler never sees a pending release; only the storage does.

var probeGVK = schema.GroupVersionKind{Group: "stack.example.com", Version: "v1", Kind: "Probe"}

// The probed boundaries: the calls the reconciler makes, and what reaches the cluster.
const (
	layerReconciler = "reconciler"
	layerCluster    = "cluster"
)

// call is one call a probe saw.
type call struct {
	layer   string // layerReconciler or layerCluster
	method  string // Get, History, Install, Upgrade, DryRun, Uninstall, Reconcile; below, the storage and kube client's
	pending bool   // a read returned a pending release
}

// probes records what crosses every boundary of the stack.
type probes struct {
	claims  *shard.Claims
	seeding atomic.Bool // the test itself writes a release record
	mu      sync.Mutex
	calls   []call
	// unclaimed is what reached the cluster with no claim open.
	unclaimed []string
	storage   int // record reads and writes seen
}

func (p *probes) saw(c call) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, c)
	if c.layer == layerCluster && !p.seeding.Load() && p.claims.Len() == 0 {
		p.unclaimed = append(p.unclaimed, c.method)
	}
	if strings.HasPrefix(c.method, "record ") {
		p.storage++
	}
}

// since returns the calls seen after the first n.
func (p *probes) since(n int) []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]call(nil), p.calls[n:]...)
}

// idle returns how many calls and record reads or writes were seen, at a moment when no claim
// is open: everything reaching the cluster has either ended or not begun.
func (p *probes) idle(t *testing.T) (calls, storage int) {
	t.Helper()
	harness.Eventually(t, timeout, "no action in flight", func(context.Context) (bool, string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		calls, storage = len(p.calls), p.storage
		return p.claims.Len() == 0, "a claim is open"
	})
	return calls, storage
}

func (p *probes) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls)
}

// tap probes the calls the reconciler makes on the clients g gives.
func (p *probes) tap(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		ac, err := g.ActionClientFor(ctx, obj)
		if err != nil {
			return nil, err
		}
		return &probeClient{ActionInterface: ac, p: p}, nil
	})
}

type probeClient struct {
	helmclient.ActionInterface
	p *probes
}

func pendingV3(rel *v3release.Release) bool {
	return rel != nil && rel.Info != nil && rel.Info.Status.IsPending()
}

func (c *probeClient) Get(name string, opts ...helmclient.GetOption) (*v3release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	c.p.saw(call{layer: layerReconciler, method: "Get", pending: pendingV3(rel)})
	return rel, err
}

func (c *probeClient) Install(name, namespace string, chrt *v3chart.Chart, vals map[string]any,
	opts ...helmclient.InstallOption) (*v3release.Release, error) {
	c.p.saw(call{layer: layerReconciler, method: "Install"})
	return c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
}

func (c *probeClient) Upgrade(name, namespace string, chrt *v3chart.Chart, vals map[string]any,
	opts ...helmclient.UpgradeOption) (*v3release.Release, error) {
	c.p.saw(call{layer: layerReconciler, method: "Upgrade"})
	return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
}

func (c *probeClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*v3release.UninstallReleaseResponse, error) {
	c.p.saw(call{layer: layerReconciler, method: "Uninstall"})
	return c.ActionInterface.Uninstall(name, opts...)
}

func (c *probeClient) Reconcile(rel *v3release.Release) error {
	err := c.ActionInterface.Reconcile(rel)
	c.p.saw(call{layer: layerReconciler, method: "Reconcile"})
	return err
}

// probedConfigs gives the Helm configurations of the operator, their storage and kube client
// probed.
type probedConfigs struct {
	*helmconfig.Configs
	p *probes
}

func (c probedConfigs) For(ctx context.Context, obj client.Object, log logr.Logger) (*action.Configuration, *helmconfig.Recorder, error) {
	cfg, reads, err := c.Configs.For(ctx, obj, log)
	if err != nil {
		return nil, nil, err
	}
	cfg.Releases = storage.Init(probedDriver{Driver: cfg.Releases.Driver, p: c.p})
	cfg.KubeClient = probedKube{Interface: cfg.KubeClient, p: c.p}
	return cfg, reads, nil
}

// probedDriver is the release storage, telling the probes of every read and write.
type probedDriver struct {
	driver.Driver
	p *probes
}

func pendingOf(rels ...releasei.Releaser) bool {
	return slices.ContainsFunc(rels, func(r releasei.Releaser) bool {
		rel, ok := r.(*release.Release)
		return ok && rel.Info.Status.IsPending()
	})
}

func (d probedDriver) Get(key string) (releasei.Releaser, error) {
	rel, err := d.Driver.Get(key)
	d.p.saw(call{layer: layerCluster, method: "record get", pending: pendingOf(rel)})
	return rel, err
}

func (d probedDriver) List(filter func(releasei.Releaser) bool) ([]releasei.Releaser, error) {
	rels, err := d.Driver.List(filter)
	d.p.saw(call{layer: layerCluster, method: "record list", pending: pendingOf(rels...)})
	return rels, err
}

func (d probedDriver) Query(labels map[string]string) ([]releasei.Releaser, error) {
	rels, err := d.Driver.Query(labels)
	d.p.saw(call{layer: layerCluster, method: "record query", pending: pendingOf(rels...)})
	return rels, err
}

func (d probedDriver) Create(key string, rls releasei.Releaser) error {
	d.p.saw(call{layer: layerCluster, method: "record create"})
	return d.Driver.Create(key, rls)
}

func (d probedDriver) Update(key string, rls releasei.Releaser) error {
	d.p.saw(call{layer: layerCluster, method: "record update"})
	return d.Driver.Update(key, rls)
}

func (d probedDriver) Delete(key string) (releasei.Releaser, error) {
	d.p.saw(call{layer: layerCluster, method: "record delete"})
	return d.Driver.Delete(key)
}

// probedKube is Helm's kube client, telling the probes of what it builds and writes.
type probedKube struct {
	kube.Interface
	p *probes
}

func (k probedKube) Build(r io.Reader, validate bool) (kube.ResourceList, error) {
	k.p.saw(call{layer: layerCluster, method: "build"})
	return k.Interface.Build(r, validate)
}

func (k probedKube) Create(resources kube.ResourceList, opts ...kube.ClientCreateOption) (*kube.Result, error) {
	k.p.saw(call{layer: layerCluster, method: "create"})
	return k.Interface.Create(resources, opts...)
}

func (k probedKube) Update(original, target kube.ResourceList, opts ...kube.ClientUpdateOption) (*kube.Result, error) {
	k.p.saw(call{layer: layerCluster, method: "update"})
	return k.Interface.Update(original, target, opts...)
}

func (k probedKube) Delete(resources kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	k.p.saw(call{layer: layerCluster, method: "delete"})
	return k.Interface.Delete(resources, policy)
}

// events collects what the stack and the reconciler record.
type events struct {
	mu      sync.Mutex
	reasons []string
}

func (e *events) collect(ch <-chan string) {
	for ev := range ch {
		e.mu.Lock()
		e.reasons = append(e.reasons, ev)
		e.mu.Unlock()
	}
}

func (e *events) since(n int) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.reasons[n:]...)
}

func (e *events) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.reasons)
}

// checksCounted is how many "is an upgrade needed?" checks rendered, as the metrics count them.
func checksCounted(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() != "myproxy_operator_helm_action_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" && l.GetValue() == string(actionclient.ActionCheck) {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

// stackUnderThePluginsReconciler starts, in this process, helm-operator-plugins' reconciler for
// Probe in ns with the real action client over the operator's Helm configuration, sharded so
// that claims are made, every boundary probed. It returns the configurations, to seed records.
func stackUnderThePluginsReconciler(t *testing.T, ns string, chrt *chart.Chart) (*probes, *events, *prometheus.Registry, *helmconfig.Configs) {
	t.Helper()
	logf.SetLogger(logr.Discard()) // the reconciler's log is not under test
	mgr, err := manager.New(cfg, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &probes{claims: shard.NewClaims()}
	configs, err := helmconfig.New(mgr.GetConfig(), mgr.GetRESTMapper(), helmconfig.Settings{Managed: names.ManagedValue,
		Records: helmconfig.NewRecords(nil)})
	if err != nil {
		t.Fatal(err)
	}
	fake := eventrecord.NewFakeRecorder(1000)
	evs := &events{}
	go evs.collect(fake.Events)
	reg := prometheus.NewRegistry()
	metrics, err := actionclient.NewMetrics(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ac := actionclient.New(actionclient.Options{GVK: probeGVK, Chart: chrt, Configs: probedConfigs{Configs: configs, p: p},
		Translate: func(_ context.Context, obj *unstructured.Unstructured) (map[string]any, error) {
			spec, _ := obj.Object["spec"].(map[string]any)
			return spec, nil
		},
		Recorder: fake, Metrics: metrics, Unlock: actionclient.SoleWriter{}, // no leader election: pending is abandoned at once
		Shard: shard.Shard{Name: "a", Fleet: []string{"a"}}, Claims: p.claims, Writer: mgr.GetClient(),
		Digests: actionclient.NewDigests(nil, probeGVK, nil, ""),
	})
	r, err := reconciler.New(
		reconciler.WithGroupVersionKind(probeGVK),
		reconciler.WithChart(actionclient.ReconcilerChart(chrt)),
		reconciler.SkipDependentWatches(true),
		reconciler.WithEventRecorder(fake),
		reconciler.WithActionClientGetter(p.tap(ac)),
		reconciler.WithValueTranslator(ac.Translator()),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return p, evs, reg, configs
}

func probeCRD(t *testing.T, c client.Client) {
	t.Helper()
	open := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "probes.stack.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: probeGVK.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "probes", Singular: "probe", Kind: "Probe", ListKind: "ProbeList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &open}}}},
		},
	}
	if err := c.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	harness.Eventually(t, timeout, "the Probe CRD served", func(ctx context.Context) (bool, string) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(probeGVK.GroupVersion().WithKind("ProbeList"))
		err := c.List(ctx, l)
		return err == nil, fmt.Sprint(err)
	})
}

// probeSetup serves the Probe kind and returns a client, a namespace and the Probe chart.
func probeSetup(t *testing.T) (client.Client, string, *chart.Chart) {
	t.Helper()
	c := harness.NewClient(t, cfg)
	probeCRD(t, c)
	chrt, err := loader.Load(writeChart(t, map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: probe\nversion: 0.1.0\n",
		"values.yaml":         "message: hello\n",
		"templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  message: {{ .Values.message | quote }}\n",
		"templates/NOTES.txt": "notes of {{ .Release.Name }}",
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c, newNamespace(t, c, nil), chrt
}

func newProbe(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(probeGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func TestTheActionClientKeepsItsPromisesUnderThePluginsReconciler(t *testing.T) {
	ctx := context.Background()
	c, ns, chrt := probeSetup(t)
	p, evs, reg, configs := stackUnderThePluginsReconciler(t, ns, chrt)
	probe := newProbe(ns, "p", map[string]any{"message": "a"})
	patch := func(mergePatch string) {
		t.Helper()
		if err := c.Patch(ctx, probe.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(mergePatch))); err != nil {
			t.Fatal(err)
		}
	}
	// reconciled waits for a reconcile that began after the first n calls to reach its end: the
	// drift correction (Reconcile) that ends every reconcile of a deployed, unchanged release.
	reconciled := func(n int, what string) {
		t.Helper()
		harness.Eventually(t, timeout, what, func(context.Context) (bool, string) {
			seen := p.since(n)
			for _, c := range seen {
				if c.layer == layerReconciler && c.method == "Reconcile" {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d calls", len(seen))
		})
	}
	// below lists what reached the cluster.
	below := func(seen []call) (methods []string) {
		for _, c := range seen {
			if c.layer == layerCluster {
				methods = append(methods, c.method)
			}
		}
		return methods
	}

	if err := c.Create(ctx, probe.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	reconciled(0, "installed and reconciled once unchanged")

	t.Log("inputs that change but render the same manifest: a real dry run, then answered")
	n, checked := p.count(), checksCounted(t, reg)
	patch(`{"spec":{"unused":"x"}}`)
	reconciled(n, "a reconcile of the new inputs")
	harness.Eventually(t, timeout, "new inputs checked with a dry run", func(context.Context) (bool, string) {
		return checksCounted(t, reg) > checked, "no check counted"
	})

	t.Log("digests: an answered check reaches nothing below")
	n, stored := p.idle(t)
	e, checked := evs.count(), checksCounted(t, reg)
	patch(`{"metadata":{"annotations":{"poke":"1"}}}`)
	reconciled(n, "a reconcile of unchanged inputs")
	end, storedEnd := p.idle(t)
	seen := p.since(n)[:end-n]
	for _, m := range below(seen) {
		if m == "create" || m == "update" || m == "delete" || m == "record create" || m == "record update" {
			t.Errorf("an answered dry run reached the cluster: %s", m)
		}
	}
	// The reconcile's beginning reads the release once; a dry run would read the history again.
	if reads := storedEnd - stored; reads != 1 {
		t.Errorf("%d release record reads: an answered dry run read the release (%v)", reads, below(seen))
	}
	if got := checksCounted(t, reg); got != checked {
		t.Errorf("an answered dry run was counted in the metrics (%d checks, %d before)", got, checked)
	}
	if got := evs.since(e); len(got) > 0 {
		t.Errorf("an answered dry run recorded Events: %v", got)
	}

	t.Log("unlocking: a pending release is repaired before the reconciler reads it")
	live := probe.DeepCopy()
	if err := c.Get(ctx, client.ObjectKeyFromObject(live), live); err != nil {
		t.Fatal(err)
	}
	seedPending(t, configs, live, p)
	n, e = p.count(), evs.count()
	patch(`{"spec":{"message":"b"}}`)
	// Upgraded from the repaired release: to the new spec, in one revision or two (a reconcile
	// already under way when the record was marked pending upgrades it to the old spec first).
	harness.Eventually(t, timeout, "upgraded from the repaired release", func(ctx context.Context) (bool, string) {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p"}, cm); err != nil {
			return false, err.Error()
		}
		var last map[string]string // the labels of the newest revision
		newest := 1
		for _, r := range releaseRecords(ctx, t, c, ns, "p") {
			if v, _ := strconv.Atoi(r.Labels["version"]); v > newest {
				newest, last = v, r.Labels
			}
		}
		return cm.Data["message"] == "b" && last["status"] == string(common.StatusDeployed),
			fmt.Sprintf("message %q, last revision %v", cm.Data["message"], last)
	})
	seen = p.since(n)
	var sawPending bool
	for _, c := range seen {
		if !c.pending {
			continue
		}
		if c.layer == layerCluster {
			sawPending = true
		} else {
			t.Errorf("the reconciler read a pending release (%s)", c.method)
		}
	}
	if !sawPending {
		t.Errorf("the storage never returned the pending release: the scenario did not happen: %v", seen)
	}
	if got := evs.since(e); !containsPrefix(got, "Warning "+names.ReasonReleaseUnlocked) {
		t.Errorf("no %s Event: %v", names.ReasonReleaseUnlocked, got)
	}

	t.Log("claims: a handover waits for everything that reaches the cluster")
	n = p.count()
	if err := c.Delete(ctx, probe.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	harness.WaitForGone(t, c, probe.DeepCopy(), timeout)
	if !contains(below(p.since(n)), "delete") {
		t.Errorf("the deletion uninstalled nothing: %v", p.since(n))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.storage == 0 {
		t.Error("no release record was read or written: the storage probe is not in place")
	}
	if len(p.unclaimed) > 0 {
		t.Errorf("with no claim open (a handover would not wait for them): %v", p.unclaimed)
	}
}

// seedPending marks the last revision of obj's release pending-upgrade, as an action killed
// midway leaves it.
func seedPending(t *testing.T, configs *helmconfig.Configs, obj client.Object, p *probes) {
	t.Helper()
	p.seeding.Store(true)
	defer p.seeding.Store(false)
	cfg, _, err := configs.For(context.Background(), obj, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	last, err := cfg.Releases.Last(obj.GetName())
	if err != nil {
		t.Fatal(err)
	}
	rel := last.(*release.Release)
	rel.Info.Status = common.StatusPendingUpgrade
	if err := cfg.Releases.Update(rel); err != nil {
		t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsPrefix(list []string, prefix string) bool {
	for _, x := range list {
		if strings.HasPrefix(x, prefix) {
			return true
		}
	}
	return false
}

// What this operator reads of the status helm-operator-plugins' reconciler writes (package
// status.PluginWrites keeps it, package status reads Deployed from it, the manifest is dropped by
// name), pinned on the plugins' own reconciler: an upgrade of the plugins that changes the
// shape fails here, not in a cluster.
func TestThePluginsStatusShapeIsTheOneThisOperatorReads(t *testing.T) {
	ctx := context.Background()
	c, ns, chrt := probeSetup(t)
	stackUnderThePluginsReconciler(t, ns, chrt)
	probe := newProbe(ns, "shape", map[string]any{})
	if err := c.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	harness.Eventually(t, timeout, "Deployed", func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(probe), probe); err != nil {
			return false, err.Error()
		}
		st, _, _ = unstructured.NestedMap(probe.Object, "status")
		status, _, _ := harness.Condition(probe, names.ConditionDeployed)
		return status == "True", fmt.Sprint(st)
	})
	keys := slices.Sorted(maps.Keys(st))
	if want := []string{names.StatusConditions, names.StatusDeployedRelease}; !slices.Equal(keys, want) {
		t.Errorf("the plugins' status has %v, want %v", keys, want)
	}
	deployed, _, _ := unstructured.NestedMap(st, names.StatusDeployedRelease)
	if keys := slices.Sorted(maps.Keys(deployed)); !slices.Equal(keys, []string{names.DeployedReleaseManifest, "name"}) {
		t.Errorf("the plugins' %s has %v, want [%s name]", names.StatusDeployedRelease, keys, names.DeployedReleaseManifest)
	}
	var types []string
	for _, ct := range []string{names.ConditionInitialized, names.ConditionDeployed, names.ConditionReleaseFailed,
		names.ConditionIrreconcilable, names.ConditionPaused} {
		if status, _, _ := harness.Condition(probe, ct); status != "" {
			types = append(types, ct)
		}
	}
	if _, _, msg := harness.Condition(probe, names.ConditionDeployed); msg != "notes of shape" {
		t.Errorf("Deployed says %q, want the rendered NOTES.txt", msg)
	}
	conds, _, _ := unstructured.NestedSlice(st, names.StatusConditions)
	if len(types) != len(conds) || !slices.Contains(types, names.ConditionDeployed) {
		t.Errorf("the plugins' conditions are %v; this operator knows %v of them", conds, types)
	}
}

// Package controller holds the operator's controllers and their setup, one file each: per
// watches.yaml entry, helm-operator-plugins' Helm reconciler (controller.go: the only place that
// maps watches.yaml keys and operator flags onto reconciler options, beside the status
// controller of package status); and the watches that wake the Helm reconciler besides its own: the objects of its
// releases (dependents.go), its release records (records.go), the Secrets that checked values
// name (secrets.go) and the cluster's API (apiwatch.go).
package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	"helm.sh/helm/v3/pkg/action"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/annotations"
	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/options"
	"github.com/example/myproxy-operator/internal/releasestore"
	"github.com/example/myproxy-operator/internal/renderinputs"
	"github.com/example/myproxy-operator/internal/rollout"
	"github.com/example/myproxy-operator/internal/shard"
	"github.com/example/myproxy-operator/internal/status"
	"github.com/example/myproxy-operator/internal/tenancy"
	"github.com/example/myproxy-operator/internal/watchesfile"
)

// Process is what the running process gives every controller beside its options.
type Process struct {
	// Unlock tells whether this process may be the only writer of a release.
	Unlock actionclient.SoleWriter
	// ShardRunning tells whether a shard runs, from its Lease; nil without leader election.
	ShardRunning shard.Liveness
}

// Settings is what one reconciler runs with, after merging a watches.yaml entry with the
// operator's options (which hold the defaults of the entries' keys).
type Settings struct {
	MaxConcurrentReconciles int
	ReconcilePeriod         time.Duration
	// SkipDependentWatches is the negation of watchDependentResources. (The upstream `run`
	// command passes watchDependentResources through un-negated, which turns dependent watches
	// off exactly when they were asked for.)
	SkipDependentWatches bool
}

// SettingsFor merges a watches.yaml entry with the operator's options.
func SettingsFor(w watches.Watch, o options.Options) Settings {
	return Settings{MaxConcurrentReconciles: ptr.Deref(w.MaxConcurrentReconciles, o.MaxConcurrentReconciles),
		ReconcilePeriod:      ptr.Deref(w.ReconcilePeriod, metav1.Duration{Duration: o.ReconcilePeriod}).Duration,
		SkipDependentWatches: !ptr.Deref(w.WatchDependentResources, true)}
}

// helmMetrics are registered once per process: the operator builds a new manager when it
// campaigns for leadership again, and a registry refuses a second registration.
var helmMetrics = sync.OnceValues(func() (*actionclient.Metrics, error) {
	return actionclient.NewMetrics(crmetrics.Registry)
})

// rolloutMetrics are registered once per process, as helmMetrics.
var rolloutMetrics = sync.OnceValues(func() (*rollout.Metrics, error) {
	return rollout.NewMetrics(crmetrics.Registry)
})

// shared is what every kind's reconcilers share in this process.
type shared struct {
	// What the reconcilers watch beside the manager's cache (package caches): namespaces (nil:
	// all), the metadata of Secrets, release records, shard claims (sharded only) and lookups.
	namespaces map[string]cache.Config
	secrets    cache.Cache
	records    cache.Cache
	claims     cache.Cache
	lookups    *renderinputs.Tracker
	// What every Helm action shares; waves hold the rollout state's namespace and metrics (nil: no waves).
	metrics *actionclient.Metrics
	unlock  actionclient.SoleWriter
	waves   *waves
	// The claims of this process's part of the fleet (options.Options.Shard), and which shards run.
	shardClaims *shard.Claims
	running     shard.Liveness
	// own are the operator's own writes and deletes; absences, the releases known to have no
	// record; remembered lists every per-resource store, to forget a resource gone.
	own        *caches.OwnWrites
	absences   *releasestore.Absences
	remembered *Remembered
	queues     *Queues
}

// Setup creates and registers the controllers of every watch, with the operator's options (the
// flags, as parsed) and what the process shares with them. namespaces are the watched
// namespaces (nil: all).
func Setup(mgr ctrl.Manager, ws []watchesfile.Watch, o options.Options, p Process, namespaces map[string]cache.Config) error {
	metrics, err := helmMetrics()
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	secrets, err := caches.New(mgr, namespaces, caches.SecretMetadata)
	if err != nil {
		return err
	}
	go renderinputs.CodeVersion() // digest the executable before the first reconcile needs it
	records, err := newRecordCache(mgr, namespaces)
	if err != nil {
		return fmt.Errorf("creating the release record cache: %w", err)
	}
	own := caches.NewOwnWrites()
	sh := shared{queues: NewQueues(), own: own, absences: releasestore.NewAbsences(recordIndex{records}),
		namespaces: namespaces, secrets: secrets, records: records, metrics: metrics, unlock: p.Unlock,
		shardClaims: shard.NewClaims(), running: p.ShardRunning}
	lookups, err := caches.New(mgr, namespaces, caches.Lookups)
	if err != nil {
		return err
	}
	sh.lookups = renderinputs.NewTracker(lookups, mgr.GetRESTMapper(), func(cr renderinputs.CR) { sh.queues.Add(cr.GVK, cr.NamespacedName) })
	if ns := RolloutNamespace(o); o.RolloutWaves && ns != "" {
		m, err := rolloutMetrics()
		if err != nil {
			return fmt.Errorf("registering metrics: %w", err)
		}
		sh.waves = &waves{namespace: ns, metrics: m}
	}
	if o.Shard.Sharded() {
		if sh.claims, err = caches.New(mgr, namespaces, caches.Claims(o.Shard)); err != nil {
			return err
		}
	}
	if sh.remembered, err = defaultRemembered(); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	sh.remembered.Add([]RememberedStore{
		{Map: "lookup_followers", Forget: sh.lookups.Forget, Len: sh.lookups.Following},
		{Map: "release_states", Forget: func(k shard.Key) { metrics.Forget(k.Namespace, k.Name) }, Len: metrics.Len},
		{Map: "known_releases", Forget: func(k shard.Key) { sh.absences.Forget(k.NamespacedName) }, Len: sh.absences.Len},
		// Entries that go with the write or the handover that made them.
		{Map: "own_writes", Len: own.Len},
		{Map: "shard_claims", Len: sh.shardClaims.Len},
	}...)
	accounts := map[string]*tenancy.Accounts{}
	for _, w := range ws {
		name := ServiceAccountFor(w, o)
		if name == "" || accounts[name] != nil {
			continue
		}
		if err := tenancy.CheckRights(context.Background(), mgr.GetClient(), name); err != nil {
			return fmt.Errorf("watch %s: %w", w.GroupVersionKind, err)
		}
		c, err := caches.New(mgr, namespaces, caches.ServiceAccounts(name))
		if err != nil {
			return err
		}
		accounts[name] = tenancy.NewAccounts(name, c)
	}
	var kinds []capabilityReader
	for _, w := range ws {
		k, err := setupOne(mgr, w, o, sh, accounts[ServiceAccountFor(w, o)])
		if err != nil {
			return fmt.Errorf("watch %s: %w", w.GroupVersionKind, err)
		}
		kinds = append(kinds, k)
	}
	return mgr.Add(&apiWatch{cache: lookups, reader: mgr.GetCache(), queues: sh.queues, kinds: kinds})
}

// ServiceAccountFor is the ServiceAccount the releases of w run as: its own, else the
// operator's default; "" is the operator's identity.
func ServiceAccountFor(w watchesfile.Watch, o options.Options) string {
	return cmp.Or(w.ServiceAccountName, o.DefaultServiceAccount)
}

// setupOne sets up the reconcilers of one watch; accounts, when not nil, are the
// ServiceAccounts its Helm actions run as.
func setupOne(mgr ctrl.Manager, w watchesfile.Watch, o options.Options, sh shared, accounts *tenancy.Accounts) (capabilityReader, error) {
	s := SettingsFor(w.Watch, o)
	name := fmt.Sprintf("%s-controller", w.Kind)
	// helm-operator-plugins' reconciler records through the core/v1 Events API.
	recorder := mgr.GetEventRecorderFor(name) //nolint:staticcheck // its options take a record.EventRecorder
	absences := sh.absences                   // the empty history of a new release answered from the record cache
	if !o.FastPaths.On(options.FastEmptyHistory) {
		absences = nil
	}
	account := ServiceAccountFor(w, o) // the identity of accounts, when not nil
	configs, actions, err := HelmActions(mgr.GetConfig(), mgr.GetRESTMapper(), w, o, account, releasestore.Driver(sh.own, absences, o.FastPaths.On(options.FastRecordEncoding)))
	if err != nil {
		return capabilityReader{}, err
	}
	if accounts != nil {
		configs.RunAs(accounts, recorder)
	}
	secrets, err := CheckSecrets(mgr.GetConfig(), mgr.GetAPIReader(), account)
	if err != nil {
		return capabilityReader{}, err
	}
	use, err := renderinputs.AnalyseChart(w.Chart)
	if err != nil {
		return capabilityReader{}, fmt.Errorf("chart %s: %w", w.ChartPath, err)
	}
	declaration, err := chartapi.LoadCompiled(w.ChartPath)
	if err != nil {
		return capabilityReader{}, err
	}
	applied := status.NewAppliedGenerations(status.Namespaced(mgr.GetRESTMapper()))
	gvk := w.GroupVersionKind
	statusReconciler := &status.Reconciler{Client: mgr.GetClient(), GVK: gvk, Applied: applied,
		Declaration: declaration, MaxConcurrentReconciles: s.MaxConcurrentReconciles, Shard: o.Shard, Namespaces: sh.namespaces,
		Gone: func(key types.NamespacedName) { sh.remembered.Forget(shard.Key{GVK: gvk, NamespacedName: key}) }}
	var digests *actionclient.Digests // nil: every upgrade check is a dry run
	if o.FastPaths.On(options.FastDigests) {
		digests = &actionclient.Digests{Lookups: sh.lookups, Stamp: o.Shard.ManagedValue()}
	}
	selector := ptr.Deref(w.Selector, metav1.LabelSelector{}) // empty: every resource of the kind
	var gate *rollout.Gate
	var waves actionclient.WaveGate // nil without waves
	if sh.waves != nil {
		if gate, err = newGate(mgr, w, o, sh, selector, statusReconciler, recorder); err != nil {
			return capabilityReader{}, err
		}
		statusReconciler.Held, waves = gate.Held, gate
	}

	opts := []reconciler.Option{
		reconciler.WithGroupVersionKind(w.GroupVersionKind),
		// Its status writes keep and bring up to date the fields the status Reconciler owns
		// (status.PluginWrites), and its finalizer is stored under operator-sdk's name
		// (finalizername.go).
		reconciler.WithClient(finalizerNames(status.PluginWrites(mgr.GetClient(), mgr.GetCache(), gvk, statusReconciler), gvk)),
		reconciler.WithChart(*w.Chart),
		reconciler.WithOverrideValues(w.OverrideValues),
		reconciler.WithMaxConcurrentReconciles(s.MaxConcurrentReconciles),
		// Periodic reconciles are scheduled by annotations.PeriodHook, so that a custom
		// resource's reconcile-period annotation replaces the watch's period instead of adding to it.
		reconciler.WithReconcilePeriod(0),
		reconciler.WithMaxReleaseHistory(o.MaxReleaseHistory),
		// The release objects are watched by dependentWatches, below: the same rules in
		// informers of the type caches.ReleaseObject chooses.
		reconciler.SkipDependentWatches(true),
		reconciler.WithEventRecorder(recorder),
		reconciler.WithActionClientGetter(actionclient.New(actions, actionclient.Options{
			Recorder: recorder, Metrics: sh.metrics, Unlock: sh.unlock,
			Shard: o.Shard, Claims: sh.shardClaims, Writer: mgr.GetClient(), Running: sh.running,
			Waves: waves, Digests: digests, DryRunOption: w.DryRunOption,
		})),
		reconciler.WithLog(ctrl.Log.WithName("controllers").WithName(w.Kind)),
		reconciler.WithInstallAnnotations(annotations.Install...),
		reconciler.WithUpgradeAnnotations(annotations.Upgrade...),
		reconciler.WithUninstallAnnotations(annotations.Uninstall...),
		reconciler.WithPauseReconcileHandler(annotations.PauseHandler(recorder)),
		reconciler.WithPostHook(applied.PostHook()),
		reconciler.WithPostHook(annotations.PeriodHook(sh.queues.For(w.GroupVersionKind), s.ReconcilePeriod, o.MinReconcilePeriod)),
		reconciler.WithValueTranslator(annotations.CheckedTranslator(
			chartapi.Translator{Reader: secrets, Recorder: recorder, Checks: declaration.Kind.Checks}, recorder, o.MinReconcilePeriod)),
		reconciler.WithControllerSetupFunc(WatchCheckedSecrets(sh.secrets, mgr.GetCache(), w.GroupVersionKind, declaration.Kind.Checks)),
		reconciler.WithControllerSetupFunc(sh.queues.Register(w.GroupVersionKind)),
		reconciler.WithControllerSetupFunc(watchReleaseRecords(sh.records, w.GroupVersionKind, sh.own)),
		reconciler.WithSelector(selector),
	}
	if accounts != nil {
		opts = append(opts, reconciler.WithControllerSetupFunc(accounts.Watch(mgr.GetCache(), w.GroupVersionKind)))
	}
	if !s.SkipDependentWatches {
		dependents := &dependentWatches{scheme: mgr.GetScheme(), mapper: mgr.GetRESTMapper(), cache: mgr.GetCache(),
			watched: map[dependentWatch]bool{}}
		// First among the post hooks, where helm-operator-plugins puts its own.
		opts = append([]reconciler.Option{reconciler.WithControllerSetupFunc(dependents.setup),
			reconciler.WithPostHook(dependents.postHook())}, opts...)
	}
	r, err := reconciler.New(opts...)
	if err != nil {
		return capabilityReader{}, err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return capabilityReader{}, err
	}
	if err := statusReconciler.SetupWithManager(mgr, selector); err != nil {
		return capabilityReader{}, err
	}
	if o.Shard.Sharded() {
		h := &shard.Handover{ClaimCache: sh.claims, Live: mgr.GetAPIReader(), Writer: mgr.GetClient(), GVK: gvk,
			Shard: o.Shard, Claims: sh.shardClaims, Recorder: recorder}
		if err := h.SetupWithManager(mgr); err != nil {
			return capabilityReader{}, err
		}
	}
	sh.remembered.Add([]RememberedStore{
		{Map: "status_generations", GVK: gvk, Forget: func(k shard.Key) { applied.Forget(k.NamespacedName) }, Len: applied.Len},
		// Forgotten with the generations.
		{Map: "status_manifests", GVK: gvk, Len: applied.Manifests.Size},
	}...)
	if digests != nil {
		sh.remembered.Add(RememberedStore{Map: "release_digests", GVK: gvk, Forget: digests.Forget, Len: digests.Len})
	}
	if gate != nil {
		sh.remembered.Add(RememberedStore{Map: "rollout_holds", GVK: gvk, Forget: func(k shard.Key) { gate.Forget(k.NamespacedName) }, Len: gate.Len})
	}
	overrides, _ := json.Marshal(w.OverrideValues)
	return capabilityReader{gvk: w.GroupVersionKind, configs: configs, use: use, overrides: overrides}, nil
}

// HelmActions returns the Helm configuration of w's custom resources and their action clients,
// as its reconciler uses them: actions run as the ServiceAccount account ("": the operator's
// identity), store releases through storage, and reach only what w's reach allows. Failed
// upgrades roll back with --force as the stock operators' do, unless the resource's
// rollback-force annotation is false (RollbackChoice).
func HelmActions(cfg *rest.Config, mapper meta.RESTMapper, w watchesfile.Watch, o options.Options, account string,
	storage helmclient.ObjectToStorageDriverMapper) (*helmconfig.Getter, actionclient.RollbackChoice, error) {
	getterOpts := []helmclient.ActionConfigGetterOption{helmclient.StorageDriverMapper(storage)}
	if account != "" {
		getterOpts = append(getterOpts, helmclient.ClientRestConfigMapper(tenancy.Impersonating(account)))
	}
	actionConfigGetter, err := helmclient.NewActionConfigGetter(cfg, mapper, getterOpts...)
	if err != nil {
		return nil, actionclient.RollbackChoice{}, fmt.Errorf("creating Helm action config getter: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, actionclient.RollbackChoice{}, fmt.Errorf("creating discovery client: %w", err)
	}
	configs := helmconfig.New(actionConfigGetter, dc, o.Shard.ManagedValue(), w.Reach)
	opts := []helmclient.ActionClientGetterOption{
		// Helm's client-side OpenAPI validation downloads and parses the cluster's OpenAPI
		// documents on every install and upgrade, most of the operator's CPU while a fleet
		// converges. The apiserver still validates every object it is sent, and the chart's
		// rendering is checked against the API by the chart tests.
		helmclient.AppendInstallOptions(func(i *action.Install) error { i.DisableOpenAPIValidation = true; return nil }),
		helmclient.AppendUpgradeOptions(func(u *action.Upgrade) error { u.DisableOpenAPIValidation = true; return nil }),
		// A chart's crds/ folder is installed with the kind (make install), never by a tenant's
		// release: CRDs are cluster-wide, and a release may not reach outside its namespace.
		helmclient.AppendInstallOptions(func(i *action.Install) error { i.SkipCRDs = true; return nil }),
	}
	forced, err := helmclient.NewActionClientGetter(configs, opts...)
	if err != nil {
		return nil, actionclient.RollbackChoice{}, fmt.Errorf("creating Helm action client getter: %w", err)
	}
	unforced, err := helmclient.NewActionClientGetter(configs, append(opts,
		helmclient.AppendUpgradeFailureRollbackOptions(func(r *action.Rollback) error { r.Force = false; return nil }))...)
	if err != nil {
		return nil, actionclient.RollbackChoice{}, fmt.Errorf("creating Helm action client getter: %w", err)
	}
	return configs, actionclient.RollbackChoice{Forced: actionclient.ChartCopies(forced), Unforced: actionclient.ChartCopies(unforced)}, nil
}

// CheckSecrets is the reader of the Secrets that the chart's checks (kind.yaml) read for
// releases that run as the ServiceAccount account: as that ServiceAccount, so that a check learns
// of a Secret no more than the release's own lookup may; direct (the operator's own identity)
// when account is "".
func CheckSecrets(cfg *rest.Config, direct chartapi.SecretReader, account string) (chartapi.SecretReader, error) {
	if account == "" {
		return direct, nil
	}
	return tenancy.NewSecretReader(cfg, account)
}

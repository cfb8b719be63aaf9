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

	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/options"
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
	remembered, err := caches.ProcessRemembered()
	if err != nil {
		return nil, err
	}
	return actionclient.NewMetrics(crmetrics.Registry, remembered)
})

// rolloutMetrics are registered once per process, as helmMetrics.
var rolloutMetrics = sync.OnceValues(func() (*rollout.Metrics, error) { return rollout.NewMetrics(crmetrics.Registry) })

// shared is what every kind's reconcilers share in this process.
type shared struct {
	// What the reconcilers watch beside the manager's cache (package caches): namespaces (nil:
	// all), the metadata of Secrets, release records, shard claims (sharded only) and lookups.
	namespaces map[string]cache.Config
	secrets    cache.Cache
	records    cache.Cache
	claims     cache.Cache
	lookups    *actionclient.Lookups
	// What every Helm action shares; waves hold the rollout state's namespace and metrics (nil: no waves).
	metrics *actionclient.Metrics
	unlock  actionclient.SoleWriter
	waves   *waves
	// The claims of this process's part of the fleet (options.Options.Shard), and which shards run.
	shardClaims *shard.Claims
	running     shard.Liveness
	// releaseRecords are what the operator keeps of release records (its own writes, the
	// releases known to have records); remembered registers every per-resource store, to forget
	// a resource gone.
	releaseRecords *helmconfig.Records
	remembered     *caches.Remembered
	queues         *Queues
	// followed are the kinds of release objects the manager's cache holds; waiters, the
	// resources whose release waits for an object of another release to go.
	followed *followed
	waiters  *actionclient.Waiters
}

// Kinds are the controllers Setup set up: each watch's Helm reconciler, and the rollout gates
// (with waves).
type Kinds struct {
	Reconcilers map[schema.GroupVersionKind]reconcile.Reconciler
	Gates       []*rollout.Gate
}

// Setup creates and registers the controllers of every watch, with the operator's options (the
// flags, as parsed) and what the process shares with them, and returns them. namespaces are the
// watched namespaces (nil: all).
func Setup(mgr ctrl.Manager, ws []watchesfile.Watch, o options.Options, p Process, namespaces map[string]cache.Config) (Kinds, error) {
	metrics, err := helmMetrics()
	if err != nil {
		return Kinds{}, fmt.Errorf("registering metrics: %w", err)
	}
	secrets, err := caches.New(mgr, namespaces, caches.SecretMetadata)
	if err != nil {
		return Kinds{}, err
	}
	go actionclient.CodeVersion() // digest the executable before the first reconcile needs it
	records, err := newRecordCache(mgr, namespaces)
	if err != nil {
		return Kinds{}, fmt.Errorf("creating the release record cache: %w", err)
	}
	var index helmconfig.RecordIndex // the empty history of a new release answered from the record cache
	if o.FastPaths.On(options.FastEmptyHistory) {
		index = helmconfig.CacheIndex(records)
	}
	sh := shared{queues: NewQueues(), releaseRecords: helmconfig.NewRecords(index),
		followed:   &followed{scheme: mgr.GetScheme(), cache: mgr.GetCache(), kinds: map[schema.GroupVersionKind]bool{}},
		namespaces: namespaces, secrets: secrets, records: records, metrics: metrics, unlock: p.Unlock,
		running: p.ShardRunning}
	lookups, err := caches.New(mgr, namespaces, caches.Lookups)
	if err != nil {
		return Kinds{}, err
	}
	sh.lookups = actionclient.NewLookups(lookups, mgr.GetRESTMapper(), func(cr shard.Key) { sh.queues.Add(cr.GVK, cr.NamespacedName) })
	if ns := RolloutNamespace(o); o.RolloutWaves && ns != "" {
		m, err := rolloutMetrics()
		if err != nil {
			return Kinds{}, fmt.Errorf("registering metrics: %w", err)
		}
		sh.waves = &waves{namespace: ns, metrics: m}
	}
	sh.remembered, _ = caches.ProcessRemembered() // its error was helmMetrics', above
	if o.Shard.Sharded() {
		if sh.claims, err = caches.New(mgr, namespaces, caches.Claims(o.Shard)); err != nil {
			return Kinds{}, err
		}
		sh.shardClaims = shard.NewClaims()
		sh.remembered.Register("shard_claims", schema.GroupVersionKind{}, nil, sh.shardClaims.Len)
	}
	sh.waiters = actionclient.NewWaiters(sh.remembered, func(k shard.Key) { sh.queues.Add(k.GVK, k.NamespacedName) },
		sh.followed.stillTaken(mgr.GetAPIReader()))
	sh.remembered.Register("lookup_followers", schema.GroupVersionKind{}, sh.lookups.Forget, sh.lookups.Following)
	sh.remembered.Register("known_releases", schema.GroupVersionKind{},
		func(k shard.Key) { sh.releaseRecords.Forget(k.NamespacedName) }, sh.releaseRecords.Known)
	// Entries that go with the write or the handover that made them: counted only.
	sh.remembered.Register("own_writes", schema.GroupVersionKind{}, nil, sh.releaseRecords.InFlight)
	accounts := map[string]*tenancy.Accounts{}
	for _, w := range ws {
		name := ServiceAccountFor(w, o)
		if name == "" || accounts[name] != nil {
			continue
		}
		if err := tenancy.CheckRights(context.Background(), mgr.GetClient(), name); err != nil {
			return Kinds{}, fmt.Errorf("watch %s: %w", w.GroupVersionKind, err)
		}
		c, err := caches.New(mgr, namespaces, caches.ServiceAccounts(name))
		if err != nil {
			return Kinds{}, err
		}
		accounts[name] = tenancy.NewAccounts(name, c)
	}
	var readers []capabilityReader
	kinds := Kinds{Reconcilers: map[schema.GroupVersionKind]reconcile.Reconciler{}}
	for _, w := range ws {
		k, r, gate, err := setupOne(mgr, w, o, sh, accounts[ServiceAccountFor(w, o)])
		if err != nil {
			return Kinds{}, fmt.Errorf("watch %s: %w", w.GroupVersionKind, err)
		}
		readers, kinds.Reconcilers[w.GroupVersionKind] = append(readers, k), r
		if gate != nil {
			kinds.Gates = append(kinds.Gates, gate)
		}
	}
	return kinds, mgr.Add(&apiWatch{cache: lookups, reader: mgr.GetCache(), queues: sh.queues, kinds: readers})
}

// ServiceAccountFor is the ServiceAccount the releases of w run as: its own, else the
// operator's default; "" is the operator's identity.
func ServiceAccountFor(w watchesfile.Watch, o options.Options) string {
	return cmp.Or(w.ServiceAccountName, o.DefaultServiceAccount)
}

// setupOne sets up the reconcilers of one watch; accounts, when not nil, are the
// ServiceAccounts its Helm actions run as.
func setupOne(mgr ctrl.Manager, w watchesfile.Watch, o options.Options, sh shared, accounts *tenancy.Accounts) (capabilityReader, *reconciler.Reconciler, *rollout.Gate, error) {
	s := SettingsFor(w.Watch, o)
	// helm-operator-plugins' reconciler records through the core/v1 Events API.
	recorder := mgr.GetEventRecorderFor(w.Kind + "-controller") //nolint:staticcheck // its options take a record.EventRecorder
	configs, err := HelmConfigs(mgr.GetConfig(), mgr.GetRESTMapper(), w, o, sh.releaseRecords, accounts)
	if err != nil {
		return capabilityReader{}, nil, nil, err
	}
	configs.Cached = sh.followed.read
	secrets, err := CheckSecrets(mgr.GetConfig(), mgr.GetAPIReader(), ServiceAccountFor(w, o)) // the identity of accounts, when not nil
	if err != nil {
		return capabilityReader{}, nil, nil, err
	}
	declaration, err := chartapi.LoadCompiled(w.ChartPath)
	if err != nil {
		return capabilityReader{}, nil, nil, err
	}
	gvk := w.GroupVersionKind
	applied := status.NewAppliedGenerations(sh.remembered, gvk, status.Namespaced(mgr.GetRESTMapper()))
	statusReconciler := &status.Reconciler{Client: mgr.GetClient(), GVK: gvk, Applied: applied,
		Declaration: declaration, MaxConcurrentReconciles: s.MaxConcurrentReconciles, Shard: o.Shard, Namespaces: sh.namespaces,
		Gone: func(key types.NamespacedName) { sh.remembered.Forget(shard.Key{GVK: gvk, NamespacedName: key}) }}
	var digests *actionclient.Digests // nil: every upgrade check is a dry run
	if o.FastPaths.On(options.FastDigests) {
		digests = actionclient.NewDigests(sh.remembered, gvk, sh.lookups, o.Shard.ManagedValue())
	}
	selector := ptr.Deref(w.Selector, metav1.LabelSelector{}) // empty: every resource of the kind
	var gate *rollout.Gate
	var waves actionclient.WaveGate // nil without waves
	if sh.waves != nil {
		if gate, err = newGate(mgr, w, o, sh, selector, statusReconciler, recorder); err != nil {
			return capabilityReader{}, nil, nil, err
		}
		statusReconciler.Held, waves = gate.Held, gate
	}
	actions := actionclient.New(actionclient.Options{GVK: gvk, Remembered: sh.remembered, Waiters: sh.waiters,
		Chart: w.Chart, Overrides: w.OverrideValues, Configs: configs, MaxHistory: o.MaxReleaseHistory, DryRunOption: w.DryRunOption,
		Translate: CheckedTranslator(
			chartapi.Translator{Reader: secrets, Recorder: recorder, Checks: declaration.Kind.Checks}.Translate, recorder, o.MinReconcilePeriod),
		Recorder: recorder, Metrics: sh.metrics, Unlock: sh.unlock,
		Shard: o.Shard, Claims: sh.shardClaims, Writer: mgr.GetClient(), Running: sh.running,
		Waves: waves, Digests: digests,
	})
	log := ctrl.Log.WithName("controllers").WithName(w.Kind)
	opts := []reconciler.Option{
		reconciler.WithGroupVersionKind(w.GroupVersionKind),
		// Its status writes keep and bring up to date the fields the status Reconciler owns
		// (status.PluginWrites), and its finalizer is stored under operator-sdk's name
		// (reconcilerclient.go).
		reconciler.WithClient(reconcilerClient(mgr.GetClient(), gvk, status.PluginWrites{Cached: mgr.GetCache(), GVK: gvk, Fill: statusReconciler.Fill})),
		// The action client renders the kind's chart with Helm 4; the reconciler holds its metadata.
		reconciler.WithChart(actionclient.ReconcilerChart(w.Chart)),
		// The action client sets them into the values; the reconciler validates them and reports
		// them in Events.
		reconciler.WithOverrideValues(w.OverrideValues),
		reconciler.WithMaxConcurrentReconciles(s.MaxConcurrentReconciles),
		// Periodic reconciles are scheduled by PeriodHook, so that a custom
		// resource's reconcile-period annotation replaces the watch's period instead of adding to it.
		reconciler.WithReconcilePeriod(0),
		reconciler.WithMaxReleaseHistory(o.MaxReleaseHistory),
		// The release objects are watched by dependentWatches, below: the same rules in
		// informers of the type caches.ReleaseObject chooses.
		reconciler.SkipDependentWatches(true),
		reconciler.WithEventRecorder(recorder),
		reconciler.WithActionClientGetter(actions),
		reconciler.WithValueTranslator(actions.Translator()),
		reconciler.WithLog(log),
		reconciler.WithInstallAnnotations(InstallAnnotations...),
		reconciler.WithUpgradeAnnotations(UpgradeAnnotations...),
		reconciler.WithUninstallAnnotations(UninstallAnnotations...),
		reconciler.WithPauseReconcileHandler(PauseHandler(recorder)),
		reconciler.WithPostHook(actionclient.PostHook(applied.Applied)),
		reconciler.WithPostHook(actionclient.PostHook(PeriodHook(func(k types.NamespacedName, d time.Duration) { sh.queues.AddAfter(gvk, k, d) }, s.ReconcilePeriod, o.MinReconcilePeriod))),
		reconciler.WithControllerSetupFunc(WatchCheckedSecrets(sh.secrets, mgr.GetCache(), w.GroupVersionKind, declaration.Kind.Checks)),
		reconciler.WithControllerSetupFunc(sh.queues.Register(w.GroupVersionKind)),
		reconciler.WithControllerSetupFunc(watchReleaseRecords(sh.records, w.GroupVersionKind, sh.releaseRecords, sh.waiters)),
		reconciler.WithSelector(selector),
	}
	if accounts != nil {
		opts = append(opts, reconciler.WithControllerSetupFunc(accounts.Watch(mgr.GetCache(), w.GroupVersionKind)))
	}
	if !s.SkipDependentWatches {
		dependents := &dependentWatches{mapper: mgr.GetRESTMapper(), waiters: sh.waiters, ownDelete: sh.releaseRecords.OwnDelete,
			followed: sh.followed, watched: map[schema.GroupVersionKind]bool{}}
		// First among the post hooks, where helm-operator-plugins puts its own.
		opts = append([]reconciler.Option{reconciler.WithControllerSetupFunc(dependents.setup),
			reconciler.WithPostHook(actionclient.PostHook(dependents.postHook(log)))}, opts...)
	}
	r, err := reconciler.New(opts...)
	if err != nil {
		return capabilityReader{}, nil, nil, err
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return capabilityReader{}, nil, nil, err
	}
	if err := statusReconciler.SetupWithManager(mgr, selector); err != nil {
		return capabilityReader{}, nil, nil, err
	}
	if o.Shard.Sharded() {
		h := &shard.Handover{ClaimCache: sh.claims, Live: mgr.GetAPIReader(), Writer: mgr.GetClient(), GVK: gvk,
			Shard: o.Shard, Claims: sh.shardClaims, Recorder: recorder}
		if err := h.SetupWithManager(mgr); err != nil {
			return capabilityReader{}, nil, nil, err
		}
	}
	// The parsed manifests, kept and forgotten with the generations.
	sh.remembered.Register("status_manifests", gvk, nil, applied.Len)
	if gate != nil {
		sh.remembered.Register("rollout_holds", gvk, func(k shard.Key) { gate.Forget(k.NamespacedName) }, gate.Len)
	}
	overrides, _ := json.Marshal(w.OverrideValues)
	return capabilityReader{gvk: w.GroupVersionKind, configs: configs, use: actionclient.AnalyseChart(w.Chart), overrides: overrides}, r, gate, nil
}

// HelmConfigs returns the Helm configurations of w's custom resources: actions run as the
// watch's ServiceAccount (the operator's identity without one; accounts, when not nil, says
// which namespaces hold it), keep their records in records, and reach only what w's reach allows.
func HelmConfigs(cfg *rest.Config, mapper meta.RESTMapper, w watchesfile.Watch, o options.Options, records *helmconfig.Records,
	accounts *tenancy.Accounts) (*helmconfig.Configs, error) {
	return helmconfig.New(cfg, mapper, helmconfig.Settings{Managed: o.Shard.ManagedValue(), Reach: w.Reach, Records: records,
		Pooled: o.FastPaths.On(options.FastRecordEncoding), CachedChecks: o.FastPaths.On(options.FastCachedChecks),
		Account: ServiceAccountFor(w, o), Accounts: accounts})
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

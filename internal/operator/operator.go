// Package operator assembles the manager: metrics, probes, leader election, namespace scope,
// and one Helm reconciler per watches.yaml entry. cmd/main.go and the integration tests both
// build the operator through New, so tests run exactly what ships.
package operator

import (
	"fmt"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/example/myproxy-operator/internal/controller"
	"github.com/example/myproxy-operator/internal/eventfilter"
	"github.com/example/myproxy-operator/internal/options"
	"github.com/example/myproxy-operator/internal/status"
)

// New loads the watches file and returns a manager with a reconciler for every entry.
// namespaces scopes the caches (nil: all namespaces).
func New(cfg *rest.Config, o options.Options, namespaces map[string]cache.Config) (ctrl.Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ws, err := watches.Load(o.WatchesFile)
	if err != nil {
		return nil, fmt.Errorf("loading watches file %s: %w", o.WatchesFile, err)
	}

	metrics := metricsserver.Options{BindAddress: o.MetricsBindAddress, SecureServing: o.MetricsSecure}
	if o.MetricsSecure {
		// Only callers that the apiserver authenticates and authorises (get on /metrics) may scrape.
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	leaseDuration, renewDeadline, retryPeriod := o.LeaseDuration, o.RenewDeadline, o.RetryPeriod
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                       metrics,
		HealthProbeBindAddress:        o.HealthProbeBindAddress,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
		LeaderElectionReleaseOnCancel: true, // hand over at once on SIGTERM
		GracefulShutdownTimeout:       &o.GracefulShutdownTimeout,
		Cache:                         cache.Options{DefaultNamespaces: namespaces},
		NewCache:                      eventfilter.NewCache(eventFilters(ws), releaseObjectFilter(ws)),
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	err = controller.Setup(mgr, ws, controller.Defaults{
		MaxConcurrentReconciles: o.MaxConcurrentReconciles,
		ReconcilePeriod:         o.ReconcilePeriod,
		MaxReleaseHistory:       o.MaxReleaseHistory,
	})
	if err != nil {
		return nil, err
	}
	return mgr, nil
}

// eventFilters keeps the operator from waking itself:
//   - the status controller's writes to the custom resources reach no controller;
//   - Helm release Secrets (labelled owner=helm) are the reconciler's own records. Without
//     this, a failing install, which writes a release record and removes it on rollback,
//     re-enqueues itself at once and retries in a tight loop instead of backing off.
func eventFilters(ws []watches.Watch) map[schema.GroupVersionKind]eventfilter.Filter {
	filters := map[schema.GroupVersionKind]eventfilter.Filter{
		corev1.SchemeGroupVersion.WithKind("Secret"): eventfilter.IgnoreLabelled("owner", "helm"),
	}
	for _, w := range ws {
		filters[w.GroupVersionKind] = eventfilter.Filter{Update: status.ChangedBeyondOwnFields}
	}
	return filters
}

// releaseObjectFilter applies to the kinds a release renders (every kind without a filter of
// its own): their deletes reach the reconciler only when they are drift of a deployed release.
func releaseObjectFilter(ws []watches.Watch) func(client.Reader) eventfilter.Filter {
	kinds := map[schema.GroupVersionKind]bool{}
	for _, w := range ws {
		kinds[w.GroupVersionKind] = true
	}
	return func(reader client.Reader) eventfilter.Filter {
		return eventfilter.Filter{Delete: status.DeletedFromDeployedRelease(reader, kinds)}
	}
}

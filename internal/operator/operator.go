// Package operator assembles the manager: metrics, probes, leader election, namespace scope,
// and one Helm reconciler per watches.yaml entry. cmd/main.go runs it through Run; the
// integration and end-to-end tests run that binary, so they test exactly what ships.
package operator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/leaderelection"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/controller"
	"github.com/example/myproxy-operator/internal/conversion"
	"github.com/example/myproxy-operator/internal/options"
	"github.com/example/myproxy-operator/internal/shard"
	"github.com/example/myproxy-operator/internal/watchesfile"
)

// errLeaderElectionLost is how controller-runtime's manager reports a lost Lease.
const errLeaderElectionLost = "leader election lost"

// leasesLost counts the managers stopped because they lost the leader Lease, each followed by a
// new campaign.
var leasesLost = onceCounter("myproxy_operator_leader_leases_lost_total",
	"Times this process lost the leader Lease (apiserver unreachable, or the process paused) and campaigned again.")

// fencedWrites counts the writes refused because this replica may no longer lead.
var fencedWrites = onceCounter("myproxy_operator_fenced_writes_total",
	"Writes to the apiserver refused because this replica's leader Lease may have passed to another.")

// onceCounter is a counter registered at its first use, once per process: the operator builds
// a new manager (and fence) when it campaigns again, and a registry refuses a second registration.
func onceCounter(name, help string) func() prometheus.Counter {
	return sync.OnceValue(func() prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		crmetrics.Registry.MustRegister(c)
		return c
	})
}

// Run runs the operator until ctx ends (SIGTERM).
//
// With leader election, controller-runtime stops the manager when the Lease cannot be renewed
// within the renew deadline: an apiserver (or etcd) outage longer than that. Most operators
// then exit and their Pod restarts, and a long outage becomes a crash loop. Run instead waits
// out the renew deadline, so that whatever the old manager had in flight has failed or finished,
// and campaigns again with a new manager in the same process. The Lease still guarantees that
// one replica reconciles at a time: the new manager acts only once it holds the Lease again, and
// the old one's clients are fenced (actionclient.Fence): whatever it still has in flight when
// the process resumes from a pause cannot write.
func Run(ctx context.Context, cfg *rest.Config, o options.Options, namespaces map[string]cache.Config) error {
	log := ctrl.Log.WithName("setup")
	leasesLost() // exported at 0 from the start
	for again := false; ; again = true {
		mgr, _, err := NewManager(ctx, cfg, o, namespaces, again)
		if err != nil {
			if !again {
				return err
			}
			// e.g. the old manager's probe port not yet free
			log.Error(err, "cannot set up the operator again; retrying")
		} else if err = mgr.Start(ctx); ctx.Err() != nil || err == nil || err.Error() != errLeaderElectionLost {
			return err
		} else {
			leasesLost().Inc()
			log.Info("lost the leader Lease (apiserver unreachable, or this process paused?); campaigning again",
				"after", o.RenewDeadline.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.RenewDeadline):
		}
	}
}

// Parts are what NewManager set up inside the manager: the lease fence (nil without leader
// election) and each kind's controllers.
type Parts struct {
	Fence *actionclient.Fence
	Kinds controller.Kinds
}

// NewManager builds the operator's manager, as Run runs it; again says it campaigns again.
func NewManager(ctx context.Context, cfg *rest.Config, o options.Options, namespaces map[string]cache.Config, again bool) (ctrl.Manager, Parts, error) {
	var parts Parts
	if err := o.Validate(); err != nil {
		return nil, parts, err
	}
	// client-go's defaults (5 requests per second, bursts of 10) would throttle a fleet.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.KubeAPIQPS), o.KubeAPIBurst
	unfenced := rest.CopyConfig(cfg) // for what every replica writes, leader or not
	entries, err := watchesfile.Load(o.WatchesFile)
	if err != nil {
		return nil, parts, fmt.Errorf("loading watches file %s: %w", o.WatchesFile, err)
	}

	metrics := metricsserver.Options{BindAddress: o.MetricsBindAddress, SecureServing: o.MetricsSecure}
	if o.MetricsSecure {
		// Only callers that the apiserver authenticates and authorises (get on /metrics) may scrape.
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	var fencedLock resourcelock.Interface // nil without leader election
	var leaseNamespace string             // of every shard's Lease; "" without leader election
	writer := actionclient.SoleWriter{PendingAfter: o.UnlockPendingAfter}
	events := &managerEvents{}
	if o.LeaderElect {
		// The lock's own client gets a copy: NewResourceLock sets a request timeout of half the
		// renew deadline on the config it is given, which would cut every request of the
		// manager's and Helm's clients short (an apply or a delete on a busy apiserver).
		lock, err := leaderelection.NewResourceLock(rest.CopyConfig(cfg), events, leaderelection.Options{
			LeaderElection:          true,
			LeaderElectionID:        o.Shard.LeaseName(o.LeaderElectionID),
			LeaderElectionNamespace: o.LeaderElectionNamespace,
			RenewDeadline:           o.RenewDeadline,
		})
		if err != nil {
			return nil, parts, fmt.Errorf("creating the leader election lock: %w", err)
		}
		// Every client the manager builds writes only while this replica surely leads; the
		// lock's own client (built above) is not fenced.
		fence := &actionclient.Fence{Interface: lock, ValidFor: o.RenewDeadline, Now: actionclient.BootClock,
			Refused: func() { fencedWrites().Inc() }}
		cfg.Wrap(fence.WrapTransport)
		fencedLock, parts.Fence = fence, fence
		writer.Leading = fence.Leading
		// The lock knows the namespace it resolved (the flag, or the Pod's own).
		leaseNamespace, _, _ = strings.Cut(lock.Describe(), "/")
	}
	cacheOpts, newCache := caches.Manager(watchesfile.Plain(entries), namespaces, o.Shard, o.FastPaths.On(options.FastBookkeeping))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                             metrics,
		HealthProbeBindAddress:              o.HealthProbeBindAddress,
		PprofBindAddress:                    o.PprofBindAddress,
		LeaderElection:                      o.LeaderElect,
		LeaderElectionResourceLockInterface: fencedLock,
		LeaseDuration:                       &o.LeaseDuration,
		RenewDeadline:                       &o.RenewDeadline,
		RetryPeriod:                         &o.RetryPeriod,
		LeaderElectionReleaseOnCancel:       true, // hand over at once on SIGTERM
		GracefulShutdownTimeout:             &o.GracefulShutdownTimeout,
		// Controller names are unique per process; a manager built to campaign again reuses them.
		Controller: config.Controller{SkipNameValidation: &again},
		Cache:      cacheOpts,
		// The custom resources are unstructured, and controller-runtime reads unstructured
		// objects from the apiserver unless told otherwise: every reconcile would GET its
		// resource. Their informers exist anyway (the reconcilers watch them).
		Client:   client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		NewCache: newCache,
	})
	if err != nil {
		return nil, parts, fmt.Errorf("creating manager: %w", err)
	}
	events.mgr = mgr
	if err := errors.Join(mgr.AddHealthzCheck("healthz", healthz.Ping), mgr.AddReadyzCheck("readyz", healthz.Ping)); err != nil {
		return nil, parts, err
	}
	p := controller.Process{Unlock: writer}
	if leaseNamespace != "" && o.Shard.Sharded() {
		p.ShardRunning = shard.LeaseLiveness(mgr.GetAPIReader(), leaseNamespace, o.LeaderElectionID, time.Now)
	}
	if parts.Kinds, err = controller.Setup(mgr, entries, o, p, namespaces); err != nil {
		return nil, parts, err
	}
	direct, err := client.New(unfenced, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, parts, err
	}
	return mgr, parts, conversion.Setup(ctx, mgr, entries, conversion.Options{BindAddress: o.WebhookBindAddress,
		CertDir: o.WebhookCertDir, Service: o.WebhookService, Namespace: cmp.Or(options.OwnNamespace(), o.LeaderElectionNamespace), Client: direct})
}

// managerEvents lends the event recorders of the manager (once built) to the leader election
// lock, which is built before the manager and records Events, through GetEventRecorderFor
// alone, only once the manager runs.
type managerEvents struct{ mgr ctrl.Manager }

func (e *managerEvents) GetEventRecorderFor(name string) record.EventRecorder {
	return lentRecorder(func() record.EventRecorder {
		// The manager's recorder of the core/v1 Events API, which client-go's leader election
		// records through.
		return e.mgr.GetEventRecorderFor(name) //nolint:staticcheck // resourcelock takes a record.EventRecorder
	})
}

// GetEventRecorder completes controller-runtime's recorder.Provider.
func (e *managerEvents) GetEventRecorder(name string) recorder.EventRecorder {
	return e.mgr.GetEventRecorder(name)
}

// lentRecorder records through the recorder it returns when an Event is recorded.
type lentRecorder func() record.EventRecorder

func (r lentRecorder) Event(obj runtime.Object, eventType, reason, message string) {
	r().Event(obj, eventType, reason, message)
}

func (r lentRecorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	r().Eventf(obj, eventType, reason, format, args...)
}

func (r lentRecorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventType, reason, format string, args ...any) {
	r().AnnotatedEventf(obj, annotations, eventType, reason, format, args...)
}

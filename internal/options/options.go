// Package options holds the operator's command-line flags and environment, named and
// defaulted like the stock `helm-operator run` so existing deployments carry over.
package options

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/example/myproxy-operator/internal/rollout"
	"github.com/example/myproxy-operator/internal/shard"
	"github.com/example/myproxy-operator/internal/tenancy"
)

// WatchNamespaceEnv names the environment variable that scopes the operator to namespaces:
// a comma-separated list; empty or unset means all namespaces.
const WatchNamespaceEnv = "WATCH_NAMESPACE"

// WebhookServiceEnv is the default of --webhook-service: make deploy sets it, and an OLM bundle,
// whose certificate OLM provides, does not.
const WebhookServiceEnv = "WEBHOOK_SERVICE"

// DefaultMaxConcurrentReconciles is the default number of workers per kind. A reconcile mostly
// waits for the apiserver (sequential requests to install a release), so workers are sized to
// the apiserver's latency rather than to local cores.
const DefaultMaxConcurrentReconciles = 16

// Options are the operator's settings.
type Options struct {
	WatchesFile             string
	LeaderElect             bool
	LeaderElectionID        string
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
	MetricsBindAddress      string
	MetricsSecure           bool
	HealthProbeBindAddress  string
	PprofBindAddress        string
	// KubeAPIQPS and KubeAPIBurst limit the operator's own requests to the apiserver.
	KubeAPIQPS   float64
	KubeAPIBurst int
	// MaxConcurrentReconciles and ReconcilePeriod apply to watches.yaml entries that do not set
	// their own maxConcurrentReconciles or reconcilePeriod.
	MaxConcurrentReconciles int
	ReconcilePeriod         time.Duration
	// MinReconcilePeriod is the shortest reconcile-period annotation a custom resource may ask for.
	MinReconcilePeriod time.Duration
	MaxReleaseHistory  int
	UnlockPendingAfter time.Duration
	// RolloutWaves rolls a new chart out in waves (package rollout), keeping each watch's rollout
	// state in RolloutNamespace ("": the leader election namespace, else the operator's own
	// namespace in a cluster; waves are off where neither is known).
	RolloutWaves     bool
	RolloutNamespace string
	// Rollout are the defaults of every watch's rollout policy.
	Rollout rollout.Defaults
	// FastPaths are the fast paths taken; off, each runs helm-operator-plugins' own path where
	// the operator has a faster one of its own (FastPathsFlag).
	FastPaths               FastPaths
	GracefulShutdownTimeout time.Duration
	// Shard is the part of the fleet this process owns (--shard, --shards).
	Shard shard.Shard
	// WebhookBindAddress, WebhookCertDir and WebhookService serve the conversions of kinds that
	// declare versions (package conversion).
	WebhookBindAddress, WebhookCertDir, WebhookService string
	// DefaultServiceAccount is the ServiceAccount, of each custom resource's namespace, that the
	// Helm actions of kinds whose watches.yaml entry names none run as; "" is the operator's own
	// identity (package tenancy).
	DefaultServiceAccount string
}

// BindFlags registers every option on fs with its default.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.WatchesFile, "watches-file", "./watches.yaml", "Path to the watches file mapping kinds to charts.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false,
		"Enable leader election, so that only one replica of the operator reconciles at a time.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", "myproxy-operator.gateway.example.com",
		"Name of the Lease used for leader election.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader election Lease (default: the operator's own namespace when in a cluster).")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", 15*time.Second,
		"How long a non-leader waits before it may take over a Lease that was not renewed.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", 10*time.Second,
		"How long the leader keeps retrying to renew the Lease before it gives up leadership.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", 2*time.Second,
		"How often leader election clients retry.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", ":8080",
		"Address the metrics endpoint binds to (e.g. :8443 with --metrics-secure); \"0\" disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", false,
		"Serve metrics over HTTPS, allowed only to callers authenticated and authorised by the apiserver.")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", ":8081",
		"Address the /healthz and /readyz probes bind to; \"0\" disables them.")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", "0",
		"Address a Go pprof endpoint binds to (e.g. 127.0.0.1:8082), for profiling; \"0\" disables it.")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", 200,
		"Sustained requests per second the operator may send to the apiserver (client-side limit).")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 400,
		"Requests the operator may send to the apiserver in a burst above --kube-api-qps.")
	fs.IntVar(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", DefaultMaxConcurrentReconciles,
		"Default number of MyProxies reconciled concurrently per kind.")
	fs.DurationVar(&o.ReconcilePeriod, "reconcile-period", 0,
		"Default period of full reconciles of unchanged resources; 0 reconciles only on change "+
			"(drift of release objects is still corrected: their changes are watched).")
	fs.DurationVar(&o.MinReconcilePeriod, "min-reconcile-period", time.Minute,
		"Shortest reconcile-period annotation a custom resource may ask for (0 is always allowed: no periodic "+
			"reconciles); a shorter one makes the resource Irreconcilable, naming the annotation.")
	fs.StringVar(&o.DefaultServiceAccount, tenancy.DefaultServiceAccountFlag, "",
		"ServiceAccount, in each custom resource's namespace, that Helm actions and template lookups run as "+
			"for kinds whose watches.yaml entry sets no "+tenancy.ServiceAccountKey+"; empty: the operator's own identity. "+
			"The operator needs impersonate, get, list and watch on serviceaccounts of that name.")
	fs.IntVar(&o.MaxReleaseHistory, "max-release-history", 10,
		"Maximum number of revisions kept per Helm release; 0 keeps all.")
	fs.DurationVar(&o.UnlockPendingAfter, "unlock-pending-after", 10*time.Minute,
		"Without leader election: how long a release must have been pending (or uninstalling, its resource "+
			"not deleted) before it is taken as left by an interrupted action and unlocked (another process "+
			"may be acting on it until then). With leader election the Lease holder unlocks at once.")
	o.FastPaths = slices.Clone(AllFastPaths)
	fs.Var(&o.FastPaths, FastPathsFlag,
		"Take the operator's fast paths: the upgrade check answered from digests instead of a dry run ("+FastDigests+"), "+
			"a new release's empty history answered from the record cache ("+FastEmptyHistory+"), updates of release objects "+
			"that change only the Deployment revision ignored ("+FastBookkeeping+"), release records encoded with pooled "+
			"compressors ("+FastRecordEncoding+"), the reads of Helm's ownership checks and of drift correction answered "+
			"from the cache of release objects ("+FastCachedChecks+"). true takes every one; "+
			"false runs helm-operator-plugins' and Helm's own path for each (the same outcome, at their cost); a "+
			"comma-separated list takes those named.")
	fs.Float64Var(new(float64), "chart-rollout-rate", 0,
		"Deprecated and ignored: a new chart reaches a fleet in waves (--rollout-waves).")
	fs.BoolVar(&o.RolloutWaves, "rollout-waves", true,
		"Roll a new chart or new operator code out to an existing fleet in waves, each waiting for the one before "+
			"to be Ready, halted by a failure budget; spec changes go at once. false: every release upgrades at "+
			"once.")
	fs.StringVar(&o.RolloutNamespace, "rollout-state-namespace", "",
		"Namespace of the ConfigMaps holding each kind's rollout state (default: --leader-election-namespace, "+
			"else the operator's own namespace in a cluster; where neither is known, waves are off).")
	fs.IntVar(&o.Rollout.Canaries, "rollout-canaries", 1,
		"Releases in a rollout's first wave, where a watch's rollout.canarySelector does not choose them.")
	fs.IntVar(&o.Rollout.Growth, "rollout-growth", 2, "How many times larger each wave of a rollout is than the one before.")
	fs.DurationVar(&o.Rollout.Timeout, "rollout-timeout", 5*time.Minute,
		"How long a release of a wave may take to be upgraded and Ready before it counts as failed.")
	fs.IntVar(&o.Rollout.MaxFailures, "rollout-max-failures", 0,
		"Failed releases a rollout tolerates; one more halts it.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second,
		"How long in-flight reconciles may run after SIGTERM before the process exits.")
	fs.Func("shards", "Names of every shard of a sharded fleet, comma-separated, the same on every "+
		"operator Deployment of the fleet; empty: not sharded. A custom resource belongs to the shard its "+
		"label "+shard.Label+" names, or to the default shard when it names none of these.", func(v string) error {
		o.Shard.Fleet = nil
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" && !slices.Contains(o.Shard.Fleet, n) {
				o.Shard.Fleet = append(o.Shard.Fleet, n)
			}
		}
		return nil
	})
	fs.StringVar(&o.WebhookBindAddress, "webhook-bind-address", ":9443",
		"Address the conversion webhook of the kinds that declare versions (kind.yaml) listens on; none declares any: not served.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs",
		"Where the conversion webhook's certificate is (tls.crt, tls.key).")
	fs.StringVar(&o.WebhookService, "webhook-service", os.Getenv(WebhookServiceEnv),
		"The Service, in the operator's namespace, in front of the conversion webhook (make deploy sets "+WebhookServiceEnv+"): the operator keeps its "+
			"certificate in the Secret <name>-cert there, renews it before it ends and writes the CA into each converting CRD. "+
			"Empty: the certificate in --webhook-cert-dir (OLM provides one), else one made at start for the host of "+
			"--webhook-bind-address (make run), whose URL and CA it writes into each converting CRD.")
	fs.StringVar(&o.Shard.Name, "shard", "",
		"This Deployment's shard, one of --shards; empty: the default shard. Its leader election Lease is "+
			"named after it (--leader-election-id-<shard>).")
}

// Validate reports options that cannot work.
func (o *Options) Validate() error {
	switch {
	case o.Shard.Validate() != nil:
		return o.Shard.Validate()
	case o.MaxConcurrentReconciles < 1:
		return fmt.Errorf("--max-concurrent-reconciles must be at least 1, got %d", o.MaxConcurrentReconciles)
	case o.ReconcilePeriod < 0:
		return fmt.Errorf("--reconcile-period must not be negative, got %s", o.ReconcilePeriod)
	case o.MinReconcilePeriod < 0:
		return fmt.Errorf("--min-reconcile-period must not be negative, got %s", o.MinReconcilePeriod)
	case o.DefaultServiceAccount != "" && tenancy.CheckName(o.DefaultServiceAccount) != nil:
		return fmt.Errorf("--%s: %w", tenancy.DefaultServiceAccountFlag, tenancy.CheckName(o.DefaultServiceAccount))
	case o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1:
		return fmt.Errorf("--kube-api-qps must be positive and --kube-api-burst at least 1, got %g and %d",
			o.KubeAPIQPS, o.KubeAPIBurst)
	case o.Rollout.Check() != nil:
		return fmt.Errorf("--rollout-*: %w", o.Rollout.Check())
	case o.UnlockPendingAfter <= 0:
		return fmt.Errorf("--unlock-pending-after must be positive, got %s", o.UnlockPendingAfter)
	case o.MaxReleaseHistory < 0:
		return fmt.Errorf("--max-release-history must not be negative, got %d", o.MaxReleaseHistory)
	case o.LeaderElect && o.RenewDeadline >= o.LeaseDuration:
		return fmt.Errorf("--leader-election-renew-deadline (%s) must be shorter than --leader-election-lease-duration (%s)",
			o.RenewDeadline, o.LeaseDuration)
	}
	return nil
}

// WatchNamespaces parses a WATCH_NAMESPACE value into the cache's namespace map; nil means all
// namespaces. Blank items and duplicates are ignored.
func WatchNamespaces(value string) map[string]cache.Config {
	namespaces := map[string]cache.Config{}
	for _, ns := range strings.Split(value, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			namespaces[ns] = cache.Config{}
		}
	}
	if len(namespaces) == 0 {
		return nil // all namespaces
	}
	return namespaces
}

// WatchNamespacesFromEnv reads WATCH_NAMESPACE from the environment.
func WatchNamespacesFromEnv() map[string]cache.Config {
	return WatchNamespaces(os.Getenv(WatchNamespaceEnv))
}

// FastPathsFlag chooses the operator's fast paths (Options.FastPaths).
const FastPathsFlag = "fast-paths"

// The fast paths, each beside the stock path it replaces (docs/architecture.md, "Fast paths").
const (
	// FastDigests answers the upgrade check from digests instead of the plugins' dry run.
	FastDigests = "digests"
	// FastEmptyHistory answers a new release's empty history from the record cache instead of
	// Helm listing its Secrets.
	FastEmptyHistory = "empty-history"
	// FastBookkeeping drops updates of release objects that change only what the cluster's
	// controllers keep for themselves (the Deployment revision), beside the plugins' own rule.
	FastBookkeeping = "bookkeeping"
	// FastRecordEncoding encodes release records with pooled compressors instead of Helm's new
	// compressor at the best compression per record.
	FastRecordEncoding = "record-encoding"
	// FastCachedChecks answers the reads of Helm's ownership checks, and of drift correction, from
	// the cache of release objects instead of the apiserver (helmconfig.Answers).
	FastCachedChecks = "cached-checks"
)

// AllFastPaths lists every fast path.
var AllFastPaths = []string{FastDigests, FastEmptyHistory, FastBookkeeping, FastRecordEncoding, FastCachedChecks}

// FastPaths is the set of fast paths the operator takes. As a flag: true (every one, the
// default), false (none: helm-operator-plugins' and Helm's own path for each), or a
// comma-separated list of names, to measure or isolate one.
type FastPaths []string

// On reports whether the fast path name is taken.
func (f FastPaths) On(name string) bool { return slices.Contains(f, name) }

func (f *FastPaths) String() string {
	if f == nil || len(*f) == 0 {
		return "false"
	}
	return strings.Join(*f, ",")
}

// Set parses true, false or a list of names.
func (f *FastPaths) Set(v string) error {
	*f = FastPaths{}
	switch v {
	case "true":
		*f = slices.Clone(AllFastPaths)
	case "false", "":
	default:
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); !slices.Contains(AllFastPaths, name) {
				return fmt.Errorf("unknown fast path %q: true, false, or a list of %s", name, strings.Join(AllFastPaths, ", "))
			} else if !f.On(name) {
				*f = append(*f, name)
			}
		}
	}
	return nil
}

// IsBoolFlag lets --fast-paths stand alone for true, as the boolean flag it was.
func (f *FastPaths) IsBoolFlag() bool { return true }

// OwnNamespace is the namespace of the operator's Pod, as its ServiceAccount credentials name
// it; "" out of a cluster.
func OwnNamespace() string {
	ns, _ := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	return strings.TrimSpace(string(ns))
}

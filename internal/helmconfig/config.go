// Package helmconfig is the Helm 4 configuration each custom resource's actions run with, and
// what it guarantees whatever Helm does with it:
//
//   - what Helm learns of the cluster is learnt once per kind, not once per action: Helm asks
//     the apiserver for its version before every action (IsReachable, and again for the
//     capabilities) and lists every API group again; the capabilities here are shared and
//     refreshed after TTL, or at once when the API changes (Refresh);
//   - every object Helm builds carries the release-object label (names.ManagedLabel) and, but
//     hooks, points at its custom resource, and nothing outside the custom resource's reach is
//     built (kubeclient.go): confinement sits in the kube
//     client's Build because every object Helm writes, deletes, runs as a hook or corrects for
//     drift is built there first, by every action, dry runs included. A forged record (a tenant
//     may write Secrets) is refused the same way when Helm builds its objects to update or
//     delete them;
//   - what the templates look up (`lookup`) is read through the REST client getter Helm's
//     engine builds its clients from, which refuses what is outside the reach and records the
//     rest (Recorder), for the digests of a rendering's inputs (package actionclient);
//   - the release records, in one storage type (store.go);
//   - Helm acts as the operator, or, for a kind that names one, as a ServiceAccount of the
//     custom resource's namespace (package tenancy); the records are always written as the
//     operator, so tenants need no rights over the operator's bookkeeping.
package helmconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/tenancy"
)

// FieldManager is the field manager of every object the operator applies server-side, and of
// its other writes.
const FieldManager = "myproxy-operator"

// TTL is how long learnt capabilities and a successful reachability check are reused. A new or
// removed API (a CRD installed after the operator started) refreshes them at once through
// Refresh, which the APIService watch calls (package controller); the TTL bounds how late a
// change that no APIService shows (the apiserver's own version) is seen.
const TTL = time.Minute

// Configs builds the Helm configuration of each custom resource of one kind.
type Configs struct {
	base      *rest.Config
	mapper    meta.RESTMapper
	discovery discovery.CachedDiscoveryInterface // for Helm's object builder
	learn     discovery.DiscoveryInterface       // asked for the server version and API groups
	secrets   corev1client.CoreV1Interface       // the release records, as the operator
	now       func() time.Time
	Settings

	mu        sync.Mutex
	caps      *common.Capabilities // learnt at capsAt: the apiserver answered then
	capsAt    time.Time
	refreshed string // what the last Refresh saw
}

// Settings are what a kind's releases are configured with.
type Settings struct {
	// Managed is the managed label value of every release object (names.ManagedLabel).
	Managed string
	// Reach is what a release may touch beyond its custom resource's namespace.
	Reach tenancy.Policy
	// Records is the process's registry of release records; Pooled encodes them with pooled
	// compressors (fast path record-encoding).
	Records *Records
	Pooled  bool
	// Account, when not "", is the ServiceAccount of the custom resource's namespace Helm acts
	// as; Accounts (nil: not checked) knows which namespaces hold it.
	Account  string
	Accounts *tenancy.Accounts
	// Cached reads a release object of this shard from the cache of release objects: nil when
	// the cache holds no such object, and followed false when it does not follow the kind at all
	// (Cached nil: none followed).
	Cached func(schema.GroupVersionKind, types.NamespacedName) (obj client.Object, followed bool)
	// CachedChecks answers the reads of Helm's ownership checks from Cached (Answers).
	CachedChecks bool
}

// New returns the configurations of a kind, over the operator's REST config and mapper.
func New(cfg *rest.Config, mapper meta.RESTMapper, s Settings) (*Configs, error) {
	// Helm's field manager is a setting of the process: without it, Helm names the manager after
	// the executable, which differs between builds and copies of the binary.
	kube.ManagedFieldsManager = FieldManager
	learn, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	secrets, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Secrets client for release records: %w", err)
	}
	return &Configs{base: cfg, mapper: mapper, discovery: memory.NewMemCacheClient(learn), learn: learn, secrets: secrets,
		now: time.Now, Settings: s}, nil
}

// For returns the configuration of obj's release, and what records the lookups of its
// renderings. log receives Helm's own log lines.
func (c *Configs) For(ctx context.Context, obj client.Object, log logr.Logger) (*action.Configuration, *Recorder, error) {
	ns := obj.GetNamespace()
	deleting := obj.GetDeletionTimestamp() != nil
	as := c.base
	var gone *tenancy.MissingError
	if c.Account != "" {
		// A missing ServiceAccount stops only the actions of a custom resource not being deleted.
		if c.Accounts != nil {
			if err := c.Accounts.Check(ctx, ns); err != nil && (!errors.As(err, &gone) || !deleting) {
				return nil, nil, err
			}
		}
		as = tenancy.As(c.base, ns, c.Account)
	}
	caps, err := c.Capabilities()
	if err != nil {
		return nil, nil, err
	}
	handler := logr.ToSlogHandler(log)
	// Every request of the release's actions names it, for the apiserver's audit log.
	as = rest.CopyConfig(as)
	as.UserAgent = fmt.Sprintf("%s release %s/%s", FieldManager, ns, obj.GetName())
	objects := &restGetter{config: as, mapper: c.mapper, discovery: c.discovery, namespace: ns}
	kc := kube.New(objects)
	kc.Namespace = ns
	kc.SetLogger(handler)
	wrapped := &kubeClient{Client: kc, configs: c, release: obj.GetName(), releaseNS: ns, owner: obj}
	objects.wrap = wrapped.answer
	owner := metav1.NewControllerRef(obj, obj.GetObjectKind().GroupVersionKind())
	var d driver.Driver = &Store{secrets: c.secrets.Secrets(ns), namespace: ns, owner: *owner, records: c.Records,
		absences: !deleting, pooled: c.Pooled, seen: map[string]metav1.Preconditions{}, checkNew: wrapped.confineHooks}
	if gone != nil {
		// Nothing may act for the tenant any more: the uninstall finds no release (Unaccounted).
		d, wrapped.unaccounted = driver.NewMemory(), gone
	}
	reads := &Recorder{guard: lookupGuard(c.Reach, ns, c.mapper)}
	cfg := &action.Configuration{
		// Helm's engine builds its lookup clients from this getter's config, which nothing else
		// of an action reads objects with: the kube client keeps its own.
		RESTClientGetter: &restGetter{config: as, mapper: c.mapper, discovery: c.discovery, namespace: ns, wrap: reads.Transport},
		Releases:         storage.Init(d),
		KubeClient:       wrapped,
		Capabilities:     caps.Copy(), // a Configuration may adjust its own
	}
	cfg.SetLogger(handler)
	cfg.Releases.SetLogger(handler)
	return cfg, reads, nil
}

// Unaccounted is why the actions of cfg act for nobody: the ServiceAccount the custom
// resource's releases run as is gone from its namespace while it is deleted, so its uninstall
// finds no release; nil otherwise.
func Unaccounted(cfg *action.Configuration) error {
	if c, ok := cfg.KubeClient.(*kubeClient); ok && c.unaccounted != nil {
		return c.unaccounted
	}
	return nil
}

// lookupGuard refuses a template's read outside the release's reach. A read whose scope the
// mapper cannot tell is refused: the guard fails closed.
func lookupGuard(p tenancy.Policy, releaseNS string, mapper meta.RESTMapper) func(Read) error {
	return func(rd Read) error {
		o := tenancy.Object{Namespaced: true, Namespace: rd.Namespace, Name: rd.Name,
			GroupKind: schema.GroupKind{Group: rd.Resource.Group, Kind: rd.Resource.Resource}}
		gvk, err := mapper.KindFor(rd.Resource)
		if err == nil {
			o.GroupKind = gvk.GroupKind()
			var m *meta.RESTMapping
			if m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
				o.Namespaced = m.Scope.Name() == meta.RESTScopeNameNamespace
			}
		}
		if err != nil && rd.Namespace == "" {
			return fmt.Errorf("refused to look up %s: its scope is unknown: %w", rd.Resource, err)
		}
		return p.Read(releaseNS, o)
	}
}

// Refresh learns the cluster's capabilities again now, and reports whether the API versions or
// the Kubernetes version changed since the last Refresh (the first one reports no change). It
// compares with what the last Refresh saw, not with what reconciles learnt in between after
// TTL, so that no change goes unreported.
func (c *Configs) Refresh() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.learnLocked(); err != nil {
		return false, err
	}
	seen := c.caps.KubeVersion.Version + "\x00" + strings.Join(slices.Sorted(slices.Values(c.caps.APIVersions)), "\x00")
	changed := c.refreshed != "" && seen != c.refreshed
	c.refreshed = seen
	return changed, nil
}

// Capabilities returns what the kind's renderings see of the cluster, learnt within TTL.
func (c *Configs) Capabilities() (*common.Capabilities, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.caps == nil || c.now().Sub(c.capsAt) >= TTL {
		if err := c.learnLocked(); err != nil {
			return nil, err
		}
	}
	return c.caps, nil
}

func (c *Configs) learnLocked() error {
	version, err := c.learn.ServerVersion()
	if err != nil {
		return fmt.Errorf("could not get server version from Kubernetes: %w", err)
	}
	apiVersions, err := action.GetVersionSet(c.learn)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		// A group that fails discovery (an orphaned APIService) leaves the others usable, as in Helm.
		return fmt.Errorf("could not get apiVersions from Kubernetes: %w", err)
	}
	c.caps = &common.Capabilities{
		APIVersions: apiVersions,
		KubeVersion: common.KubeVersion{Version: version.GitVersion, Major: version.Major, Minor: version.Minor},
		HelmVersion: common.DefaultCapabilities.HelmVersion,
	}
	c.capsAt = c.now()
	return nil
}

// restGetter is what Helm builds its clients from: the REST config of the identity it acts as,
// the operator's mapper and discovery, and the custom resource's namespace; wrap wraps the
// transport of every client built (the lookups' Recorder, the kube client's answers).
type restGetter struct {
	config    *rest.Config
	mapper    meta.RESTMapper
	discovery discovery.CachedDiscoveryInterface
	namespace string
	wrap      func(http.RoundTripper) http.RoundTripper
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) {
	cfg := rest.CopyConfig(g.config)
	cfg.Wrap(g.wrap)
	return cfg, nil
}

func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return g.discovery, nil
}

func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) { return g.mapper, nil }

func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return namespaceOnly(g.namespace)
}

// namespaceOnly is the client configuration of a restGetter: it only names the namespace.
type namespaceOnly string

func (n namespaceOnly) RawConfig() (clientcmdapi.Config, error) { return clientcmdapi.Config{}, nil }
func (n namespaceOnly) ClientConfig() (*rest.Config, error)     { return nil, nil }
func (n namespaceOnly) Namespace() (string, bool, error)        { return string(n), false, nil }
func (n namespaceOnly) ConfigAccess() clientcmd.ConfigAccess    { return nil }

// Read is one object (or list of objects) a rendering read.
type Read struct {
	Resource  schema.GroupVersionResource
	Namespace string // "" for cluster-scoped objects, and for lists across namespaces
	Name      string // "" for a list
}

// Key names what was read.
func (r Read) Key() string {
	return fmt.Sprintf("%s/%s/%s/%s/%s", r.Resource.Group, r.Resource.Version, r.Resource.Resource, r.Namespace, r.Name)
}

// Recorder collects the reads of one custom resource's renderings.
type Recorder struct {
	guard func(Read) error

	mu     sync.Mutex
	reads  map[string]Read
	onRead func(n int)
}

// OnRead calls f, with the number of distinct reads so far, after each read (nil: nobody).
// It runs on the rendering's goroutine, before the rendering goes on.
func (r *Recorder) OnRead(f func(n int)) {
	r.mu.Lock()
	r.onRead = f
	r.mu.Unlock()
}

// Start forgets earlier reads: each Helm action renders once, after Start.
func (r *Recorder) Start() {
	r.mu.Lock()
	r.reads = nil
	r.mu.Unlock()
}

// Reads returns what was read since Start, in key order.
func (r *Recorder) Reads() []Read {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.SortedFunc(maps.Values(r.reads), func(a, b Read) int { return strings.Compare(a.Key(), b.Key()) })
}

func (r *Recorder) add(rd Read) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reads == nil {
		r.reads = map[string]Read{}
	}
	r.reads[rd.Key()] = rd
	if r.onRead != nil {
		r.onRead(len(r.reads))
	}
}

// Transport is next, recording every object read through it and refusing, unsent, what the
// guard refuses: the transport of a rendering's lookups.
func (r *Recorder) Transport(next http.RoundTripper) http.RoundTripper {
	return promhttp.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		rd, ok := ParsePath(req.URL.Path)
		if ok && r.guard != nil {
			if err := r.guard(rd); err != nil {
				return nil, err
			}
		}
		resp, err := next.RoundTrip(req)
		if err == nil && req.Method == http.MethodGet && ok { // !ok: discovery, which resources a group has
			r.add(rd)
		}
		return resp, err
	})
}

// ParsePath tells which object or list an apiserver path reads; false for discovery paths and
// anything else that is not a read of objects.
func ParsePath(path string) (Read, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		gv, parts = schema.GroupVersion{Version: parts[1]}, parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		return Read{}, false // not under a group version's resources: discovery, /version...
	}
	var rd Read
	if parts[0] == "namespaces" && len(parts) >= 3 {
		rd.Namespace, parts = parts[1], parts[2:]
	}
	rd.Resource = gv.WithResource(parts[0])
	if len(parts) >= 2 {
		rd.Name = parts[1] // a subresource (parts[2]) reads the object too
	}
	return rd, true
}

// Package helmconfig wraps helm-operator-plugins' ActionConfigGetter so that what Helm learns
// about the cluster is learnt once per operator, not once per reconcile, so that the objects
// Helm builds carry the release-object label (package managedlabel), and so that a release
// touches nothing outside its custom resource's reach (package reach).
//
// Confinement sits in the kube client's Build because every object Helm writes, deletes, runs
// as a hook or corrects for drift is built there first, by every action, dry runs included;
// and in the release storage, because Helm stores a new revision's record (hooks included)
// before it runs the first hook, so a hook outside the reach is refused before anything is
// written. A forged record (a tenant may write Secrets) is refused the same way when Helm
// builds its objects to update or delete them.
//
// The plugins build a fresh action.Configuration for every reconcile. Helm then, for every
// action, asks the apiserver for its version (KubeClient.IsReachable, and again to compute
// Capabilities), and invalidates the shared discovery cache before listing every API group
// again: a large share of the requests an install costs (docs/performance.md).
// The Getter hands each Configuration Capabilities and a reachability check shared by the
// whole process and refreshed after TTL.
package helmconfig

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/managedlabel"
	"github.com/example/myproxy-operator/internal/ownwrites"
	"github.com/example/myproxy-operator/internal/reach"
	"github.com/example/myproxy-operator/internal/renderinputs"
	"github.com/example/myproxy-operator/internal/tenant"
)

// TTL is how long learnt Capabilities and a successful reachability check are reused. A new or
// removed API (a CRD installed after the operator started) refreshes them at once through
// Refresh, which the APIService watch calls (package controller); the TTL bounds how late a
// change that no APIService shows (the apiserver's own version) is seen.
const TTL = time.Minute

// Getter is an ActionConfigGetter that shares cluster facts between Configurations.
type Getter struct {
	next      helmclient.ActionConfigGetter
	discovery discovery.DiscoveryInterface
	now       func() time.Time

	mu        sync.Mutex
	caps      *chartutil.Capabilities
	capsAt    time.Time
	refreshed string // what the last Refresh saw
	reachedAt time.Time

	own *ownwrites.Registry
	// managed is the managed label value stamped on every release object.
	managed string
	// reach is what a release may touch beyond its custom resource's namespace.
	reach reach.Policy
	// accounts, when set, are the ServiceAccounts the actions run as (package tenant); recorder
	// reports a release let go because its ServiceAccount is gone.
	accounts *tenant.Accounts
	recorder record.EventRecorder
}

// RunAs makes every Configuration check that the custom resource's namespace holds the
// ServiceAccount of accounts, whose identity the next getter's Helm client takes (package
// tenant). A custom resource being deleted without it gets an empty release storage: the
// uninstall finds no release, the reconciler lets the custom resource go, and the garbage
// collector removes the release's objects and records through their owner references.
func (g *Getter) RunAs(accounts *tenant.Accounts, recorder record.EventRecorder) {
	g.accounts, g.recorder = accounts, recorder
}

// New wraps next; dc is asked for the server version and API groups when they are stale; own
// learns every object Helm deletes through these configurations; every object Helm builds is
// labelled managed (package managedlabel); policy bounds what a release writes and looks up.
func New(next helmclient.ActionConfigGetter, dc discovery.DiscoveryInterface, own *ownwrites.Registry, managed string, policy reach.Policy) *Getter {
	return &Getter{next: next, discovery: dc, now: time.Now, own: own, managed: managed, reach: policy}
}

// ActionConfigFor implements helmclient.ActionConfigGetter.
func (g *Getter) ActionConfigFor(ctx context.Context, obj client.Object) (*action.Configuration, error) {
	var gone *tenant.MissingError
	if g.accounts != nil {
		if err := g.accounts.Check(ctx, obj.GetNamespace()); err != nil {
			if !errors.As(err, &gone) || obj.GetDeletionTimestamp() == nil {
				return nil, err
			}
		}
	}
	cfg, err := g.next.ActionConfigFor(ctx, obj)
	if err != nil {
		return nil, err
	}
	if gone != nil {
		cfg.Releases = storage.Init(driver.NewMemory())
		g.recorder.Eventf(obj, corev1.EventTypeWarning, tenant.ReasonUninstallSkipped,
			"%v; the custom resource is deleted without an uninstall, and the garbage collector removes its release through owner references", gone)
	}
	caps, err := g.capabilities()
	if err != nil {
		return nil, err
	}
	cfg.Capabilities = caps.Copy() // a Configuration may adjust its own
	kc, ok := cfg.KubeClient.(*kube.Client)
	if !ok {
		// Confinement needs Helm's own client; the plugins always build one.
		return nil, fmt.Errorf("helm kube client is a %T, not *kube.Client", cfg.KubeClient)
	}
	releaseNS := obj.GetNamespace()
	wrapped := &kubeClient{Client: kc, getter: g, releaseNS: releaseNS}
	cfg.KubeClient = wrapped
	if cfg.Releases != nil {
		cfg.Releases.Driver = &hookChecked{Driver: cfg.Releases.Driver, kube: wrapped}
	}
	// What the templates look up is recorded, for the digest of the rendering's inputs, and
	// refused outside the release's reach.
	if rec := renderinputs.InstallRecorder(cfg); rec != nil {
		mapper, err := cfg.RESTClientGetter.ToRESTMapper()
		if err != nil {
			return nil, err
		}
		rec.Guard(lookupGuard(g.reach, releaseNS, mapper))
	}
	return cfg, nil
}

// lookupGuard refuses a template's read outside the release's reach. A read whose scope the
// mapper cannot tell is refused: the guard fails closed.
func lookupGuard(p reach.Policy, releaseNS string, mapper meta.RESTMapper) func(renderinputs.Read) error {
	return func(rd renderinputs.Read) error {
		o := reach.Object{Namespaced: true, Namespace: rd.Namespace, Name: rd.Name,
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
func (g *Getter) Refresh() (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.learnLocked(); err != nil {
		return false, err
	}
	apis := slices.Clone(g.caps.APIVersions)
	slices.Sort(apis)
	seen := g.caps.KubeVersion.Version + "\x00" + strings.Join(apis, "\x00")
	changed := g.refreshed != "" && seen != g.refreshed
	g.refreshed = seen
	return changed, nil
}

func (g *Getter) capabilities() (*chartutil.Capabilities, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.caps != nil && g.now().Sub(g.capsAt) < TTL {
		return g.caps, nil
	}
	if err := g.learnLocked(); err != nil {
		return nil, err
	}
	return g.caps, nil
}

func (g *Getter) learnLocked() error {
	version, err := g.discovery.ServerVersion()
	if err != nil {
		return fmt.Errorf("could not get server version from Kubernetes: %w", err)
	}
	apiVersions, err := action.GetVersionSet(g.discovery)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		// A group that fails discovery (an orphaned APIService) leaves the others usable, as in Helm.
		return fmt.Errorf("could not get apiVersions from Kubernetes: %w", err)
	}
	g.caps = &chartutil.Capabilities{
		APIVersions: apiVersions,
		KubeVersion: chartutil.KubeVersion{Version: version.GitVersion, Major: version.Major, Minor: version.Minor},
		HelmVersion: chartutil.DefaultCapabilities.HelmVersion,
	}
	now := g.now()
	g.capsAt, g.reachedAt = now, now
	return nil
}

// reachable runs check unless one succeeded within TTL.
func (g *Getter) reachable(check func() error) error {
	g.mu.Lock()
	fresh := !g.reachedAt.IsZero() && g.now().Sub(g.reachedAt) < TTL
	g.mu.Unlock()
	if fresh {
		return nil
	}
	if err := check(); err != nil {
		return err
	}
	g.mu.Lock()
	g.reachedAt = g.now()
	g.mu.Unlock()
	return nil
}

// kubeClient is Helm's own client with a shared reachability check, which labels every object
// it builds as a release object (package managedlabel). Embedding the concrete type keeps every
// optional interface Helm looks for (waiting, deletion propagation...).
type kubeClient struct {
	*kube.Client
	getter    *Getter
	releaseNS string
}

// Build implements kube.Interface. Helm builds every manifest it applies, deletes or runs as a
// hook, and the plugins' owner-reference post-renderer builds each rendered manifest through
// this client too, so the label reaches the objects and the manifest stored in the release,
// and an object outside the release's reach is refused before any of them is sent.
//
// It never validates against the OpenAPI schema, whatever Helm asks: the install and upgrade
// options already turn that off for the release manifest (controller.actionClients), but Helm
// builds hook manifests with it on, which fetches the OpenAPI documents and reads the release's
// Namespace (a right the operator is not given) for every hook run. The apiserver validates
// every object it is sent either way.
func (c *kubeClient) Build(reader io.Reader, _ bool) (kube.ResourceList, error) {
	objs, err := c.Client.Build(reader, false)
	if err != nil {
		return objs, err
	}
	if err := c.confine(objs); err != nil {
		return nil, err
	}
	return objs, managedlabel.Label(objs, c.getter.managed)
}

// confine refuses the first object of objs outside the release's reach.
func (c *kubeClient) confine(objs kube.ResourceList) error {
	for _, info := range objs {
		if info.Mapping == nil {
			return fmt.Errorf("refused to write %s %q: its scope is unknown", info.Object.GetObjectKind().GroupVersionKind(), info.Name)
		}
		o := reach.Object{GroupKind: info.Mapping.GroupVersionKind.GroupKind(),
			Namespaced: info.Mapping.Scope.Name() == meta.RESTScopeNameNamespace, Namespace: info.Namespace, Name: info.Name}
		if !o.Namespaced {
			o.Namespace = ""
		}
		if err := c.getter.reach.Write(c.releaseNS, o); err != nil {
			return err
		}
	}
	return nil
}

// hookChecked is a release storage that refuses a new revision whose hooks are outside the
// release's reach: Helm stores the record before it runs the first hook, and builds each hook
// only when it runs it, so an earlier hook would be written before a later one is refused.
type hookChecked struct {
	driver.Driver
	kube *kubeClient
}

// Create implements driver.Driver.
func (h *hookChecked) Create(key string, rls *release.Release) error {
	for _, hook := range rls.Hooks {
		if _, err := h.kube.Build(strings.NewReader(hook.Manifest), false); err != nil {
			return fmt.Errorf("hook %s: %w", hook.Path, err)
		}
	}
	return h.Driver.Create(key, rls)
}

// Create implements kube.Interface: a delete of these objects from now on is someone else's.
func (c *kubeClient) Create(resources kube.ResourceList) (*kube.Result, error) {
	res, err := c.Client.Create(resources)
	c.forEach(resources, (*ownwrites.Registry).Created)
	return res, err
}

// Delete implements kube.Interface: Helm's uninstall, and its rollback of a failed install.
func (c *kubeClient) Delete(resources kube.ResourceList) (*kube.Result, []error) {
	c.deleting(resources)
	return c.Client.Delete(resources)
}

// DeleteWithPropagationPolicy implements kube.InterfaceDeletionPropagation (Helm's uninstall).
func (c *kubeClient) DeleteWithPropagationPolicy(resources kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	c.deleting(resources)
	return c.Client.DeleteWithPropagationPolicy(resources, policy)
}

// Update implements kube.Interface: an upgrade or rollback deletes the objects of original that
// target no longer has, and with force replaces (deletes and creates) every object it changes.
func (c *kubeClient) Update(original, target kube.ResourceList, force bool) (*kube.Result, error) {
	c.deletingInUpdate(original, target, force)
	res, err := c.Client.Update(original, target, force)
	c.updated(target, force)
	return res, err
}

// UpdateThreeWayMerge implements kube.InterfaceThreeWayMerge, as Update.
func (c *kubeClient) UpdateThreeWayMerge(original, target kube.ResourceList, force bool) (*kube.Result, error) {
	c.deletingInUpdate(original, target, force)
	res, err := c.Client.UpdateThreeWayMerge(original, target, force)
	c.updated(target, force)
	return res, err
}

// updated forgets the deletes of target's objects, which exist again, unless force replaced
// them: the events of those deletes may still be on their way.
func (c *kubeClient) updated(target kube.ResourceList, force bool) {
	if !force {
		c.forEach(target, (*ownwrites.Registry).Created)
	}
}

func (c *kubeClient) deletingInUpdate(original, target kube.ResourceList, force bool) {
	if force {
		c.deleting(target)
	}
	c.deleting(original.Difference(target))
}

func (c *kubeClient) deleting(resources kube.ResourceList) {
	c.forEach(resources, (*ownwrites.Registry).Deleting)
}

func (c *kubeClient) forEach(resources kube.ResourceList, note func(*ownwrites.Registry, ownwrites.Key)) {
	if c.getter.own == nil {
		return
	}
	for _, info := range resources {
		var gk schema.GroupKind
		if info.Mapping != nil {
			gk = info.Mapping.GroupVersionKind.GroupKind()
		} else if info.Object != nil {
			gk = info.Object.GetObjectKind().GroupVersionKind().GroupKind()
		}
		note(c.getter.own, ownwrites.Key{GroupKind: gk, NamespacedName: types.NamespacedName{Namespace: info.Namespace, Name: info.Name}})
	}
}

// IsReachable implements kube.Interface. Every action starts with it; when the apiserver is in
// fact unreachable, the action's first real request fails with the same cause.
func (c *kubeClient) IsReachable() error { return c.getter.reachable(c.Client.IsReachable) }

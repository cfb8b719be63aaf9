// Package helmconfig is the Helm configuration every action of a custom resource runs with:
// helm-operator-plugins' ActionConfigGetter, wrapped. It has two roles, one file each:
//
//   - getter.go, what Helm learns about the cluster: learnt once per operator, not once per
//     reconcile. The plugins build a fresh action.Configuration for every reconcile; Helm then,
//     for every action, asks the apiserver for its version (KubeClient.IsReachable, and again to
//     compute Capabilities), and invalidates the shared discovery cache before listing every API
//     group again: a large share of the requests an install costs (docs/performance.md). The
//     Getter hands each Configuration Capabilities shared by the whole process and refreshed
//     after TTL, and answers the reachability check by when they were last learnt. It also
//     installs the lookup recorder of the rendering (package renderinputs), confined to the
//     release's reach.
//   - kubeclient.go, how Helm touches the cluster: every object Helm builds carries the
//     release-object label (names.ManagedLabel), and nothing outside the custom resource's
//     reach is built (tenancy.Policy). Confinement sits in the kube
//     client's Build because every object Helm writes, deletes, runs as a hook or corrects for
//     drift is built there first, by every action, dry runs included; and in the release
//     storage, because Helm stores a new revision's record (hooks included) before it runs the
//     first hook, so a hook outside the reach is refused before anything is written. A forged
//     record (a tenant may write Secrets) is refused the same way when Helm builds its objects
//     to update or delete them.
package helmconfig

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/renderinputs"
	"github.com/example/myproxy-operator/internal/tenancy"
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
	caps      *chartutil.Capabilities // learnt at capsAt: the apiserver answered then
	capsAt    time.Time
	refreshed string // what the last Refresh saw

	// managed is the managed label value stamped on every release object.
	managed string
	// reach is what a release may touch beyond its custom resource's namespace.
	reach tenancy.Policy
	// accounts, when set, are the ServiceAccounts the actions run as (package tenancy); recorder
	// reports a release let go because its ServiceAccount is gone.
	accounts *tenancy.Accounts
	recorder record.EventRecorder
}

// RunAs makes every Configuration check that the custom resource's namespace holds the
// ServiceAccount of accounts, whose identity the next getter's Helm client takes (package
// tenant). A custom resource being deleted without it gets an empty release storage: the
// uninstall finds no release, the reconciler lets the custom resource go, and the garbage
// collector removes the release's objects and records through their owner references.
func (g *Getter) RunAs(accounts *tenancy.Accounts, recorder record.EventRecorder) {
	g.accounts, g.recorder = accounts, recorder
}

// New wraps next; dc is asked for the server version and API groups when they are stale; every
// object Helm builds is labelled managed (names.ManagedLabel); policy bounds what a release
// writes and looks up.
func New(next helmclient.ActionConfigGetter, dc discovery.DiscoveryInterface, managed string, policy tenancy.Policy) *Getter {
	return &Getter{next: next, discovery: dc, now: time.Now, managed: managed, reach: policy}
}

// ActionConfigFor implements helmclient.ActionConfigGetter.
func (g *Getter) ActionConfigFor(ctx context.Context, obj client.Object) (*action.Configuration, error) {
	var gone *tenancy.MissingError
	if g.accounts != nil {
		// A missing ServiceAccount (gone) stops only the actions of a custom resource not being deleted.
		if err := g.accounts.Check(ctx, obj.GetNamespace()); err != nil && (!errors.As(err, &gone) || obj.GetDeletionTimestamp() == nil) {
			return nil, err
		}
	}
	cfg, err := g.next.ActionConfigFor(ctx, obj)
	if err != nil {
		return nil, err
	}
	if gone != nil {
		cfg.Releases = storage.Init(driver.NewMemory())
		g.recorder.Eventf(obj, corev1.EventTypeWarning, tenancy.ReasonUninstallSkipped,
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
	if cfg.RESTClientGetter != nil {
		mapper, err := cfg.RESTClientGetter.ToRESTMapper()
		if err != nil {
			return nil, err
		}
		renderinputs.InstallRecorder(cfg, lookupGuard(g.reach, releaseNS, mapper))
	}
	return cfg, nil
}

// lookupGuard refuses a template's read outside the release's reach. A read whose scope the
// mapper cannot tell is refused: the guard fails closed.
func lookupGuard(p tenancy.Policy, releaseNS string, mapper meta.RESTMapper) func(renderinputs.Read) error {
	return func(rd renderinputs.Read) error {
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
func (g *Getter) Refresh() (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.learnLocked(); err != nil {
		return false, err
	}
	seen := renderinputs.CapabilitiesDigestInput(g.caps, renderinputs.CapabilityUse{KubeVersion: true, APIVersions: true})
	changed := g.refreshed != "" && seen != g.refreshed
	g.refreshed = seen
	return changed, nil
}

func (g *Getter) capabilities() (*chartutil.Capabilities, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.caps == nil || g.now().Sub(g.capsAt) >= TTL {
		if err := g.learnLocked(); err != nil {
			return nil, err
		}
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
	g.capsAt = g.now()
	return nil
}

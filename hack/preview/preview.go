// The preview tells, before a new chart or a new operator reaches a fleet, what it would do
// to every release, and writes nothing. For each custom resource of each watched kind it builds
// the values as the operator does (override values, the value translator and the checks of
// kind.yaml), renders the chart through the operator's own action client as the
// reconciler's upgrade check does (a dry-run upgrade, with the cluster's capabilities and
// lookups, the objects labelled and confined as the operator's are), and asks the apiserver for
// a server-side dry run of every object that would be created, changed or deleted, and of
// every hook object the install or upgrade would create: the apiserver's validation,
// immutability and admission decide, as they would for the real upgrade.
package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	gocmp "github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/status"
)

// Outcome is what the new chart would do to one release.
type Outcome string

const (
	// Unchanged is a release that renders as it is deployed.
	Unchanged Outcome = "unchanged"
	// Changed is a release whose objects would be created, changed or deleted, each accepted
	// by the apiserver.
	Changed Outcome = "changed"
	// Replaced is a release with an object whose change touches a field the apiserver keeps
	// immutable: Helm's upgrade fails on it (the operator does not force-replace objects).
	Replaced Outcome = "replaced"
	// Refused is a release whose values fail a check, whose chart does not render, or with an
	// object the apiserver refuses.
	Refused Outcome = "refused"
)

// Fails reports whether the upgrade of a release with this outcome would fail.
func (o Outcome) Fails() bool { return o == Replaced || o == Refused }

// Object is one object of a release that would change.
type Object struct {
	Kind      string `json:"kind"` // group/version, Kind
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Change is created, changed or deleted; for a hook the install or upgrade would run,
	// "hook" and its events (hook pre-upgrade).
	Change string `json:"change"`
	// Refused says why it would fail: the apiserver's answer to the dry run, or (for a hook)
	// the release's reach.
	Refused string `json:"refused,omitempty"`
	// Diff is the field diff (deployed, then new), when asked for.
	Diff string `json:"diff,omitempty"`
}

// Release is the preview of one custom resource's release.
type Release struct {
	Kind      string   `json:"kind"` // group/version, Kind of the custom resource
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Outcome   Outcome  `json:"outcome"`
	Message   string   `json:"message,omitempty"`
	Objects   []Object `json:"objects,omitempty"`
}

// Report is the preview of every release.
type Report struct {
	Releases []Release       `json:"releases"`
	Summary  map[Outcome]int `json:"summary"`
}

// Fails reports whether any release's upgrade would fail.
func (r Report) Fails() bool {
	return slices.ContainsFunc(r.Releases, func(rel Release) bool { return rel.Outcome.Fails() })
}

// Kind is one watched kind to preview.
type Kind struct {
	GVK schema.GroupVersionKind
	// Actions is the kind's action client, as the operator builds it: it renders each release
	// as the upgrade check does (values, checks, chart, dry-run mode).
	Actions *actionclient.Client
	// Account is the ServiceAccount the kind's releases run as in each custom resource's
	// namespace ("": the operator's identity); the dry runs of their objects are sent as it.
	Account string
	// Decl is the kind's chart's declaration: a custom resource stored at an older version it
	// declares renders from its spec converted to the chart's own version.
	Decl *chartapi.Compiled
}

// converted is cr at the version of the kind's chart, as the operator reads it once the chart
// and its CRD are installed.
func (k Kind) converted(cr *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if k.Decl == nil {
		return cr, nil
	}
	versions := k.Decl.VersionNames()
	spec, ok := cr.Object["spec"].(map[string]any)
	if len(versions) < 2 || cr.GroupVersionKind().Version == versions[0] || !ok {
		return cr, nil
	}
	spec, err := k.Decl.Convert(spec, cr.GroupVersionKind().Version, versions[0], chartapi.Kept{})
	if err != nil {
		return nil, err
	}
	out := cr.DeepCopy()
	out.Object["spec"] = spec
	out.SetAPIVersion(k.GVK.Group + "/" + versions[0])
	return out, nil
}

// Previewer previews the releases of custom resources, reading through Reader and dry-running
// through Writer (every write it sends carries the dry-run option).
type Previewer struct {
	Reader client.Reader
	// Writer gives the writer of a release in namespace that runs as the ServiceAccount account
	// ("": the operator's identity), so that a dry run is authorised as the release's own write
	// would be.
	Writer func(namespace, account string) (client.Writer, error)
	Mapper meta.RESTMapper
	// Namespaces limits the custom resources previewed (nil: all).
	Namespaces []string
	// Diff asks for the field diff of each changed object.
	Diff bool
}

// fieldOwner is the field manager of the dry runs.
const fieldOwner = "myproxy-operator-preview"

// Run previews every custom resource of each kind, in namespace and name order.
func (p Previewer) Run(ctx context.Context, kinds []Kind) (Report, error) {
	rep := Report{Summary: map[Outcome]int{Unchanged: 0, Changed: 0, Replaced: 0, Refused: 0}}
	for _, k := range kinds {
		// Listed at the version the cluster serves first: the chart's may not be served yet.
		listed := k.GVK
		if m, err := p.Mapper.RESTMapping(k.GVK.GroupKind()); err == nil {
			listed = m.GroupVersionKind
		}
		crs, err := p.list(ctx, listed)
		if err != nil {
			return rep, fmt.Errorf("listing %s: %w", k.GVK.Kind, err)
		}
		for i := range crs {
			rel := p.one(ctx, k, &crs[i])
			rep.Releases = append(rep.Releases, rel)
			rep.Summary[rel.Outcome]++
		}
	}
	return rep, nil
}

func (p Previewer) list(ctx context.Context, gvk schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	namespaces := p.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var out []unstructured.Unstructured
	for _, ns := range namespaces {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := p.Reader.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
	}
	slices.SortFunc(out, func(a, b unstructured.Unstructured) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	return out, nil
}

// one previews the release of cr.
func (p Previewer) one(ctx context.Context, k Kind, cr *unstructured.Unstructured) Release {
	rel := Release{Kind: k.GVK.GroupVersion().String() + ", " + k.GVK.Kind, Namespace: cr.GetNamespace(), Name: cr.GetName()}
	refused := func(err error) Release {
		rel.Outcome, rel.Message = Refused, err.Error()
		return rel
	}
	if cr.GetDeletionTimestamp() != nil {
		rel.Outcome, rel.Message = Unchanged, "being deleted: it will be uninstalled, not upgraded"
		return rel
	}
	w, err := p.Writer(cr.GetNamespace(), k.Account)
	if err != nil {
		return refused(err)
	}
	if cr, err = k.converted(cr); err != nil {
		return refused(err)
	}
	rend, err := k.Actions.Render(ctx, cr)
	if err != nil {
		return refused(err)
	}
	current, rendered := rend.Current, rend.Rendered
	before := map[string]*unstructured.Unstructured{}
	if current != nil {
		if before, err = built(rend.Kube, current.Manifest); err != nil {
			return refused(fmt.Errorf("the deployed manifest: %w", err))
		}
	}
	after, err := built(rend.Kube, rendered.Manifest)
	if err != nil {
		return refused(fmt.Errorf("the new manifest: %w", err))
	}
	rel.Outcome = Unchanged
	if current != nil && current.Info != nil && current.Info.Status != common.StatusDeployed {
		rel.Message = "the release is " + current.Info.Status.String() + ": the operator will upgrade it"
		rel.Outcome = Changed
	}
	keys := slices.Concat(slices.Collect(maps.Keys(before)), slices.Collect(maps.Keys(after)))
	slices.Sort(keys)
	for _, key := range slices.Compact(keys) {
		obj := p.object(ctx, w, before[key], after[key])
		if obj == nil {
			continue
		}
		rel.Objects = append(rel.Objects, *obj)
		switch {
		case obj.Refused != "" && isImmutable(obj.Refused):
			if rel.Outcome != Refused {
				rel.Outcome = Replaced
			}
		case obj.Refused != "":
			rel.Outcome = Refused
		case rel.Outcome == Unchanged:
			rel.Outcome = Changed
		}
	}
	if rel.Outcome != Unchanged {
		hooks, err := p.hooks(ctx, w, rend.Kube, rendered, current == nil)
		if err != nil {
			return refused(fmt.Errorf("the new hooks: %w", err))
		}
		for _, o := range hooks {
			rel.Objects = append(rel.Objects, o)
			if o.Refused != "" {
				rel.Outcome = Refused
			}
		}
	}
	return rel
}

// hooks dry-runs, through w, the creation of each hook object that the install (or upgrade) of
// rendered runs: Helm creates them as it goes, and one the apiserver refuses fails the action.
// A hook object left from an earlier run is applied over instead (Helm deletes it first, by the
// default before-hook-creation policy). Test hooks and those of other actions do not run. Each
// hook is first built by helm, the release's Helm client, which refuses what is outside the
// release's reach as the operator's does.
func (p Previewer) hooks(ctx context.Context, w client.Writer, helm kube.Interface, rendered *release.Release, install bool) ([]Object, error) {
	runs := []release.HookEvent{release.HookPreUpgrade, release.HookPostUpgrade}
	if install {
		runs = []release.HookEvent{release.HookPreInstall, release.HookPostInstall}
	}
	var out []Object
	for _, h := range rendered.Hooks {
		var events []string
		for _, e := range h.Events {
			if slices.Contains(runs, e) {
				events = append(events, e.String())
			}
		}
		if len(events) == 0 {
			continue
		}
		objs, err := p.objects(h.Manifest, rendered.Namespace)
		if err != nil {
			return nil, fmt.Errorf("hook %s: %w", h.Path, err)
		}
		_, refusal := helm.Build(strings.NewReader(h.Manifest), false)
		for _, key := range slices.Sorted(maps.Keys(objs)) {
			obj := objs[key]
			o := describe(obj, "hook "+strings.Join(events, ","))
			if refusal != nil {
				o.Refused = refusal.Error()
			} else if err := dryRun(ctx, w, "created", obj); err != nil {
				o.Refused = err.Error()
			}
			out = append(out, o)
		}
	}
	return out, nil
}

// object compares one object of the release before and after (either may be nil) and dry-runs
// the change through w; nil when it does not change.
func (p Previewer) object(ctx context.Context, w client.Writer, before, after *unstructured.Unstructured) *Object {
	subject, change := after, "changed"
	switch {
	case before == nil:
		change = "created"
	case after == nil:
		subject, change = before, "deleted"
	case gocmp.Equal(before.Object, after.Object):
		return nil
	}
	o := describe(subject, change)
	if p.Diff && before != nil && after != nil {
		o.Diff = gocmp.Diff(before.Object, after.Object)
	}
	if err := dryRun(ctx, w, change, subject); err != nil {
		o.Refused = err.Error()
	}
	return &o
}

// dryRun asks the apiserver what it would make of the change, without storing anything: a
// server-side apply of the new object (the apiserver validates the object it would store,
// immutable fields and admission included), a create of a new one, a delete of a removed one.
func dryRun(ctx context.Context, w client.Writer, change string, obj *unstructured.Unstructured) error {
	obj = obj.DeepCopy()
	switch change {
	case "deleted":
		return client.IgnoreNotFound(w.Delete(ctx, obj, client.DryRunAll))
	case "created":
		// An object that exists already (a release record lost, or adopted) is applied over.
		if err := w.Create(ctx, obj, client.DryRunAll); !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	obj.SetManagedFields(nil)
	obj.SetResourceVersion("")
	return w.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.DryRunAll, client.ForceOwnership, client.FieldOwner(fieldOwner))
}

// describe names obj for the report.
func describe(obj *unstructured.Unstructured, change string) Object {
	return Object{Kind: obj.GroupVersionKind().GroupVersion().String() + ", " + obj.GetKind(),
		Namespace: obj.GetNamespace(), Name: obj.GetName(), Change: change}
}

// isImmutable tells an apiserver refusal of a change to an immutable field.
func isImmutable(message string) bool { return strings.Contains(message, "field is immutable") }

// built are the objects of a release manifest by kind, namespace and name, as the release's Helm
// client builds them to apply: with what the operator adds to every release object.
func built(helm kube.Interface, manifest string) (map[string]*unstructured.Unstructured, error) {
	objs, err := helm.Build(strings.NewReader(manifest), false)
	if err != nil {
		return nil, err
	}
	out := map[string]*unstructured.Unstructured{}
	for _, info := range objs {
		u, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("%s %s: unsupported object type %T", info.Mapping.GroupVersionKind.Kind, info.Name, info.Object)
		}
		out[u.GroupVersionKind().String()+" "+u.GetNamespace()+"/"+u.GetName()] = u
	}
	return out, nil
}

// objects parses a release manifest into its objects by kind, namespace and name; objects
// without a namespace take the release's when their kind is namespaced (Helm's rule).
func (p Previewer) objects(manifest, namespace string) (map[string]*unstructured.Unstructured, error) {
	out := map[string]*unstructured.Unstructured{}
	for _, doc := range releaseutil.SplitManifests(manifest) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetNamespace() == "" && status.Namespaced(p.Mapper)(u.GroupVersionKind()) {
			u.SetNamespace(namespace)
		}
		out[u.GroupVersionKind().String()+" "+u.GetNamespace()+"/"+u.GetName()] = u
	}
	return out, nil
}

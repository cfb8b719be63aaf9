package helmconfig

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/operator-framework/helm-operator-plugins/pkg/manifestutil"
	sdkhandler "github.com/operator-framework/operator-lib/handler"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/tenancy"
)

// kubeClient is Helm's own client, which labels every object it builds as a release object
// (names.ManagedLabel), builds nothing outside the custom resource's reach, and never creates,
// updates or deletes an object another release owns, in this process or another: every write
// of an object carries the precondition of the read that checked whose it is. Embedding the
// concrete type keeps every optional interface Helm looks for (waiters with options...).
type kubeClient struct {
	*kube.Client
	configs            *Configs
	release, releaseNS string
	// action is what the running action told of itself (SetAction).
	action Action
}

// Action is what an action tells the kube client of itself before it runs.
type Action struct {
	// ServerSide: it applies server-side (an object is created by an apply, which would take an
	// existing one, so a create carries the resource version of an absent object).
	ServerSide bool
	// Checked: Helm itself reads every object the action creates or deletes and checks it is not
	// another release's (install, upgrade and uninstall), so the client reads none again.
	Checked bool
}

// SetAction tells cfg's kube client what the action about to run is.
func SetAction(cfg *action.Configuration, a Action) {
	if c, ok := cfg.KubeClient.(*kubeClient); ok {
		c.action = a
	}
}

// Build implements kube.Interface. Helm builds every manifest it applies, deletes or runs as a
// hook, and the owner-reference post-renderer builds each rendered manifest through this client
// too, so the label reaches the objects and the manifest stored in the release, and an object
// outside the release's reach is refused before any of them is sent.
//
// It never validates against the OpenAPI schema, whatever Helm asks: Helm builds hook
// manifests with validation on, which fetches the OpenAPI documents and reads the release's
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
	return objs, label(objs, c.configs.Managed)
}

// label sets the managed label (names.ManagedLabel) to value on every object of a list built by
// Helm's kube client. It is set here, not by a post-renderer: the owner-reference post-renderer
// already builds and re-serialises every rendered manifest through this client, so the label
// lands in the manifest stored in the release at no cost.
func label(objs kube.ResourceList, value string) error {
	for _, info := range objs {
		m, err := meta.Accessor(info.Object)
		if err != nil {
			return fmt.Errorf("labelling %s %s: %w", info.Mapping.GroupVersionKind.Kind, info.Name, err)
		}
		m.SetLabels(labels.Merge(m.GetLabels(), labels.Set{names.ManagedLabel: value}))
	}
	return nil
}

// confine refuses the first object of objs outside the release's reach.
func (c *kubeClient) confine(objs kube.ResourceList) error {
	for _, info := range objs {
		if info.Mapping == nil {
			return fmt.Errorf("refused to write %s %q: its scope is unknown", info.Object.GetObjectKind().GroupVersionKind(), info.Name)
		}
		o := tenancy.Object{GroupKind: info.Mapping.GroupVersionKind.GroupKind(),
			Namespaced: info.Mapping.Scope.Name() == meta.RESTScopeNameNamespace, Namespace: info.Namespace, Name: info.Name}
		if !o.Namespaced {
			o.Namespace = ""
		}
		if err := c.configs.Reach.Write(c.releaseNS, o); err != nil {
			return err
		}
	}
	return nil
}

// confineHooks refuses a release record whose hooks reach outside the release's namespace.
func (c *kubeClient) confineHooks(rls *rspb.Release) error {
	for _, hook := range rls.Hooks {
		if _, err := c.Build(strings.NewReader(hook.Manifest), false); err != nil {
			return fmt.Errorf("hook %s: %w", hook.Path, err)
		}
	}
	return nil
}

// Create implements kube.Interface: it creates nothing another release owns. Helm checked that
// none of objs exists (on install; else the client checks), and the create carries that
// finding: a POST fails on an object made since, and an apply does, applied over the resource
// version of an absent object (AbsentVersion), which only a create matches.
func (c *kubeClient) Create(objs kube.ResourceList, opts ...kube.ClientCreateOption) (*kube.Result, error) {
	if err := c.check(objs); err != nil {
		return nil, err
	}
	if c.action.ServerSide {
		for _, info := range objs {
			if m, err := meta.Accessor(info.Object); err == nil {
				m.SetResourceVersion(AbsentVersion)
			}
		}
	}
	res, err := c.Client.Create(objs, opts...)
	return res, c.taken(objs, err)
}

// Update implements kube.Interface: of the objects it creates (those original has not), none may
// be another release's (Helm checked them on upgrade; else the client checks), and each is
// created as Create creates it; an object it keeps is written only while it is still the one
// the release holds (its UID, from the cache, or Helm's read).
func (c *kubeClient) Update(original, target kube.ResourceList, opts ...kube.ClientUpdateOption) (*kube.Result, error) {
	created := target.Difference(original)
	if err := c.check(created); err != nil {
		return &kube.Result{}, err
	}
	for _, info := range target {
		m, err := meta.Accessor(info.Object)
		if err != nil {
			continue
		}
		if created.Get(info) != nil {
			if c.action.ServerSide {
				m.SetResourceVersion(AbsentVersion)
			}
		} else if live := c.cached(info); live != nil {
			if err := Owns(live, c.release, c.releaseNS); err != nil {
				return &kube.Result{}, fmt.Errorf("%s %q in namespace %q %w", info.Mapping.GroupVersionKind.Kind, info.Name, info.Namespace, err)
			}
			m.SetUID(live.GetUID())
		}
	}
	res, err := c.Client.Update(original, target, opts...)
	return res, c.taken(created, err)
}

// AbsentVersion is the resource version an apply that creates is sent with: the apiserver takes
// it as a precondition of an object that exists (none has it: the first revision of etcd's
// history) and drops it from an object it creates.
const AbsentVersion = "1"

// check returns an error naming the first object of objs another release owns, unless Helm
// checked them itself.
func (c *kubeClient) check(objs kube.ResourceList) error {
	if c.action.Checked {
		return nil
	}
	for _, info := range objs {
		if err := c.ownedOrAbsent(info); err != nil {
			return err
		}
	}
	return nil
}

// taken names the owner of an object whose create failed on a precondition: another process
// made it between the check and the write.
func (c *kubeClient) taken(objs kube.ResourceList, err error) error {
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, info := range objs {
		if owned := c.ownedOrAbsent(info); owned != nil {
			return owned
		}
	}
	return err
}

// Delete implements kube.Interface: it deletes the objects of objs that are the release's, each
// only while it is the object read (its UID as a precondition): an object another release took
// meanwhile, or made again, stays. Whose an object is, the cache of release objects tells, else
// a read.
func (c *kubeClient) Delete(objs kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	res := &kube.Result{}
	var errs []error
	for _, info := range objs {
		live := c.cached(info)
		if live == nil {
			obj, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if live, err = meta.Accessor(obj); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if Owns(live, c.release, c.releaseNS) != nil {
			continue // another release's; a failed install's manifest names objects it never created
		}
		uid := live.GetUID()
		_, err := resource.NewHelper(info.Client, info.Mapping).DeleteWithOptions(info.Namespace, info.Name,
			&metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil:
			res.Deleted = append(res.Deleted, info)
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err): // gone, or made again meanwhile
			errs = append(errs, err)
		}
	}
	return res, errs
}

// cached is the object of info as the cache of release objects holds it: nil when the cache does
// not follow its kind, or holds no such object of this shard.
func (c *kubeClient) cached(info *resource.Info) metav1.Object {
	if c.configs.Cached == nil || info.Mapping == nil {
		return nil
	}
	return c.configs.Cached(info.Mapping.GroupVersionKind, types.NamespacedName{Namespace: info.Namespace, Name: info.Name})
}

// IsReachable answers Helm's check before every action from the capabilities: the apiserver
// answered within TTL, or is asked again (Helm asks the same question, /version).
func (c *kubeClient) IsReachable() error {
	_, err := c.configs.Capabilities()
	return err
}

// ownerReferences is the post-renderer that points every rendered object at its custom
// resource, as helm-operator-plugins' does: an owner reference where the object can carry one
// (the custom resource's namespace, no keep policy), so that the garbage collector takes it with
// the custom resource, and the operator-sdk owner annotations otherwise, which the dependent
// watches follow. Hooks keep neither: they outlive their release until the operator deletes
// them after the uninstall (the actions render with PostRenderStrategyNoHooks).
type ownerReferences struct {
	kube   kube.Interface
	mapper meta.RESTMapper
	owner  client.Object
}

// Run implements postrenderer.PostRenderer.
func (p ownerReferences) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	objs, err := p.kube.Build(in, false)
	if err != nil {
		return nil, err
	}
	out := &bytes.Buffer{}
	for _, info := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(info.Object)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		byRef, err := CanOwn(p.mapper, p.owner, u)
		if err != nil {
			return nil, err
		}
		if byRef && !manifestutil.HasResourcePolicyKeep(u.GetAnnotations()) {
			u.SetOwnerReferences(append(u.GetOwnerReferences(), *metav1.NewControllerRef(p.owner, p.owner.GetObjectKind().GroupVersionKind())))
		} else if err := sdkhandler.SetOwnerAnnotations(p.owner, u); err != nil {
			return nil, err
		}
		data, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	return out, nil
}

// CanOwn reports whether dependent can carry an owner reference to owner: a namespaced owner
// owns only objects of its own namespace; a cluster-scoped one owns any.
func CanOwn(mapper meta.RESTMapper, owner, dependent client.Object) (bool, error) {
	ownerNamespaced, err := apiutil.IsGVKNamespaced(owner.GetObjectKind().GroupVersionKind(), mapper)
	if err != nil || !ownerNamespaced {
		return err == nil, err // a cluster-scoped owner owns any
	}
	dependentNamespaced, err := apiutil.IsGVKNamespaced(dependent.GetObjectKind().GroupVersionKind(), mapper)
	if err != nil || !dependentNamespaced {
		return false, err
	}
	return owner.GetNamespace() == dependent.GetNamespace(), nil
}

// SetOwnership marks obj as an object of release rls of namespace, as Helm marks every object
// it applies.
func SetOwnership(obj runtime.Object, rls, namespace string) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	m.SetLabels(labels.Merge(m.GetLabels(), labels.Set{names.HelmManagedByLabel: names.HelmManagedByValue}))
	m.SetAnnotations(labels.Merge(m.GetAnnotations(), labels.Set{names.HelmReleaseNameAnnotation: rls,
		names.HelmReleaseNamespaceAnnotation: namespace}))
	return nil
}

// Owns returns an error naming the owner when obj belongs to another release than rls of
// namespace by Helm's ownership annotations; an object that names no release is anyone's.
func Owns(obj metav1.Object, rls, namespace string) error {
	a := obj.GetAnnotations()
	name, ns := a[names.HelmReleaseNameAnnotation], a[names.HelmReleaseNamespaceAnnotation]
	if (name == "" && ns == "") || (name == rls && ns == namespace) {
		return nil
	}
	return &OwnedError{Release: name, Namespace: ns}
}

// OwnedError is an object that belongs to another release.
type OwnedError struct{ Release, Namespace string }

func (e *OwnedError) Error() string {
	return fmt.Sprintf("belongs to release %s of namespace %s (annotations %s, %s), and is left as it is",
		e.Release, e.Namespace, names.HelmReleaseNameAnnotation, names.HelmReleaseNamespaceAnnotation)
}

// ownedOrAbsent reads the object of info: nil when it does not exist or the release owns it,
// else why not.
func (c *kubeClient) ownedOrAbsent(info *resource.Info) error {
	live, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("could not get %s %q: %w", info.Mapping.GroupVersionKind.Kind, info.Name, err)
	}
	m, err := meta.Accessor(live)
	if err == nil {
		err = Owns(m, c.release, c.releaseNS)
	}
	if err != nil {
		return fmt.Errorf("%s %q in namespace %q %w", info.Mapping.GroupVersionKind.Kind, info.Name, info.Namespace, err)
	}
	return nil
}

package helmconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/operator-framework/helm-operator-plugins/pkg/manifestutil"
	sdkhandler "github.com/operator-framework/operator-lib/handler"
	"helm.sh/helm/v4/pkg/kube"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/tenancy"
)

// kubeClient is Helm's own client, which labels every object it builds as a release object
// (names.ManagedLabel), builds nothing outside the custom resource's reach, and never creates,
// updates or deletes an object another release owns. Embedding the concrete type keeps every
// optional interface Helm looks for (waiters with options...).
type kubeClient struct {
	*kube.Client
	configs            *Configs
	release, releaseNS string
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

// Create implements kube.Interface: it creates nothing another release owns.
func (c *kubeClient) Create(objs kube.ResourceList, opts ...kube.ClientCreateOption) (*kube.Result, error) {
	defer Lock(objs)()
	if err := c.noneOwnedByOthers(objs); err != nil {
		return nil, err
	}
	return c.Client.Create(objs, opts...)
}

// Update implements kube.Interface: of the objects it creates (those original has not), none
// may be another release's.
func (c *kubeClient) Update(original, target kube.ResourceList, opts ...kube.ClientUpdateOption) (*kube.Result, error) {
	created := target.Difference(original)
	defer Lock(created)()
	if err := c.noneOwnedByOthers(created); err != nil {
		return &kube.Result{}, err
	}
	return c.Client.Update(original, target, opts...)
}

// noneOwnedByOthers returns an error naming the first object of objs that exists and belongs
// to another release. Its callers hold Lock(objs) from the check through their write, so that
// within this process the check and the write of an object are one step: two releases that
// render the same object, written at the same moment, never both take it.
func (c *kubeClient) noneOwnedByOthers(objs kube.ResourceList) error {
	for _, info := range objs {
		if err := ownedOrAbsent(info, c.release, c.releaseNS); err != nil {
			return err
		}
	}
	return nil
}

// Delete implements kube.Interface: it leaves the objects another release owns as they are (a
// failed install's manifest names objects it never created).
func (c *kubeClient) Delete(objs kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	defer Lock(objs)()
	mine := objs.Filter(func(info *resource.Info) bool {
		var owned *OwnedError
		return !errors.As(ownedOrAbsent(info, c.release, c.releaseNS), &owned)
	})
	if len(mine) == 0 {
		return &kube.Result{}, nil
	}
	return c.Client.Delete(mine, policy)
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
func Owns(obj runtime.Object, rls, namespace string) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	a := m.GetAnnotations()
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

// ownedOrAbsent reads the object of info: nil when it does not exist or rls of namespace owns
// it, else why not.
func ownedOrAbsent(info *resource.Info, rls, namespace string) error {
	live, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("could not get %s %q: %w", info.Mapping.GroupVersionKind.Kind, info.Name, err)
	}
	if err := Owns(live, rls, namespace); err != nil {
		return fmt.Errorf("%s %q in namespace %q %w", info.Mapping.GroupVersionKind.Kind, info.Name, info.Namespace, err)
	}
	return nil
}

// writing is the objects this process's releases are checking or writing; released is
// signalled whenever some of them are no longer.
var (
	writingMu sync.Mutex
	writing   = map[string]bool{}
	released  = sync.NewCond(&writingMu)
)

// Lock locks the objects of objs against the writes of other releases of this process, and
// returns what unlocks them. It takes them all at once, when none is held: a caller never holds
// some while it waits for others, so no two callers wait for each other.
func Lock(objs kube.ResourceList) (unlock func()) {
	var keys []string
	for _, info := range objs {
		if info.Mapping != nil {
			keys = append(keys, info.Mapping.GroupVersionKind.GroupKind().String()+"/"+info.Namespace+"/"+info.Name)
		}
	}
	writingMu.Lock()
	defer writingMu.Unlock()
	for slices.ContainsFunc(keys, func(k string) bool { return writing[k] }) {
		released.Wait()
	}
	for _, k := range keys {
		writing[k] = true
	}
	return func() {
		writingMu.Lock()
		defer writingMu.Unlock()
		for _, k := range keys {
			delete(writing, k)
		}
		released.Broadcast()
	}
}

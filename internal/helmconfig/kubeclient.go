package helmconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/operator-framework/helm-operator-plugins/pkg/manifestutil"
	sdkhandler "github.com/operator-framework/operator-lib/handler"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/tenancy"
)

// kubeClient is Helm's own client, which labels every object it builds as a release object
// (names.ManagedLabel), builds nothing outside the custom resource's reach, and never creates,
// updates or deletes an object another release owns, in this process or another: every write
// of an object carries the precondition of the read that found whose it is (an absent object's
// resource version to create, the UID read to write or delete). Embedding the concrete type
// keeps every optional interface Helm looks for (waiters with options...).
type kubeClient struct {
	*kube.Client
	configs            *Configs
	release, releaseNS string
	// owner is the custom resource the release's objects point at (own).
	owner client.Object
	// action is what the running action told of itself (SetAction); answers, how Helm's reads
	// through this client are answered now (answer).
	action  Action
	answers atomic.Int32
	// unaccounted: the ServiceAccount it acts as is gone (Unaccounted).
	unaccounted error
}

// Action is what an action tells the kube client of itself before it runs.
type Action struct {
	// ServerSide: it applies server-side. An object is created by an apply, which would take an
	// existing one, so a create carries the resource version of an absent object.
	ServerSide bool
	// Answers: how the reads Helm makes before the action writes are answered.
	Answers Answers
}

// Answers is how the reads Helm makes through the kube client before an action writes are
// answered: Helm reads every object its install or upgrade is about to create, and every
// object its uninstall is about to delete, to check that it is not another release's.
type Answers int32

const (
	// Live answers every read by the apiserver.
	Live Answers = iota
	// FromCache answers a read of an object the cache of release objects holds as the cache
	// holds it, any other by the apiserver. The write that follows carries the UID the
	// answer gave, so an object that changed hands since is left as it is. (Uninstall.)
	FromCache
	// FromCacheOrAbsent is FromCache, and a read of an object of a kind the cache follows but
	// does not hold is answered absent: the create that follows carries that answer as its
	// precondition (an apply over AbsentVersion, or a POST), so an object that did exist fails
	// it and is then read, and its owner named. (Install, upgrade.)
	FromCacheOrAbsent
)

// SetAction tells cfg's kube client what the action about to run is; the returned func tells
// it that the action is over.
func SetAction(cfg *action.Configuration, a Action) (done func()) {
	c, ok := cfg.KubeClient.(*kubeClient)
	if !ok {
		return func() {}
	}
	c.action = a
	c.answers.Store(int32(a.Answers))
	return func() { c.action = Action{}; c.answers.Store(int32(Live)) }
}

// answer is the transport of every client Helm's kube client builds: while an action's reads
// are answered from the cache (Action.Answers), a read of one object of a kind the cache
// follows does not reach the apiserver. Once the action writes, every read is live: Helm's
// client-side patches and its upgrade of client-side field managers read what the cache
// drops (managed fields).
func (c *kubeClient) answer(next http.RoundTripper) http.RoundTripper {
	return promhttp.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		answers := Answers(c.answers.Load())
		if answers == Live || req.Method != http.MethodGet || c.configs.Cached == nil || !c.configs.CachedChecks {
			return next.RoundTrip(req)
		}
		rd, ok := ParsePath(req.URL.Path)
		if !ok || rd.Name == "" || !strings.HasSuffix(req.URL.Path, "/"+rd.Resource.Resource+"/"+rd.Name) {
			return next.RoundTrip(req) // not one object: a list, a subresource
		}
		gvk, err := c.configs.mapper.KindFor(rd.Resource)
		if err != nil {
			return next.RoundTrip(req)
		}
		obj, followed := c.configs.Cached(gvk, types.NamespacedName{Namespace: rd.Namespace, Name: rd.Name})
		switch {
		case obj != nil:
			content, err := caches.Content(obj, gvk)
			if err != nil {
				return nil, err
			}
			return jsonResponse(req, http.StatusOK, content)
		case followed && answers == FromCacheOrAbsent:
			status := apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: rd.Resource.Resource}, rd.Name).ErrStatus
			status.Kind, status.APIVersion = "Status", "v1"
			return jsonResponse(req, http.StatusNotFound, status)
		}
		return next.RoundTrip(req)
	})
}

// jsonResponse is the apiserver's answer to req: body, as JSON, with code.
func jsonResponse(req *http.Request, code int, body any) (*http.Response, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(bytes.NewReader(data)),
		ContentLength: int64(len(data)), Request: req}, nil
}

// Build implements kube.Interface. Helm builds every manifest it applies, deletes or runs as a
// hook through it: each object is refused when it is outside the release's reach, before any
// is sent, and is given what the operator adds to every release object (own), so that it
// reaches every object written, whichever action writes it, and none of it is stored in the
// release's manifest, which holds what the chart rendered, as for `helm install`.
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
	return objs, c.own(objs)
}

// own sets on every object of a list built by Helm's kube client the managed label
// (names.ManagedLabel), which the operator's caches select release objects by, and, but on
// hooks, what points it at the custom resource, as helm-operator-plugins' post-renderer does:
// an owner reference where the object can carry one (the custom resource's namespace, no keep
// policy), so that the garbage collector takes it with the custom resource, and the operator-sdk
// owner annotations otherwise, which the dependent watches follow. Hooks outlive their release
// until the operator deletes them after the uninstall; Helm tells a hook by its annotation
// alone. An object that points at the custom resource already (a manifest an earlier version
// of the operator stored with its owner reference) is left pointing once.
func (c *kubeClient) own(objs kube.ResourceList) error {
	for _, info := range objs {
		u, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("labelling %s %s: unsupported object type %T", info.Mapping.GroupVersionKind.Kind, info.Name, info.Object)
		}
		u.SetLabels(labels.Merge(u.GetLabels(), labels.Set{names.ManagedLabel: c.configs.Managed}))
		if _, hook := u.GetAnnotations()[rspb.HookAnnotation]; hook {
			continue
		}
		byRef, err := CanOwn(c.configs.mapper, c.owner, u)
		if err != nil {
			return err
		}
		switch {
		case !byRef || manifestutil.HasResourcePolicyKeep(u.GetAnnotations()):
			if err := sdkhandler.SetOwnerAnnotations(c.owner, u); err != nil {
				return err
			}
		case !slices.ContainsFunc(u.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == c.owner.GetUID() }):
			u.SetOwnerReferences(append(u.GetOwnerReferences(), *metav1.NewControllerRef(c.owner, c.owner.GetObjectKind().GroupVersionKind())))
		}
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

// Create implements kube.Interface: it creates nothing that exists. A create is a POST, which
// fails on an existing object, or an apply over the resource version of an absent object
// (AbsentVersion), which only a create matches; when one fails so, the object is read and its
// owner named.
func (c *kubeClient) Create(objs kube.ResourceList, opts ...kube.ClientCreateOption) (*kube.Result, error) {
	c.answers.Store(int32(Live))
	c.createOnly(objs)
	res, err := c.Client.Create(objs, opts...)
	return res, c.taken(objs, err)
}

// createOnly makes the apply of every object of objs a create (AbsentVersion) when the action
// applies server-side.
func (c *kubeClient) createOnly(objs kube.ResourceList) {
	if !c.action.ServerSide {
		return
	}
	for _, info := range objs {
		if m, err := meta.Accessor(info.Object); err == nil {
			m.SetResourceVersion(AbsentVersion)
		}
	}
}

// Update implements kube.Interface: the objects it creates (those original has not) are
// created as Create creates them; an object it keeps is written only while it is the one the
// release holds: the UID the cache holds, else the UID read (the cache holds only the objects
// of this shard, in the namespaces it watches, and may not have heard of one yet); an object
// another release holds is not written at all, and one that is absent (a failed install's
// manifest names objects it never created) is applied server-side as a created one is. An
// object original has and target has not is deleted as Delete deletes.
func (c *kubeClient) Update(original, target kube.ResourceList, opts ...kube.ClientUpdateOption) (*kube.Result, error) {
	c.answers.Store(int32(Live))
	absent := target.Difference(original) // the objects it creates, and those found absent
	for _, info := range target.Intersect(original) {
		m, err := meta.Accessor(info.Object)
		if err != nil {
			continue
		}
		live, err := c.live(info)
		switch {
		case err != nil:
			return &kube.Result{}, err
		case live != nil:
			if err := Owns(live, info.Mapping.GroupVersionKind.Kind, c.release, c.releaseNS); err != nil {
				return &kube.Result{}, err
			}
			m.SetUID(live.GetUID())
		case c.action.ServerSide:
			absent = append(absent, info)
		}
	}
	c.createOnly(absent)
	// The objects the release no longer has are deleted here, not by Helm, which deletes each it
	// finds, whoever holds it now, without a precondition; as Helm's, an object whose
	// annotations ask Helm to keep it stays.
	removed := original.Difference(target)
	res, err := c.Client.Update(original.Intersect(target), target, opts...)
	if err != nil || len(removed) == 0 {
		return res, c.taken(absent, err)
	}
	deleted, errs := c.remove(removed, metav1.DeletePropagationBackground, true)
	res.Deleted = append(res.Deleted, deleted.Deleted...)
	return res, errors.Join(errs...)
}

// AbsentVersion is the resource version an apply that creates is sent with: the apiserver takes
// it as a precondition of an object that exists (none has it: the first revision of etcd's
// history) and drops it from an object it creates.
const AbsentVersion = "1"

// taken names the owner of an object of objs that exists and is another release's, when err
// is a create that failed because the object exists; else it returns err.
func (c *kubeClient) taken(objs kube.ResourceList, err error) error {
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, info := range objs {
		if live, gerr := c.get(info); gerr == nil && live != nil {
			if owned := Owns(live, info.Mapping.GroupVersionKind.Kind, c.release, c.releaseNS); owned != nil {
				return owned
			}
		}
	}
	return err
}

// Delete implements kube.Interface: it deletes the objects of objs that are the release's, each
// only while it is the object read (its UID as a precondition): an object another release took
// meanwhile, or made again, stays. Whose an object is, the cache of release objects tells, else
// a read.
func (c *kubeClient) Delete(objs kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	return c.remove(objs, policy, false)
}

// remove is Delete; keep: an object whose annotations ask Helm to keep it stays too.
func (c *kubeClient) remove(objs kube.ResourceList, policy metav1.DeletionPropagation, keep bool) (*kube.Result, []error) {
	res := &kube.Result{}
	var errs []error
	for _, info := range objs {
		live, err := c.live(info)
		if err != nil {
			errs = append(errs, err)
		}
		if live == nil || Owns(live, "", c.release, c.releaseNS) != nil || keep && manifestutil.HasResourcePolicyKeep(live.GetAnnotations()) {
			continue // absent, another release's (a failed install's manifest names objects it never created), or kept
		}
		uid := live.GetUID()
		if c.configs.Records != nil {
			c.configs.Records.deleting(uid)
		}
		_, err = resource.NewHelper(info.Client, info.Mapping).DeleteWithOptions(info.Namespace, info.Name,
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

// live is the object of info as the cache of release objects holds it, else as a read finds it:
// nil when it is absent. The cache holds only the objects of this shard, of the kinds it follows.
func (c *kubeClient) live(info *resource.Info) (metav1.Object, error) {
	if c.configs.Cached != nil && info.Mapping != nil {
		key := types.NamespacedName{Namespace: info.Namespace, Name: info.Name}
		// A nil pointer in an interface is not a nil interface: only an object found is returned.
		if obj, _ := c.configs.Cached(info.Mapping.GroupVersionKind, key); obj != nil {
			return obj, nil
		}
	}
	return c.get(info)
}

// get reads the object of info from the apiserver: nil when it is absent.
func (c *kubeClient) get(info *resource.Info) (metav1.Object, error) {
	obj, err := resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
	if err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return meta.Accessor(obj)
}

// IsReachable answers Helm's check before every action from the capabilities: the apiserver
// answered within TTL, or is asked again (Helm asks the same question, /version).
func (c *kubeClient) IsReachable() error {
	_, err := c.configs.Capabilities()
	return err
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

// Owns returns a TakenError when obj, of kind, belongs to another release than rls of namespace
// by Helm's ownership annotations; an object that names no release is anyone's.
func Owns(obj metav1.Object, kind, rls, namespace string) error {
	a := obj.GetAnnotations()
	name, ns := a[names.HelmReleaseNameAnnotation], a[names.HelmReleaseNamespaceAnnotation]
	if (name == "" && ns == "") || (name == rls && ns == namespace) {
		return nil
	}
	return &TakenError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(), Release: name, ReleaseNamespace: ns}
}

// TakenError is an object another release owns (Release of ReleaseNamespace), where a release
// would write it.
type TakenError struct{ Kind, Namespace, Name, Release, ReleaseNamespace string }

func (e *TakenError) Error() string {
	return fmt.Sprintf("%s %q in namespace %q belongs to release %s of namespace %s (annotations %s, %s), and is left as it is",
		e.Kind, e.Name, e.Namespace, e.Release, e.ReleaseNamespace, names.HelmReleaseNameAnnotation, names.HelmReleaseNamespaceAnnotation)
}

// helmConflict is how Helm's install and upgrade say that an object they would create belongs
// to another release: the object, then what its release-name (and, when it differs, its
// release-namespace) annotation holds.
var (
	helmConflict = regexp.MustCompile(`(\S+) "([^"]*)" in namespace "([^"]*)" exists and cannot be imported into the current release: .*` +
		`key "` + names.HelmReleaseNameAnnotation + `" must equal "[^"]*": current value is "([^"]*)"`)
	helmConflictNamespace = regexp.MustCompile(`key "` + names.HelmReleaseNamespaceAnnotation + `" must equal "[^"]*": current value is "([^"]*)"`)
)

// Taken returns the object of another release that err says a release could not write: the
// kube client's TakenError, or Helm's own check; nil for any other error.
func Taken(err error) *TakenError {
	var taken *TakenError
	if err == nil || errors.As(err, &taken) {
		return taken
	}
	m := helmConflict.FindStringSubmatch(err.Error())
	if m == nil {
		return nil
	}
	taken = &TakenError{Kind: m[1], Name: m[2], Namespace: m[3], Release: m[4], ReleaseNamespace: m[3]}
	if ns := helmConflictNamespace.FindStringSubmatch(err.Error()); ns != nil {
		taken.ReleaseNamespace = ns[1]
	}
	return taken
}

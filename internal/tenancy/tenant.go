// A kind whose watches.yaml entry names a ServiceAccount runs its custom resources' Helm
// actions, template lookups and the Secret checks of its chart's kind.yaml as a ServiceAccount
// of the custom resource's namespace, named by an
// administrator (the serviceAccountName key of watches.yaml, or the operator's
// --default-service-account), so that what a chart may do in a namespace is bounded by the RBAC
// its tenant was given there, not by the operator's rights.
//
// Only Helm's kube client and lookups (As, on the REST config they are built from) and the
// checks' reads of Secrets (SecretReader) are impersonated: the operator keeps its own identity for its caches,
// discovery, the release records and the custom resources' status, so tenants need no rights
// over the operator's bookkeeping, and one informer still serves every namespace.
//
// Impersonating a ServiceAccount does not need it to exist, so its existence is checked first,
// from a cache of the ServiceAccounts of that name: a missing one fails the reconcile with an
// error naming it, and creating it reconciles the namespace's custom resources at once. A custom
// resource deleted after its ServiceAccount (as when its namespace is deleted) is let go without
// an uninstall: nothing may act for the tenant any more, and the release's objects and records
// carry owner references to the custom resource, so the garbage collector removes them.

package tenancy

import (
	"context"
	"fmt"
	"strings"

	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ServiceAccountKey is the watches.yaml key naming the ServiceAccount of one kind's releases.
const ServiceAccountKey = "serviceAccountName"

// ReasonUninstallSkipped is the Event of a custom resource deleted after its ServiceAccount.
const ReasonUninstallSkipped = "UninstallSkipped"

// DefaultServiceAccountFlag is the operator's flag naming the ServiceAccount of the kinds whose entry names none.
const DefaultServiceAccountFlag = "default-service-account"

// CheckName reports why name cannot be a ServiceAccount's.
func CheckName(name string) error {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("%q is not a ServiceAccount name: %s", name, strings.Join(msgs, "; "))
	}
	return nil
}

// As is base acting as the ServiceAccount name of namespace.
func As(base *rest.Config, namespace, name string) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceaccount.MakeUsername(namespace, name)}
	return cfg
}

// SecretReader reads Secrets as the ServiceAccount of one name of the namespace each Secret is
// in: the chart-declared checks of a kind whose releases run as that ServiceAccount (package
// values) then learn of a Secret no more than its releases may.
type SecretReader struct {
	rest rest.Interface
	name string
}

// NewSecretReader returns the SecretReader of the ServiceAccounts named name, over the
// operator's REST config cfg (which must be allowed to impersonate them; CheckRights).
func NewSecretReader(cfg *rest.Config, name string) (*SecretReader, error) {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &SecretReader{rest: core.RESTClient(), name: name}, nil
}

// Get reads the Secret key into obj, which must be a *corev1.Secret. The impersonation is a
// header of this one request, so one client serves every namespace.
func (r *SecretReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return fmt.Errorf("SecretReader reads Secrets, not %T", obj)
	}
	return r.rest.Get().Namespace(key.Namespace).Resource("secrets").Name(key.Name).
		SetHeader(transport.ImpersonateUserHeader, serviceaccount.MakeUsername(key.Namespace, r.name)).
		Do(ctx).Into(secret)
}

// MissingError is a ServiceAccount a custom resource's releases run as, which does not exist.
type MissingError struct{ Namespace, Name string }

func (e *MissingError) Error() string {
	return fmt.Sprintf("ServiceAccount %s/%s does not exist: the Helm actions of this custom resource run as it "+
		"(watches.yaml %s or --%s); create it and bind it the roles the chart needs", e.Namespace, e.Name, ServiceAccountKey, DefaultServiceAccountFlag)
}

// Accounts knows which namespaces hold the ServiceAccount of one name.
type Accounts struct {
	Name  string
	cache cache.Cache
}

// NewAccounts returns the Accounts of name over c, a cache of the ServiceAccounts of that name
// (caches.ServiceAccounts).
func NewAccounts(name string, c cache.Cache) *Accounts { return &Accounts{Name: name, cache: c} }

func accountMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}}
}

// Check returns a *MissingError when namespace has no ServiceAccount of the name.
func (a *Accounts) Check(ctx context.Context, namespace string) error {
	switch err := a.cache.Get(ctx, types.NamespacedName{Namespace: namespace, Name: a.Name}, accountMetadata()); {
	case client.IgnoreNotFound(err) != nil:
		return fmt.Errorf("reading ServiceAccount %s/%s: %w", namespace, a.Name, err)
	case err != nil:
		return &MissingError{Namespace: namespace, Name: a.Name}
	}
	return nil
}

// Watch reconciles the custom resources of gvk in a namespace (read from crs, the manager's
// cache) when its ServiceAccount of the name appears or goes, so that a tenant who creates it
// does not wait out the backoff of the failed reconcile.
func (a *Accounts) Watch(crs cache.Cache, gvk schema.GroupVersionKind) reconciler.ControllerSetupFunc {
	return func(ctrl reconciler.ControllerSetup) error {
		return ctrl.Watch(source.Kind(a.cache, client.Object(accountMetadata()),
			handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, sa client.Object) []reconcile.Request {
				var list unstructured.UnstructuredList
				list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
				if err := crs.List(ctx, &list, client.InNamespace(sa.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
					return nil
				}
				requests := make([]reconcile.Request, 0, len(list.Items))
				for i := range list.Items {
					requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				}
				return requests
			})))
	}
}

// Verbs are what the operator does to the ServiceAccounts of one name: it impersonates them, and
// its cache lists and watches them (by name, which RBAC's resourceNames can grant).
var Verbs = []string{"impersonate", "get", "list", "watch"}

// CheckRights fails unless c's identity holds every verb of Verbs on the ServiceAccounts of
// name in every namespace: without them every reconcile of the kinds that use them would fail
// or wait for a cache that cannot sync, so the operator refuses to start and says which rule is
// missing.
func CheckRights(ctx context.Context, c client.Client, name string) error {
	for _, verb := range Verbs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "serviceaccounts", Name: name},
		}}
		if err := c.Create(ctx, review); err != nil {
			return fmt.Errorf("asking whether the operator may %s ServiceAccount %q: %w", verb, name, err)
		}
		if !review.Status.Allowed {
			return fmt.Errorf("the operator may not %s the ServiceAccounts named %q: grant it %v on serviceaccounts "+
				"with resourceNames [%s] (make manifests does for the names in watches.yaml)", verb, name, Verbs, name)
		}
	}
	return nil
}

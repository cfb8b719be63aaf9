// Package releasestore keeps Helm release records as helm-operator-plugins does (Secrets in the
// custom resource's namespace, owned by it) but writes them with optimistic concurrency.
//
// Helm updates a record with whatever it last read, without a resourceVersion: the last writer
// wins. That is harmless while one process acts on a release, which leader election ensures for
// a live leader: it stops acting before its Lease can pass on. A leader that is frozen instead
// (a long GC pause, a suspended VM, SIGSTOP) does not stop; the operator's lease fence
// (operator/leasefence.go) refuses its writes once it resumes, but a request checked just
// before the freeze may still be sent just after it. Here every update of a record carries the
// resourceVersion this reconcile read or wrote it with, so such a straggler gets a conflict and
// its action fails, instead of overwriting newer state; the next reconcile reads afresh.
package releasestore

import (
	"context"
	"fmt"
	"sync"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/caches"
)

// Driver is a storage driver mapper for helm-operator-plugins' action config getter; own learns
// every record written or deleted through it; absences, if not nil, answers the history reads of
// releases without a record (absence.go); pooled encodes records with pooled compressors
// (encode.go), else Helm's Secrets driver does.
func Driver(own *caches.OwnWrites, absences *Absences, pooled bool) helmclient.ObjectToStorageDriverMapper {
	return func(_ context.Context, obj client.Object, cfg *rest.Config) (driver.Driver, error) {
		cs, err := corev1client.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("creating the Secrets client for release records: %w", err)
		}
		owner := metav1.NewControllerRef(obj, obj.GetObjectKind().GroupVersionKind())
		secrets := helmclient.NewOwnerRefSecretClient(cs.Secrets(obj.GetNamespace()),
			[]metav1.OwnerReference{*owner}, helmclient.MatchAllSecrets)
		versioned := Versioned(OwnedBy(secrets, obj.GetUID())).(*versioned)
		versioned.namespace, versioned.own = obj.GetNamespace(), own
		helms := driver.NewSecrets(versioned)
		var d driver.Driver = helms
		if pooled {
			d = &pooledSecrets{Secrets: helms, impl: versioned}
		}
		return wrapAbsences(d, absences, obj.GetNamespace(), obj.GetDeletionTimestamp() != nil), nil
	}
}

// Versioned wraps a Secrets client so that updates and deletes carry the resourceVersion (and
// deletes the UID) last seen through it (by a get, list, create or update) for that Secret.
func Versioned(next corev1client.SecretInterface) corev1client.SecretInterface {
	return &versioned{SecretInterface: next, seen: map[string]seenAs{}}
}

type versioned struct {
	corev1client.SecretInterface
	namespace string
	own       *caches.OwnWrites // nil: no one to tell
	mu        sync.Mutex
	seen      map[string]seenAs // Secret name -> how it was last seen
}

type seenAs struct {
	uid             types.UID
	resourceVersion string
}

func (v *versioned) remember(secrets ...corev1.Secret) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range secrets {
		v.seen[s.Name] = seenAs{uid: s.UID, resourceVersion: s.ResourceVersion}
	}
}

// write sends a write of the record, telling the registry of own writes that it is on the wire
// and, after, the resourceVersion it left (none when it failed).
func (v *versioned) write(name string, send func() (*corev1.Secret, error)) (*corev1.Secret, error) {
	key := types.NamespacedName{Namespace: v.namespace, Name: name}
	if v.own != nil {
		v.own.Writing(key)
	}
	out, err := send()
	rv := ""
	if err == nil {
		v.remember(*out)
		rv = out.ResourceVersion
	}
	if v.own != nil {
		v.own.Wrote(key, rv)
	}
	return out, err
}

func (v *versioned) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	s, err := v.SecretInterface.Get(ctx, name, opts)
	if err == nil {
		v.remember(*s)
	}
	return s, err
}

func (v *versioned) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	l, err := v.SecretInterface.List(ctx, opts)
	if err == nil {
		v.remember(l.Items...)
	}
	return l, err
}

func (v *versioned) Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error) {
	return v.write(s.Name, func() (*corev1.Secret, error) { return v.SecretInterface.Create(ctx, s, opts) })
}

func (v *versioned) Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error) {
	v.mu.Lock()
	seen, ok := v.seen[s.Name]
	v.mu.Unlock()
	if ok && s.ResourceVersion == "" {
		s = s.DeepCopy()
		s.ResourceVersion = seen.resourceVersion
	}
	return v.write(s.Name, func() (*corev1.Secret, error) { return v.SecretInterface.Update(ctx, s, opts) })
}

// Delete deletes the record only as it was last seen: a record that changed since (written by
// another process, or restored) is not deleted on stale knowledge; the action fails with a
// conflict and the next reconcile reads afresh.
func (v *versioned) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	v.mu.Lock()
	seen, ok := v.seen[name]
	v.mu.Unlock()
	if ok && opts.Preconditions == nil {
		opts.Preconditions = &metav1.Preconditions{UID: &seen.uid, ResourceVersion: &seen.resourceVersion}
	}
	if v.own != nil {
		v.own.Deleting(caches.OwnKey{GroupKind: schema.GroupKind{Kind: "Secret"}, NamespacedName: types.NamespacedName{Namespace: v.namespace, Name: name}})
	}
	err := v.SecretInterface.Delete(ctx, name, opts)
	if err == nil {
		v.mu.Lock()
		delete(v.seen, name)
		v.mu.Unlock()
	}
	return err
}

package conversion

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/example/myproxy-operator/internal/names"
)

// Migration rewrites every resource of a kind still stored at an older version at the storage
// version, once, then trims the CRD's status.storedVersions to it: after that, a later chart may
// stop serving the older versions. Each rewrite marks the resource (StoredVersionAnnotation),
// so that a migration restarted after a crash skips what it did. It runs on the leader, once
// per start, until every kind is done.
type Migration struct {
	Kinds []Kind
	// Reader lists resources and reads CRDs from the apiserver; Writer rewrites them.
	Reader client.Reader
	Writer client.Client
}

// Start migrates each kind, retrying with backoff until it is done or ctx ends.
func (m *Migration) Start(ctx context.Context) error {
	for _, k := range m.Kinds {
		log := logf.FromContext(ctx).WithValues("crd", k.CRD, "version", k.Storage.Version)
		backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 1 << 30, Cap: 5 * time.Minute}
		_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
			n, err := m.migrate(ctx, k)
			if err != nil {
				log.Error(err, "storage migration stopped; retrying")
				return false, nil
			}
			if n >= 0 {
				log.Info("stored resources migrated; older versions no longer stored", "rewritten", n)
			}
			return true, nil
		})
	}
	return nil
}

// migrate migrates one kind and returns how many resources it rewrote; -1 when nothing was to do.
func (m *Migration) migrate(ctx context.Context, k Kind) (int, error) {
	crd, err := m.crd(ctx, k)
	if err != nil || crd == nil {
		return -1, err
	}
	if stored, _, _ := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions"); slices.Equal(stored, []string{k.Storage.Version}) {
		return -1, nil
	}
	rewritten := 0
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(k.Storage.GroupVersion().WithKind(k.Storage.Kind + "List"))
	for more := true; more; more = list.GetContinue() != "" {
		if err := m.Reader.List(ctx, list, client.Limit(500), client.Continue(list.GetContinue())); err != nil {
			return rewritten, err
		}
		for i := range list.Items {
			done, err := m.rewrite(ctx, &list.Items[i], k.Storage.Version)
			if err != nil {
				return rewritten, err
			}
			rewritten += done
		}
	}
	// Written with the resourceVersion read: a version stored since (a newer CRD) stays.
	if crd, err = m.crd(ctx, k); err != nil || crd == nil {
		return rewritten, fmt.Errorf("the CRD's storage version changed during the migration: %v", err)
	}
	if err := unstructured.SetNestedStringSlice(crd.Object, []string{k.Storage.Version}, "status", "storedVersions"); err != nil {
		return rewritten, err
	}
	return rewritten, m.Writer.Status().Update(ctx, crd)
}

// crd reads the kind's CRD; nil when its storage version is not this chart's (the CRD installed
// is another chart's: nothing is stored at this version yet).
func (m *Migration) crd(ctx context.Context, k Kind) (*unstructured.Unstructured, error) {
	crd := crdObject(k.CRD)
	if err := m.Reader.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
		return nil, err
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		if v, _ := v.(map[string]any); v["storage"] == true && v["name"] == k.Storage.Version {
			return crd, nil
		}
	}
	return nil, nil
}

// rewrite writes obj again, marked as stored at version, unless it already is; it returns 1
// when it wrote it. A conflict reads it again and retries.
func (m *Migration) rewrite(ctx context.Context, obj *unstructured.Unstructured, version string) (int, error) {
	for obj.GetAnnotations()[names.StoredVersionAnnotation] != version {
		obj.SetAnnotations(labels.Merge(obj.GetAnnotations(), labels.Set{names.StoredVersionAnnotation: version}))
		err := m.Writer.Update(ctx, obj) // stored at the storage version, as every write is
		if err == nil {
			return 1, nil
		}
		if !apierrors.IsConflict(err) {
			return 0, client.IgnoreNotFound(err)
		}
		if err := m.Reader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return 0, client.IgnoreNotFound(err)
		}
	}
	return 0, nil
}

// NeedLeaderElection makes the migration the leader's: one writer.
func (m *Migration) NeedLeaderElection() bool { return true }

package releasestore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/example/myproxy-operator/internal/names"
)

// OwnedBy wraps a Secrets client so that one custom resource sees only its own release records
// and those of no owner (a hand-made `helm install`): a release is named after its custom
// resource, so two kinds with resources of one name in a namespace would otherwise share one
// Helm release, each upgrading it to its own chart and the first uninstall removing the other's
// objects. With this, the second resource finds no release; its install stops at the first
// record it creates, with an error naming the resource that holds the name (the Helm
// reconciler's ReleaseFailed condition), and its uninstall finds nothing to remove.
func OwnedBy(next corev1client.SecretInterface, uid types.UID) corev1client.SecretInterface {
	return &ownedBy{SecretInterface: next, uid: uid}
}

type ownedBy struct {
	corev1client.SecretInterface
	uid types.UID
}

// foreign reports whether a record is controlled by another object.
func (o *ownedBy) foreign(s *corev1.Secret) bool {
	ref := metav1.GetControllerOf(s)
	return ref != nil && ref.UID != o.uid
}

func (o *ownedBy) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	s, err := o.SecretInterface.Get(ctx, name, opts)
	if err == nil && o.foreign(s) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	return s, err
}

func (o *ownedBy) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	l, err := o.SecretInterface.List(ctx, opts)
	if err != nil {
		return l, err
	}
	kept := l.Items[:0]
	for i := range l.Items {
		if !o.foreign(&l.Items[i]) {
			kept = append(kept, l.Items[i])
		}
	}
	l.Items = kept
	return l, nil
}

func (o *ownedBy) Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error) {
	out, err := o.SecretInterface.Create(ctx, s, opts)
	if !apierrors.IsAlreadyExists(err) {
		return out, err
	}
	existing, getErr := o.SecretInterface.Get(ctx, s.Name, metav1.GetOptions{})
	if getErr != nil || !o.foreign(existing) {
		return out, err
	}
	return nil, &NameTakenError{Release: s.Labels[names.RecordNameLabel], Namespace: existing.Namespace, Holder: *metav1.GetControllerOf(existing)}
}

// NameTakenError is an install refused because another resource's release has the name.
type NameTakenError struct {
	Release, Namespace string
	Holder             metav1.OwnerReference
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("the Helm release name %q is taken in namespace %q by %s %q (%s): a release is named after its "+
		"resource, so two kinds cannot have resources of one name in a namespace; rename this one",
		e.Release, e.Namespace, e.Holder.Kind, e.Holder.Name, e.Holder.APIVersion)
}

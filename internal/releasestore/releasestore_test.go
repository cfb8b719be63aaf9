package releasestore

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// apiserver is a Secrets store that, like the apiserver, refuses an update whose
// resourceVersion is set and stale.
type apiserver struct {
	corev1client.SecretInterface
	objs map[string]*corev1.Secret
	rv   int
}

func (a *apiserver) bump(s *corev1.Secret) *corev1.Secret {
	a.rv++
	s = s.DeepCopy()
	s.ResourceVersion = strconv.Itoa(a.rv)
	a.objs[s.Name] = s
	return s.DeepCopy()
}

func (a *apiserver) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Secret, error) {
	if s, ok := a.objs[name]; ok {
		return s.DeepCopy(), nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (a *apiserver) List(_ context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	l := &corev1.SecretList{}
	for _, s := range a.objs {
		if sel.Matches(labels.Set(s.Labels)) {
			l.Items = append(l.Items, *s.DeepCopy())
		}
	}
	return l, nil
}

func (a *apiserver) Create(_ context.Context, s *corev1.Secret, _ metav1.CreateOptions) (*corev1.Secret, error) {
	if _, ok := a.objs[s.Name]; ok {
		return nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, s.Name)
	}
	return a.bump(s), nil
}

func (a *apiserver) Update(_ context.Context, s *corev1.Secret, _ metav1.UpdateOptions) (*corev1.Secret, error) {
	cur, ok := a.objs[s.Name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, s.Name)
	}
	if s.ResourceVersion != "" && s.ResourceVersion != cur.ResourceVersion {
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, s.Name, errors.New("stale"))
	}
	return a.bump(s), nil
}

func rel(status release.Status) *release.Release {
	return &release.Release{Name: "edge", Namespace: "team", Version: 1, Info: &release.Info{Status: status}}
}

// A writer that read the record, then lost the race to another writer, gets a conflict.
func TestAStaleWriterGetsAConflict(t *testing.T) {
	server := &apiserver{objs: map[string]*corev1.Secret{}}
	frozen := driver.NewSecrets(Versioned(server)) // the leader that will be frozen
	if err := frozen.Create("sh.helm.release.v1.edge.v1", rel(release.StatusPendingInstall)); err != nil {
		t.Fatal(err)
	}
	// Another replica reads the pending record and marks it failed.
	other := driver.NewSecrets(Versioned(server))
	if _, err := other.Get("sh.helm.release.v1.edge.v1"); err != nil {
		t.Fatal(err)
	}
	if err := other.Update("sh.helm.release.v1.edge.v1", rel(release.StatusFailed)); err != nil {
		t.Fatalf("the replica that read the record last could not update it: %v", err)
	}
	// The frozen leader resumes and finishes its install.
	err := frozen.Update("sh.helm.release.v1.edge.v1", rel(release.StatusDeployed))
	if !apierrors.IsConflict(errors.Unwrap(err)) && !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want a conflict", err)
	}
	got, err := other.Get("sh.helm.release.v1.edge.v1")
	if err != nil || got.Info.Status != release.StatusFailed {
		t.Errorf("record after the stale update: %v (%v), want the newer state (failed)", got.Info.Status, err)
	}
}

// Within one reconcile a record is created, then updated several times: no conflict.
func TestAWriterUpdatesWhatItWrote(t *testing.T) {
	server := &apiserver{objs: map[string]*corev1.Secret{}}
	d := driver.NewSecrets(Versioned(server))
	if err := d.Create("sh.helm.release.v1.edge.v1", rel(release.StatusPendingInstall)); err != nil {
		t.Fatal(err)
	}
	for _, s := range []release.Status{release.StatusDeployed, release.StatusSuperseded} {
		if err := d.Update("sh.helm.release.v1.edge.v1", rel(s)); err != nil {
			t.Fatalf("update to %s: %v", s, err)
		}
	}
	if _, err := d.Query(map[string]string{"name": "edge", "owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Update("sh.helm.release.v1.edge.v1", rel(release.StatusDeployed)); err != nil {
		t.Fatalf("update after a list: %v", err)
	}
}

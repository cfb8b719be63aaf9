package releasestore

import (
	"errors"
	"fmt"
	"sync"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/myproxy-operator/internal/names"
)

// RecordIndex tells whether the operator's cache of release record metadata (every Secret
// labelled owner=helm in the watched namespaces) holds a record of a release. An error means
// the cache cannot tell.
type RecordIndex interface {
	HasRecords(namespace, release string) (bool, error)
}

// Absences answers Helm's reads of the history of a release that has no record from the record
// cache instead of the apiserver.
//
// Installing a new release, Helm lists its records three times (the reconciler's get, the
// install's check that the name is free, and the history trim before the first record is
// written), each a list of the namespace's Secrets by label at the apiserver. For a release
// this process has never written or read a record of, and whose records the cache shows none
// of, the answer is "none" without a request.
//
// The cache can lag: a record written by another process (a leader that just lost its Lease,
// another shard before a handover, the helm CLI) may not be in it yet. The answer "none" is then
// stale, and is caught where the apiserver decides: Helm names a release's first record after
// revision 1, so the install's create of it is refused as existing before any object of the
// release is touched. What Helm does next is what makes a stale answer unsafe, and is changed
// here: the failed install would be uninstalled (helm-operator-plugins' failure rollback),
// removing the release another process made. Once a create is refused as existing, the driver
// refuses every further call of the action, so that uninstall fails and removes nothing; the
// release is then known, so the next reconcile reads its history from the apiserver and upgrades
// it. The same refusal protects a release created in the gap between an apiserver read and the
// create, which the stock reconciler would uninstall too.
//
// Uninstalls never use the cache (a release read as absent would leave its objects behind), nor
// does anything once a release is known: the cache answers only the question a first install
// asks.
type Absences struct {
	index RecordIndex
	mu    sync.Mutex
	known map[types.NamespacedName]struct{} // releases this process wrote, or read a record of
}

// NewAbsences answers from index.
func NewAbsences(index RecordIndex) *Absences {
	return &Absences{index: index, known: map[types.NamespacedName]struct{}{}}
}

// Forget drops what is known of a release, once its custom resource is gone.
func (a *Absences) Forget(release types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.known, release)
}

// Len is how many releases are known.
func (a *Absences) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.known)
}

func (a *Absences) know(release types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.known[release] = struct{}{}
}

// absent reports whether the cache may answer that release has no record.
func (a *Absences) absent(release types.NamespacedName) bool {
	a.mu.Lock()
	_, known := a.known[release]
	a.mu.Unlock()
	if known {
		return false
	}
	has, err := a.index.HasRecords(release.Namespace, release.Name)
	return err == nil && !has
}

// absenceAware is a release driver that serves history queries of unknown, unrecorded releases
// from Absences, and refuses every call once a create was refused as existing.
type absenceAware struct {
	driver.Driver
	absences  *Absences
	namespace string
	deleting  bool // the custom resource is being deleted: its uninstall reads the apiserver

	mu      sync.Mutex
	refused error
}

// wrapAbsences wraps next for the records of namespace; deleting is true while the custom
// resource is being deleted.
func wrapAbsences(next driver.Driver, a *Absences, namespace string, deleting bool) driver.Driver {
	if a == nil {
		return next
	}
	return &absenceAware{Driver: next, absences: a, namespace: namespace, deleting: deleting}
}

// RecordExistsError is every call of an action after its install found the release's first
// record already written.
type RecordExistsError struct {
	Namespace, Release, Key string
}

func (e *RecordExistsError) Error() string {
	return fmt.Sprintf("release %s/%s: record %s was written by another process since this install read the "+
		"release's history, so the install did not take place and the release is left as it is; the next "+
		"reconcile reads its history again", e.Namespace, e.Release, e.Key)
}

func (d *absenceAware) check() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.refused
}

func (d *absenceAware) release(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: d.namespace, Name: name}
}

// Query implements driver.Queryor.
func (d *absenceAware) Query(labels map[string]string) ([]*release.Release, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	name := labels[names.RecordNameLabel]
	if name == "" || labels[names.RecordOwnerLabel] != names.RecordOwnerHelm {
		return d.Driver.Query(labels)
	}
	if !d.deleting && d.absences.absent(d.release(name)) {
		return nil, driver.ErrReleaseNotFound
	}
	rels, err := d.Driver.Query(labels)
	if len(rels) > 0 {
		d.absences.know(d.release(name))
	}
	return rels, err
}

// Create implements driver.Creator.
func (d *absenceAware) Create(key string, rls *release.Release) error {
	if err := d.check(); err != nil {
		return err
	}
	d.absences.know(d.release(rls.Name))
	err := d.Driver.Create(key, rls)
	if errors.Is(err, driver.ErrReleaseExists) {
		d.mu.Lock()
		d.refused = &RecordExistsError{Namespace: d.namespace, Release: rls.Name, Key: key}
		d.mu.Unlock()
	}
	return err
}

// Get implements driver.Reader.
func (d *absenceAware) Get(key string) (*release.Release, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.Driver.Get(key)
}

// List implements driver.Reader.
func (d *absenceAware) List(filter func(*release.Release) bool) ([]*release.Release, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.Driver.List(filter)
}

// Update implements driver.Updator.
func (d *absenceAware) Update(key string, rls *release.Release) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.Driver.Update(key, rls)
}

// Delete implements driver.Deletor.
func (d *absenceAware) Delete(key string) (*release.Release, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.Driver.Delete(key)
}

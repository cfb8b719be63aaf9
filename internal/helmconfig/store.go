package helmconfig

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/release"
	rspb "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
)

// recordType is the type of the Secret that holds a Helm release record.
const recordType = "helm.sh/release.v1"

// Store is the release storage of one custom resource: Helm's records, as Helm's Secrets
// driver writes them (a Secret of type helm.sh/release.v1 in the custom resource's namespace,
// holding the base64 of the gzipped JSON release, with Helm's labels), read back by Helm, the
// helm CLI and earlier versions of this operator alike. What it adds to Helm's driver:
//
//   - ownership: every record it writes is controlled by the custom resource (an owner
//     reference, so the garbage collector takes the records with it), and a record controlled
//     by another object is invisible: a release is named after its custom resource, so two
//     kinds with resources of one name in a namespace would otherwise share one release, each
//     upgrading it to its own chart. The second one's install stops at its first record with a
//     NameTakenError; its uninstall finds nothing;
//   - optimistic writes: an update or delete carries the resourceVersion (a delete also the UID)
//     this store last saw the record at, so a writer acting on stale state (a leader frozen past
//     its Lease, whose fence let a request through just before the freeze) gets a conflict and
//     its action fails, instead of overwriting newer state;
//   - confinement of hooks: Helm writes a revision's record before it runs its first hook and
//     builds each hook only when it runs it, so a new record's hooks are checked (checkNew)
//     before anything is written;
//   - what the operator keeps of records across custom resources (Records): its own writes, and
//     the empty history of a new release answered without a list (fast path empty-history);
//   - the encoding of fast path record-encoding: a pooled compressor at the default level
//     instead of a new one at the best compression for every record.
type Store struct {
	secrets   corev1client.SecretInterface // of the custom resource's namespace
	namespace string
	owner     metav1.OwnerReference
	records   *Records
	// absences: the empty history of a release no record is known of is answered from the
	// record cache; never for a custom resource being deleted (a release read as absent would
	// leave its objects behind).
	absences bool
	pooled   bool
	checkNew func(*rspb.Release) error // refuses a new record (its hooks) before it is written

	mu sync.Mutex
	// seen is, by record name, the UID and resourceVersion a record was last seen at: the
	// preconditions of its update (the resourceVersion) and delete.
	seen map[string]metav1.Preconditions
	// refused: a create was refused because the record exists; every later call of the action
	// fails with it (RecordExistsError).
	refused error
}

// Name implements driver.Driver: Helm's name of the Secrets driver.
func (s *Store) Name() string { return driver.SecretsDriverName }

// foreign reports whether a record is controlled by an object other than the custom resource.
func (s *Store) foreign(secret *corev1.Secret) bool {
	ref := metav1.GetControllerOf(secret)
	return ref != nil && ref.UID != s.owner.UID
}

func (s *Store) remember(secret *corev1.Secret) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[secret.Name] = metav1.Preconditions{UID: &secret.UID, ResourceVersion: &secret.ResourceVersion}
}

func (s *Store) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

func (s *Store) release(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: s.namespace, Name: name}
}

// Get implements driver.Driver.
func (s *Store) Get(key string) (release.Releaser, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	secret, err := s.secrets.Get(context.Background(), key, metav1.GetOptions{})
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get: failed to get %q: %w", key, err)
	case err != nil || s.foreign(secret): // no record, or another resource's
		return nil, driver.ErrReleaseNotFound
	}
	s.remember(secret)
	rls, err := decode(secret.Data["release"])
	if err != nil {
		return nil, fmt.Errorf("get: failed to decode data %q: %w", key, err)
	}
	// A release read by key carries its record's labels but for those Helm's driver sets.
	rls.Labels = map[string]string{}
	maps.Copy(rls.Labels, secret.Labels)
	maps.DeleteFunc(rls.Labels, func(k, _ string) bool { return slices.Contains(driver.GetSystemLabels(), k) })
	return rls, nil
}

// List implements driver.Driver. Only Helm's list action lists every release of a namespace,
// and no action of a custom resource's release runs it.
func (s *Store) List(func(release.Releaser) bool) ([]release.Releaser, error) {
	return nil, errors.New("the store of a custom resource's release lists no other release")
}

// Query implements driver.Driver.
func (s *Store) Query(keys map[string]string) ([]release.Releaser, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	name := keys[names.RecordNameLabel]
	history := name != "" && keys[names.RecordOwnerLabel] == names.RecordOwnerHelm
	if history && s.absences && s.records.absent(s.release(name)) {
		return nil, driver.ErrReleaseNotFound
	}
	l, err := s.secrets.List(context.Background(), metav1.ListOptions{LabelSelector: labels.Set(keys).AsSelector().String()})
	if err != nil {
		return nil, fmt.Errorf("query: failed to query with labels: %w", err)
	}
	// The releases of the custom resource's records (and those of no owner), with their labels
	// as Helm's driver lists them (system labels included). Helm's driver skips a record it
	// cannot decode, and then answers with no release rather than none found.
	var rels []release.Releaser
	records := 0
	for i := range l.Items {
		item := &l.Items[i]
		if s.foreign(item) {
			continue
		}
		records++
		s.remember(item)
		if rls, err := decode(item.Data["release"]); err == nil {
			rls.Labels = item.Labels
			rels = append(rels, rls)
		}
	}
	if records == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	if history {
		s.records.know(s.release(name))
	}
	return rels, nil
}

// Create implements driver.Driver.
func (s *Store) Create(key string, rel release.Releaser) error {
	rls, secret, err := s.record("create", key, rel, "createdAt")
	if err != nil {
		return err
	}
	if err := s.checkNew(rls); err != nil {
		return err
	}
	s.records.know(s.release(rls.Name))
	err = s.write(key, func() (*corev1.Secret, error) {
		return s.secrets.Create(context.Background(), secret, metav1.CreateOptions{})
	})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create: failed to create: %w", err)
		}
		return nil
	}
	if existing, getErr := s.secrets.Get(context.Background(), key, metav1.GetOptions{}); getErr == nil && s.foreign(existing) {
		return &NameTakenError{Release: rls.Name, Namespace: s.namespace, Holder: *metav1.GetControllerOf(existing)}
	}
	// Written by another process since this action read the history (the record cache lagged,
	// or a concurrent writer): the action must not go on, nor its failure undo anything.
	s.mu.Lock()
	s.refused = &RecordExistsError{Namespace: s.namespace, Release: rls.Name, Key: key}
	s.mu.Unlock()
	return driver.ErrReleaseExists
}

// Update implements driver.Driver.
func (s *Store) Update(key string, rel release.Releaser) error {
	_, secret, err := s.record("update", key, rel, "modifiedAt")
	if err != nil {
		return err
	}
	s.mu.Lock()
	secret.ResourceVersion = ptr.Deref(s.seen[key].ResourceVersion, "")
	s.mu.Unlock()
	if err := s.write(key, func() (*corev1.Secret, error) {
		return s.secrets.Update(context.Background(), secret, metav1.UpdateOptions{})
	}); err != nil {
		return fmt.Errorf("update: failed to update: %w", err)
	}
	return nil
}

// Delete implements driver.Driver. It deletes the record only as it was read: one that changed
// since is not deleted on stale knowledge.
func (s *Store) Delete(key string) (release.Releaser, error) {
	rls, err := s.Get(key)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	seen := s.seen[key]
	s.mu.Unlock()
	s.records.deleting(*seen.UID)
	// Gone already: another process removed it too (both removing one failed install).
	if err := s.secrets.Delete(context.Background(), key, metav1.DeleteOptions{Preconditions: &seen}); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	s.mu.Lock()
	delete(s.seen, key)
	s.mu.Unlock()
	return rls, nil
}

// write sends a write of a record, telling Records that it is on the wire and, after, the
// resourceVersion it left.
func (s *Store) write(key string, send func() (*corev1.Secret, error)) error {
	k := s.release(key)
	s.records.sending(k)
	out, err := send()
	rv := ""
	if err == nil {
		s.remember(out)
		rv = out.ResourceVersion
	}
	s.records.wrote(k, rv)
	return err
}

// record returns the release rel and its record to write as verb (create or update): the
// Secret Helm's driver builds, controlled by the custom resource, whose label stamp takes the
// time of the write. It fails at once if the store refuses every write (RecordExistsError).
func (s *Store) record(verb, key string, rel release.Releaser, stamp string) (*rspb.Release, *corev1.Secret, error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	rls, ok := rel.(*rspb.Release)
	if !ok {
		return nil, nil, fmt.Errorf("unsupported release type: %T", rel)
	}
	data, err := encode(rls, s.pooled)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: failed to encode release %q: %w", verb, rls.Name, err)
	}
	lbs := labels.Merge(rls.Labels, labels.Set{stamp: strconv.FormatInt(time.Now().Unix(), 10),
		names.RecordNameLabel: rls.Name, names.RecordOwnerLabel: names.RecordOwnerHelm,
		"status": rls.Info.Status.String(), "version": strconv.Itoa(rls.Version)})
	return rls, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: lbs, OwnerReferences: []metav1.OwnerReference{s.owner}},
		Type:       recordType,
		Data:       map[string][]byte{"release": data},
	}, nil
}

var compressors = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

// encode returns base64(gzip(JSON of rls)), as Helm encodes a record: with a new compressor at
// the best compression (Helm's), or a pooled one at the default level (fast path
// record-encoding). Helm's decoder does not care for the level.
func encode(rls *rspb.Release, pooled bool) ([]byte, error) {
	b, err := json.Marshal(rls)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	var w *gzip.Writer
	if pooled {
		w = compressors.Get().(*gzip.Writer)
		defer compressors.Put(w)
		w.Reset(&buf)
	} else if w, err = gzip.NewWriterLevel(&buf, gzip.BestCompression); err != nil {
		return nil, err
	}
	// Writes into memory do not fail.
	_, _ = w.Write(b)
	_ = w.Close()
	return base64.StdEncoding.AppendEncode(nil, buf.Bytes()), nil
}

// decode reads a record as Helm does: base64, gzipped unless it predates compression, JSON.
func decode(data []byte) (*rspb.Release, error) {
	b, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(b, []byte{0x1f, 0x8b, 0x08}) {
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		if b, err = io.ReadAll(r); err != nil {
			return nil, err
		}
	}
	var rls rspb.Release
	if err := json.Unmarshal(b, &rls); err != nil {
		return nil, err
	}
	return &rls, nil
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

// RecordExistsError is every call of an action after its install found the release's first
// record already written.
type RecordExistsError struct{ Namespace, Release, Key string }

func (e *RecordExistsError) Error() string {
	return fmt.Sprintf("release %s/%s: record %s was written by another process since this install read the "+
		"release's history, so the install did not take place and the release is left as it is; the next "+
		"reconcile reads its history again", e.Namespace, e.Release, e.Key)
}

// RecordReleaseIndex is the index of the cache of release record metadata by the release a
// record is of (its name label).
const RecordReleaseIndex = "release"

// RecordIndex tells whether the cache of release record metadata (every Secret labelled
// owner=helm in the watched namespaces) holds a record of a release. An error means the cache
// cannot tell.
type RecordIndex func(namespace, release string) (bool, error)

// CacheIndex is the RecordIndex over records, the cache of release record metadata indexed by
// RecordReleaseIndex. It reads the cache only once it has synced (the record watch of every
// controller waits for that before the first reconcile).
func CacheIndex(records cache.Cache) RecordIndex {
	return func(namespace, release string) (bool, error) {
		var l metav1.PartialObjectMetadataList
		l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		if err := records.List(context.Background(), &l, client.InNamespace(namespace),
			client.MatchingFields{RecordReleaseIndex: release}); err != nil {
			return false, err
		}
		return len(l.Items) > 0, nil
	}
}

// Records is what the operator keeps of release records across custom resources:
//
//   - its own writes and deletes, so that the record watch tells them from everyone else's: a
//     record changed by anyone but the operator (deleted, edited) needs a reconcile; the
//     operator's own writes do not, or a failed install would wake itself in a tight loop. A
//     write's event may arrive before its response: until then, any event of the record is
//     taken as the write's. A delete, of a record or a release object (an uninstall's, a failed
//     install's cleanup, an upgrade's), is remembered by UID until it expires (its event
//     arrives within seconds), so the registry stays as small as the writes in flight. By UID,
//     not name: a failing install writes and deletes a record of the same name again and again,
//     and another process's delete of it must still wake this one;
//   - the releases known to have records (written or read by this process), for the empty
//     history of a new release (fast path empty-history): installing, Helm lists a release's
//     records three times (the reconciler's get, the check that the name is free, the history
//     trim), each a list at the apiserver. For a release this process has never written or read
//     a record of, and whose records the record cache (index) shows none of, the answer is
//     "none" without a request. The cache can lag: a record written by another process (a
//     leader that just lost its Lease, another shard before a handover, the helm CLI) may not
//     be in it yet. The stale answer is caught where the apiserver decides: Helm names a
//     release's first record after revision 1, so the install's create of it is refused as
//     existing before any object is touched, and the Store refuses every further call of that
//     action, so that the failed install's cleanup removes nothing. Uninstalls never use the
//     cache, nor does anything once a release is known.
type Records struct {
	index RecordIndex // nil: every history is read from the apiserver
	now   func() time.Time

	mu      sync.Mutex
	known   map[types.NamespacedName]struct{}
	writes  map[types.NamespacedName][]written // the resourceVersions recently written
	writing map[types.NamespacedName]int       // writes sent and not yet answered
	deletes map[types.UID]time.Time            // records and release objects
	pruned  time.Time
}

type written struct {
	resourceVersion string
	at              time.Time
}

// NewRecords returns an empty registry; index (nil: none) answers the histories of releases
// without records.
func NewRecords(index RecordIndex) *Records {
	return &Records{index: index, now: time.Now, known: map[types.NamespacedName]struct{}{},
		writes: map[types.NamespacedName][]written{}, writing: map[types.NamespacedName]int{},
		deletes: map[types.UID]time.Time{}}
}

// ownTTL bounds how long a delete or write is taken as own: informers deliver events within
// seconds, even under load.
const ownTTL = time.Minute

// maxWrites bounds the resourceVersions kept per record: an action writes a record a few times
// in a row (pending, then its outcome), faster than the events of those writes arrive.
const maxWrites = 8

func (r *Records) know(release types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.known[release] = struct{}{}
}

// absent reports whether the record cache may answer that release has no record.
func (r *Records) absent(release types.NamespacedName) bool {
	r.mu.Lock()
	_, known := r.known[release]
	r.mu.Unlock()
	if known || r.index == nil {
		return false
	}
	has, err := r.index(release.Namespace, release.Name)
	return err == nil && !has
}

// Forget drops what is known of a release, once its custom resource is gone.
func (r *Records) Forget(release types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.known, release)
}

// Known is how many releases are known to have records.
func (r *Records) Known() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.known)
}

func (r *Records) sending(record types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writing[record]++
}

func (r *Records) wrote(record types.NamespacedName, resourceVersion string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.writing[record]--; r.writing[record] <= 0 {
		delete(r.writing, record)
	}
	if resourceVersion == "" {
		return
	}
	r.pruneLocked()
	ws := append(r.writes[record], written{resourceVersion: resourceVersion, at: r.now()})
	r.writes[record] = ws[max(0, len(ws)-maxWrites):]
}

// deleting remembers that this process is about to delete the record or release object uid.
func (r *Records) deleting(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	r.deletes[uid] = r.now()
}

// OwnWrite reports whether a record at this resourceVersion is one of this process's writes
// (or may be: a write of it is on the wire).
func (r *Records) OwnWrite(record types.NamespacedName, resourceVersion string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writing[record] > 0 ||
		slices.ContainsFunc(r.writes[record], func(w written) bool { return w.resourceVersion == resourceVersion })
}

// OwnDelete reports whether a deleted record or release object is one this process deleted.
func (r *Records) OwnDelete(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.deletes[uid]
	return ok
}

// InFlight returns the number of own writes and deletes held (expired ones are dropped first).
func (r *Records) InFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pruneLocked()
	n := len(r.deletes) + len(r.writing)
	for _, ws := range r.writes {
		n += len(ws)
	}
	return n
}

func (r *Records) pruneLocked() {
	now := r.now()
	if now.Sub(r.pruned) < ownTTL/10 {
		return
	}
	r.pruned = now
	maps.DeleteFunc(r.deletes, func(_ types.UID, at time.Time) bool { return now.Sub(at) > ownTTL })
	maps.DeleteFunc(r.writes, func(_ types.NamespacedName, ws []written) bool { return now.Sub(ws[len(ws)-1].at) > ownTTL })
}

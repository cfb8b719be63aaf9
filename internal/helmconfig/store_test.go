package helmconfig

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v3release "helm.sh/helm/v3/pkg/release"
	v3driver "helm.sh/helm/v3/pkg/storage/driver"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasei "helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/test/harness"
)

// apiserver is a Secrets store that, like the apiserver, refuses an update or delete whose
// resourceVersion is set and stale, and counts the lists it serves.
type apiserver struct {
	corev1client.SecretInterface
	objs  map[string]*corev1.Secret
	rv    int
	lists int
}

func newAPIServer() *apiserver { return &apiserver{objs: map[string]*corev1.Secret{}} }

func (a *apiserver) bump(s *corev1.Secret) *corev1.Secret {
	a.rv++
	s = s.DeepCopy()
	s.ResourceVersion = strconv.Itoa(a.rv)
	s.UID = types.UID("uid-" + s.Name + "-" + strconv.Itoa(a.rv))
	if old, ok := a.objs[s.Name]; ok {
		s.UID = old.UID
	}
	a.objs[s.Name] = s
	return s.DeepCopy()
}

func notFound(name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (a *apiserver) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Secret, error) {
	if s, ok := a.objs[name]; ok {
		return s.DeepCopy(), nil
	}
	return nil, notFound(name)
}

func (a *apiserver) List(_ context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	a.lists++
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
		return nil, notFound(s.Name)
	}
	if s.ResourceVersion != "" && s.ResourceVersion != cur.ResourceVersion {
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, s.Name, errors.New("stale"))
	}
	return a.bump(s), nil
}

func (a *apiserver) Delete(_ context.Context, name string, opts metav1.DeleteOptions) error {
	cur, ok := a.objs[name]
	if !ok {
		return notFound(name)
	}
	if p := opts.Preconditions; p != nil && ((p.ResourceVersion != nil && *p.ResourceVersion != cur.ResourceVersion) ||
		(p.UID != nil && *p.UID != cur.UID)) {
		return apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, name, errors.New("precondition failed"))
	}
	delete(a.objs, name)
	return nil
}

// store is the Store of custom resource uid over server.
func store(server *apiserver, records *Records, uid types.UID) *Store {
	yes := true
	return &Store{secrets: server, namespace: "team", records: records, absences: true, seen: map[string]metav1.Preconditions{},
		checkNew: func(*release.Release) error { return nil },
		owner:    metav1.OwnerReference{APIVersion: "gateway.example.com/v1alpha1", Kind: "MyProxy", Name: "edge", UID: uid, Controller: &yes}}
}

func rel(name string, version int, status common.Status) *release.Release {
	return &release.Release{Name: name, Namespace: "team", Version: version, Info: &release.Info{Status: status}}
}

func key(name string, version int) string {
	return "sh.helm.release.v1." + name + ".v" + strconv.Itoa(version)
}

func history(name string) map[string]string {
	return map[string]string{names.RecordNameLabel: name, names.RecordOwnerLabel: names.RecordOwnerHelm}
}

// A custom resource sees only its own records and those of no owner (the helm CLI's): another
// resource's release of the same name is not found, and its install stops at the first record
// with an error naming the holder.
func TestAResourceSeesOnlyItsOwnRecords(t *testing.T) {
	server := newAPIServer()
	site := store(server, NewRecords(nil), "uid-site")
	if err := site.Create(key("web", 1), rel("web", 1, common.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	if err := driver.NewSecrets(server).Create(key("handmade", 1), rel("handmade", 1, common.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	proxy := store(server, NewRecords(nil), "uid-proxy")
	if _, err := proxy.Get(key("web", 1)); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("another resource's record: Get error %v, want not found", err)
	}
	if _, err := proxy.Get(key("handmade", 1)); err != nil {
		t.Errorf("a record of no owner must stay visible: %v", err)
	}
	if rels, err := proxy.Query(history("web")); !errors.Is(err, driver.ErrReleaseNotFound) || len(rels) != 0 {
		t.Errorf("another resource's history: %d records (%v), want none", len(rels), err)
	}
	err := proxy.Create(key("web", 1), rel("web", 1, common.StatusPendingInstall))
	var taken *NameTakenError
	if !errors.As(err, &taken) || !strings.Contains(err.Error(), `taken in namespace "team" by MyProxy "edge"`) {
		t.Errorf("create over another resource's record: %v", err)
	}
	if _, err := site.Get(key("web", 1)); err != nil {
		t.Errorf("the owner must see its record: %v", err)
	}
	if ref := metav1.GetControllerOf(server.objs[key("web", 1)]); ref == nil || ref.UID != "uid-site" {
		t.Errorf("the record's controller is %v, want the custom resource that wrote it", ref)
	}
}

// A writer that read the record, then lost the race to another writer, gets a conflict, for an
// update and for a delete.
func TestAStaleWriterGetsAConflict(t *testing.T) {
	server := newAPIServer()
	frozen := store(server, NewRecords(nil), "uid") // the leader that will be frozen
	if err := frozen.Create(key("edge", 1), rel("edge", 1, common.StatusPendingInstall)); err != nil {
		t.Fatal(err)
	}
	// Another replica reads the pending record and marks it failed.
	other := store(server, NewRecords(nil), "uid")
	if _, err := other.Get(key("edge", 1)); err != nil {
		t.Fatal(err)
	}
	if err := other.Update(key("edge", 1), rel("edge", 1, common.StatusFailed)); err != nil {
		t.Fatalf("the replica that read the record last could not update it: %v", err)
	}
	// The frozen leader resumes and finishes its install.
	if err := frozen.Update(key("edge", 1), rel("edge", 1, common.StatusDeployed)); !apierrors.IsConflict(errors.Unwrap(err)) {
		t.Fatalf("stale update: %v, want a conflict", err)
	}
	got, err := other.Get(key("edge", 1))
	if err != nil || got.(*release.Release).Info.Status != common.StatusFailed {
		t.Errorf("record after the stale update: %v, want the newer state (failed)", err)
	}
	if _, err := frozen.Delete(key("edge", 1)); err != nil {
		t.Errorf("delete as read just now: %v", err)
	}
}

// Within one reconcile a record is created, then updated several times: no conflict.
func TestAWriterUpdatesWhatItWrote(t *testing.T) {
	s := store(newAPIServer(), NewRecords(nil), "uid")
	if err := s.Create(key("edge", 1), rel("edge", 1, common.StatusPendingInstall)); err != nil {
		t.Fatal(err)
	}
	for _, st := range []common.Status{common.StatusDeployed, common.StatusSuperseded} {
		if err := s.Update(key("edge", 1), rel("edge", 1, st)); err != nil {
			t.Fatalf("update to %s: %v", st, err)
		}
	}
	if _, err := s.Query(history("edge")); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(key("edge", 1), rel("edge", 1, common.StatusDeployed)); err != nil {
		t.Fatalf("update after a list: %v", err)
	}
}

func chartRelease(t *testing.T) *release.Release {
	t.Helper()
	ch, err := loader.Load(harness.RepoRoot() + "/helm-charts/myproxy")
	if err != nil {
		t.Fatal(err)
	}
	return &release.Release{Name: "edge", Namespace: "team", Version: 3, Chart: ch,
		Config: map[string]any{"replicas": 2}, Manifest: "apiVersion: v1\nkind: ConfigMap\n", ApplyMethod: "ssa",
		Labels: map[string]string{"myproxy-operator.gateway.example.com/digest": "abc"},
		Info:   &release.Info{Status: common.StatusDeployed, Description: "Install complete", LastDeployed: time.Unix(1700000000, 0).UTC()}}
}

// The records are Helm's: with either encoding, the same Secret type, labels and JSON as Helm
// 4's own driver writes, read back by it, and by Helm 3's driver (the helm CLI and earlier
// versions of this operator), whose records this store reads too.
func TestRecordsAreHelmRecords(t *testing.T) {
	for _, pooled := range []bool{false, true} {
		ours, helms := newAPIServer(), newAPIServer()
		s := store(ours, NewRecords(nil), "uid")
		s.pooled = pooled
		rel := chartRelease(t)
		if err := s.Create(key("edge", 3), rel); err != nil {
			t.Fatal(err)
		}
		if err := driver.NewSecrets(helms).Create(key("edge", 3), rel); err != nil {
			t.Fatal(err)
		}
		got, want := ours.objs[key("edge", 3)], helms.objs[key("edge", 3)]
		if got.Type != want.Type {
			t.Errorf("type %q, Helm writes %q", got.Type, want.Type)
		}
		if !maps.Equal(withoutTime(got.Labels), withoutTime(want.Labels)) {
			t.Errorf("labels %v, Helm writes %v", got.Labels, want.Labels)
		}
		if !bytes.Equal(gunzip(t, got.Data["release"]), gunzip(t, want.Data["release"])) {
			t.Error("the JSON of the release differs from Helm's")
		}
		if n, m := len(got.Data["release"]), len(want.Data["release"]); n > m*105/100 {
			t.Errorf("pooled=%v: record of %d bytes, Helm's %d: more than 5%% larger", pooled, n, m)
		}
		back, err := driver.NewSecrets(ours).Get(key("edge", 3))
		if err != nil {
			t.Fatalf("Helm 4 cannot read the record: %v", err)
		}
		if b := back.(*release.Release); b.Name != rel.Name || b.Version != rel.Version || b.ApplyMethod != "ssa" ||
			b.Chart.Metadata.Version != rel.Chart.Metadata.Version || b.Labels["myproxy-operator.gateway.example.com/digest"] != "abc" {
			t.Errorf("Helm 4 read back %s v%d %s %v", b.Name, b.Version, b.ApplyMethod, b.Labels)
		}
		old, err := v3driver.NewSecrets(ours).Get(key("edge", 3))
		if err != nil || old.Name != rel.Name || old.Info.Status != v3release.StatusDeployed || old.Manifest != rel.Manifest {
			t.Errorf("Helm 3 read back %+v (%v)", old, err)
		}
	}
	// A record Helm 3 wrote (no apply method: client-side apply).
	server := newAPIServer()
	v3rel := &v3release.Release{Name: "old", Namespace: "team", Version: 2, Manifest: "kind: ConfigMap\n",
		Info: &v3release.Info{Status: v3release.StatusDeployed}, Config: map[string]any{"replicas": 3}}
	if err := v3driver.NewSecrets(server).Create(key("old", 2), v3rel); err != nil {
		t.Fatal(err)
	}
	read, err := store(server, NewRecords(nil), "uid").Get(key("old", 2))
	if err != nil {
		t.Fatal(err)
	}
	if r := read.(*release.Release); r.Version != 2 || r.Info.Status != common.StatusDeployed || r.ApplyMethod != "" ||
		r.Manifest != v3rel.Manifest || r.Config["replicas"] != float64(3) {
		t.Errorf("read a Helm 3 record as %+v", r)
	}
}

// Errors are Helm's: a taken name is driver.ErrReleaseExists (Helm's storage tells by it), a
// missing record driver.ErrReleaseNotFound, others wrap the apiserver's.
func TestErrorsAreHelms(t *testing.T) {
	for name, d := range map[string]driver.Driver{
		"ours":   store(newAPIServer(), NewRecords(nil), "uid"),
		"Helm's": driver.NewSecrets(newAPIServer()),
	} {
		r := rel("edge", 1, common.StatusPendingInstall)
		if err := d.Create("k", r); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Get("missing"); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("%s: get of a missing record: %v", name, err)
		}
		if _, err := d.Query(history("missing")); !errors.Is(err, driver.ErrReleaseNotFound) {
			t.Errorf("%s: history of a missing release: %v", name, err)
		}
		if err := d.Update("missing", r); !apierrors.IsNotFound(errors.Unwrap(err)) {
			t.Errorf("%s: update of a missing record: %v, want NotFound wrapped", name, err)
		}
		if err := d.Create("k", r); !errors.Is(err, driver.ErrReleaseExists) {
			t.Errorf("%s: second create: %v, want driver.ErrReleaseExists", name, err)
		}
	}
}

func withoutTime(l map[string]string) map[string]string {
	l = maps.Clone(l)
	delete(l, "createdAt")
	delete(l, "modifiedAt")
	return l
}

func gunzip(t *testing.T, record []byte) []byte {
	t.Helper()
	gz, err := base64.StdEncoding.DecodeString(string(record))
	if err != nil {
		t.Fatal(err)
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Concurrent writers share the pool of compressors without mixing their records.
func TestConcurrentEncodes(t *testing.T) {
	rels := []*release.Release{chartRelease(t), chartRelease(t)}
	rels[1].Manifest = "something else"
	errs := make(chan error, 64)
	for i := range 64 {
		go func() {
			b, err := encode(rels[i%2], true)
			if err == nil {
				if back, derr := decode(b); derr != nil || back.Manifest != rels[i%2].Manifest {
					err = errors.New("a record was mixed up with another")
				}
			}
			errs <- err
		}()
	}
	for range 64 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// index is a RecordIndex (its HasRecords) over what the server holds, or over nothing while stale.
type index struct {
	server *apiserver
	stale  bool
}

func (i *index) HasRecords(_, name string) (bool, error) {
	if i.stale {
		return false, nil
	}
	return slices.ContainsFunc(slices.Collect(maps.Values(i.server.objs)), func(s *corev1.Secret) bool {
		return s.Labels[names.RecordNameLabel] == name && s.Labels[names.RecordOwnerLabel] == names.RecordOwnerHelm
	}), nil
}

// Served from an index in step with the apiserver, every history read gives what the apiserver
// gives, and only the reads of releases without a record are spared.
func TestAbsencesAnswerAsTheAPIServerDoes(t *testing.T) {
	server := newAPIServer()
	records := NewRecords((&index{server: server}).HasRecords)
	seed := store(server, NewRecords(nil), "uid")
	for _, r := range []*release.Release{rel("edge", 1, common.StatusSuperseded), rel("edge", 2, common.StatusDeployed), rel("other", 1, common.StatusDeployed)} {
		if err := seed.Create(key(r.Name, r.Version), r); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []map[string]string{
		history("edge"), history("other"), history("new"),
		{names.RecordNameLabel: "edge", names.RecordOwnerLabel: names.RecordOwnerHelm, "status": "deployed"},
		{names.RecordNameLabel: "new", names.RecordOwnerLabel: names.RecordOwnerHelm, "status": "deployed"},
		{names.RecordOwnerLabel: names.RecordOwnerHelm},
	} {
		before := server.lists
		want, wantErr := store(server, NewRecords(nil), "uid").Query(q)
		plainLists := server.lists - before
		before = server.lists
		got, gotErr := store(server, records, "uid").Query(q)
		fastLists := server.lists - before
		if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(versions(got), versions(want)) {
			t.Errorf("query %v: %v (%v), the apiserver's %v (%v)", q, versions(got), gotErr, versions(want), wantErr)
		}
		spared := len(want) == 0 && q[names.RecordNameLabel] != ""
		if spared && fastLists != 0 {
			t.Errorf("query %v of a release without records listed the apiserver %d times", q, fastLists)
		}
		if !spared && fastLists != plainLists {
			t.Errorf("query %v: %d lists, the plain store %d", q, fastLists, plainLists)
		}
	}
}

func versions(rels []releasei.Releaser) []int {
	var v []int
	for _, r := range rels {
		v = append(v, r.(*release.Release).Version)
	}
	slices.Sort(v)
	return v
}

// A record this process wrote is read from the apiserver even before the index shows it, and an
// uninstall (a custom resource being deleted) always reads the apiserver.
func TestOwnWritesAndUninstallsReadTheAPIServer(t *testing.T) {
	server := newAPIServer()
	records := NewRecords((&index{server: server, stale: true}).HasRecords)
	if err := store(server, records, "uid").Create(key("edge", 1), rel("edge", 1, common.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	if got, err := store(server, records, "uid").Query(history("edge")); err != nil || len(got) != 1 {
		t.Errorf("history of a release written here, index behind: %d records (%v), want 1", len(got), err)
	}
	// Written elsewhere and not in the index: only an uninstall sees it.
	if err := driver.NewSecrets(server).Create(key("gone", 1), rel("gone", 1, common.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	uninstalling := store(server, records, "uid")
	uninstalling.absences = false
	if got, err := uninstalling.Query(history("gone")); err != nil || len(got) != 1 {
		t.Errorf("history read by an uninstall: %d records (%v), want 1", len(got), err)
	}
	if records.Known() != 2 {
		t.Errorf("%d releases known, want the two written or read", records.Known())
	}
	records.Forget(types.NamespacedName{Namespace: "team", Name: "edge"})
	records.Forget(types.NamespacedName{Namespace: "team", Name: "gone"})
	if records.Known() != 0 {
		t.Errorf("%d releases known after forgetting both", records.Known())
	}
}

// An index behind the apiserver answers "no record" for a release another process has made: the
// install's create of revision 1 is refused as existing, every later call of that action is
// refused (so the failed install's uninstall removes nothing), and the next action reads the
// apiserver.
func TestAStaleAbsenceRefusesTheAction(t *testing.T) {
	server := newAPIServer()
	if err := driver.NewSecrets(server).Create(key("edge", 1), rel("edge", 1, common.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	before := server.objs[key("edge", 1)].DeepCopy()
	records := NewRecords((&index{server: server, stale: true}).HasRecords)
	s := store(server, records, "uid")
	if _, err := s.Query(history("edge")); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("stale index: %v, want the (stale) answer that the release has no record", err)
	}
	if err := s.Create(key("edge", 1), rel("edge", 1, common.StatusPendingInstall)); !errors.Is(err, driver.ErrReleaseExists) {
		t.Fatalf("create over the existing record: %v, want ErrReleaseExists", err)
	}
	var refused *RecordExistsError
	if _, err := s.Query(history("edge")); !errors.As(err, &refused) {
		t.Errorf("history read after the refused create: %v, want a RecordExistsError", err)
	}
	if _, err := s.Delete(key("edge", 1)); !errors.As(err, &refused) {
		t.Errorf("delete after the refused create: %v, want a RecordExistsError", err)
	}
	if errors.Is(refused, driver.ErrReleaseNotFound) {
		t.Error("the refusal reads as release-not-found, which a failed install's uninstall ignores")
	}
	if after := server.objs[key("edge", 1)]; !reflect.DeepEqual(after, before) {
		t.Error("the existing record changed")
	}
	if got, err := store(server, records, "uid").Query(history("edge")); err != nil || len(got) != 1 {
		t.Errorf("the next action's history read: %d records (%v), want the existing one", len(got), err)
	}
}

// The registry of own writes: an event arriving before a write's answer is the write's, exactly
// the resourceVersions written are own, and deletes are recognised until they expire.
func TestOwnWritesAndDeletes(t *testing.T) {
	now := time.Unix(1000, 0)
	r := NewRecords(nil)
	r.now = func() time.Time { return now }
	rec := types.NamespacedName{Namespace: "n", Name: "sh.helm.release.v1.a.v1"}
	r.sending(rec)
	if !r.OwnWrite(rec, "10") {
		t.Error("an event arriving before the write's answer is the write's")
	}
	r.wrote(rec, "10")
	r.sending(rec)
	r.wrote(rec, "12")
	r.sending(rec)
	r.wrote(rec, "") // failed
	if !r.OwnWrite(rec, "10") || !r.OwnWrite(rec, "12") || r.OwnWrite(rec, "11") {
		t.Error("exactly the resourceVersions written are own, the earlier ones too (their events come later)")
	}
	const other, again = types.UID("b-1"), types.UID("b-2") // one record's name, made twice
	if r.OwnDelete(other) {
		t.Fatal("a record never deleted is not an own delete")
	}
	r.deleting(other)
	if first, second := r.OwnDelete(other), r.OwnDelete(other); !first || !second {
		t.Error("own delete not recognised (by every handler that asks)")
	}
	if r.OwnDelete(again) {
		t.Error("another process's delete of a record made again under the same name is taken as own")
	}
	now = now.Add(2 * ownTTL)
	r.deleting("c")
	if r.OwnDelete(other) || r.InFlight() != 1 {
		t.Errorf("entries whose events never came must expire (%d left)", r.InFlight())
	}
}

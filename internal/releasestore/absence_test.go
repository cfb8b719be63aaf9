package releasestore

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/myproxy-operator/internal/names"
)

// countingServer counts the lists it serves.
type countingServer struct {
	*apiserver
	lists int
}

func (c *countingServer) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	c.lists++
	return c.apiserver.List(ctx, opts)
}

// index is a RecordIndex over what the server holds, or over nothing while stale.
type index struct {
	server *apiserver
	stale  bool
}

func (i *index) HasRecords(namespace, name string) (bool, error) {
	if i.stale {
		return false, nil
	}
	for _, s := range i.server.objs {
		if s.Labels[names.RecordNameLabel] == name && s.Labels[names.RecordOwnerLabel] == names.RecordOwnerHelm {
			return true, nil
		}
	}
	return false, nil
}

func history(name string) map[string]string {
	return map[string]string{names.RecordNameLabel: name, names.RecordOwnerLabel: names.RecordOwnerHelm}
}

func named(name string, version int) *release.Release {
	r := rel(release.StatusDeployed)
	r.Name, r.Version = name, version
	return r
}

// Served from an index in step with the apiserver, every history read gives what the apiserver
// gives, and only the reads of releases without a record are spared.
func TestAbsencesAnswerAsTheAPIServerDoes(t *testing.T) {
	server := &countingServer{apiserver: &apiserver{objs: map[string]*corev1.Secret{}}}
	absences := NewAbsences(&index{server: server.apiserver})
	seed := driver.NewSecrets(server)
	for _, r := range []*release.Release{named("edge", 1), named("edge", 2), named("other", 1)} {
		if err := seed.Create("sh.helm.release.v1."+r.Name+".v"+strconv.Itoa(r.Version), r); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []map[string]string{
		history("edge"), history("other"), history("new"),
		{names.RecordNameLabel: "edge", names.RecordOwnerLabel: names.RecordOwnerHelm, "status": "deployed"},
		{names.RecordNameLabel: "new", names.RecordOwnerLabel: names.RecordOwnerHelm, "status": "deployed"},
		{names.RecordOwnerLabel: names.RecordOwnerHelm},
	} {
		fast := wrapAbsences(driver.NewSecrets(server), absences, "team", false)
		before := server.lists
		want, wantErr := driver.NewSecrets(server).Query(q)
		plainLists := server.lists - before
		before = server.lists
		got, gotErr := fast.Query(q)
		fastLists := server.lists - before
		if !errors.Is(gotErr, driver.ErrReleaseNotFound) || !errors.Is(wantErr, driver.ErrReleaseNotFound) {
			if (gotErr == nil) != (wantErr == nil) {
				t.Errorf("query %v: error %v, the apiserver's %v", q, gotErr, wantErr)
			}
		}
		if !reflect.DeepEqual(versions(got), versions(want)) {
			t.Errorf("query %v: revisions %v, the apiserver's %v", q, versions(got), versions(want))
		}
		spared := len(want) == 0 && q[names.RecordNameLabel] != ""
		if spared && fastLists != 0 {
			t.Errorf("query %v of a release without records listed the apiserver %d times", q, fastLists)
		}
		if !spared && fastLists != plainLists {
			t.Errorf("query %v: %d lists, the plain driver %d", q, fastLists, plainLists)
		}
	}
}

func versions(rels []*release.Release) []int {
	var v []int
	for _, r := range rels {
		v = append(v, r.Version)
	}
	slices.Sort(v)
	return v
}

// A record this process wrote is read from the apiserver even before the index shows it, and an
// uninstall always reads the apiserver.
func TestOwnWritesAndUninstallsReadTheAPIServer(t *testing.T) {
	server := &countingServer{apiserver: &apiserver{objs: map[string]*corev1.Secret{}}}
	lagging := &index{server: server.apiserver, stale: true}
	absences := NewAbsences(lagging)
	d := wrapAbsences(driver.NewSecrets(server), absences, "team", false)
	if err := d.Create("sh.helm.release.v1.edge.v1", named("edge", 1)); err != nil {
		t.Fatal(err)
	}
	next := wrapAbsences(driver.NewSecrets(server), absences, "team", false)
	if got, err := next.Query(history("edge")); err != nil || len(got) != 1 {
		t.Errorf("history of a release written here, index behind: %d records (%v), want 1", len(got), err)
	}

	// Written elsewhere and not in the index: only an uninstall sees it.
	if err := driver.NewSecrets(server).Create("sh.helm.release.v1.gone.v1", named("gone", 1)); err != nil {
		t.Fatal(err)
	}
	uninstalling := wrapAbsences(driver.NewSecrets(server), absences, "team", true)
	if got, err := uninstalling.Query(history("gone")); err != nil || len(got) != 1 {
		t.Errorf("history read by an uninstall: %d records (%v), want 1", len(got), err)
	}
	if absences.Len() != 2 {
		t.Errorf("%d releases known, want the two written or read", absences.Len())
	}
	absences.Forget(types.NamespacedName{Namespace: "team", Name: "edge"})
	absences.Forget(types.NamespacedName{Namespace: "team", Name: "gone"})
	if absences.Len() != 0 {
		t.Errorf("%d releases known after forgetting both", absences.Len())
	}
}

// An index behind the apiserver answers "no record" for a release another process has made: the
// install's create of revision 1 is refused as existing, every later call of that action is
// refused (so the failed install's uninstall removes nothing), and the next action reads the
// apiserver.
func TestAStaleAbsenceRefusesTheAction(t *testing.T) {
	server := &countingServer{apiserver: &apiserver{objs: map[string]*corev1.Secret{}}}
	if err := driver.NewSecrets(server).Create("sh.helm.release.v1.edge.v1", named("edge", 1)); err != nil {
		t.Fatal(err)
	}
	before := server.objs["sh.helm.release.v1.edge.v1"].DeepCopy()
	absences := NewAbsences(&index{server: server.apiserver, stale: true})
	d := wrapAbsences(driver.NewSecrets(server), absences, "team", false)

	if _, err := d.Query(history("edge")); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Fatalf("stale index: %v, want the (stale) answer that the release has no record", err)
	}
	if err := d.Create("sh.helm.release.v1.edge.v1", named("edge", 1)); !errors.Is(err, driver.ErrReleaseExists) {
		t.Fatalf("create over the existing record: %v, want ErrReleaseExists", err)
	}
	var refused *RecordExistsError
	if _, err := d.Query(history("edge")); !errors.As(err, &refused) {
		t.Errorf("history read after the refused create: %v, want a RecordExistsError", err)
	}
	if _, err := d.Delete("sh.helm.release.v1.edge.v1"); !errors.As(err, &refused) {
		t.Errorf("delete after the refused create: %v, want a RecordExistsError", err)
	}
	if errors.Is(refused, driver.ErrReleaseNotFound) {
		t.Error("the refusal reads as release-not-found, which a failed install's uninstall ignores")
	}
	if after := server.objs["sh.helm.release.v1.edge.v1"]; !reflect.DeepEqual(after, before) {
		t.Error("the existing record changed")
	}

	next := wrapAbsences(driver.NewSecrets(server), absences, "team", false)
	if got, err := next.Query(history("edge")); err != nil || len(got) != 1 {
		t.Errorf("the next action's history read: %d records (%v), want the existing one", len(got), err)
	}
}

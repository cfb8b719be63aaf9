package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/test/harness"
)

// staleIndex is a record cache that has not seen a release yet.
func staleIndex(string, string) (bool, error) { return false, nil }

// The record cache answers "no record" only for releases it shows none of; when it lags behind
// another process's install, the action client, which decides to install, must leave that
// release as it is: the install is refused at its first record, its failure uninstall removes
// nothing, and the next reconcile reads the apiserver and finds the release.
func TestAStaleRecordCacheLeavesTheReleaseAlone(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	cr, err := harness.GetMyProxy(ctx, c, ns, "edge")
	if err != nil {
		t.Fatal(err)
	}
	chrt, err := loader.Load(filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"))
	if err != nil {
		t.Fatal(err)
	}
	// begin begins a reconcile of the MyProxy by an action client whose process keeps records.
	begin := func(records *helmconfig.Records) helmclient.ActionInterface {
		t.Helper()
		configs, err := helmconfig.New(cfg, c.RESTMapper(), helmconfig.Settings{Managed: names.ManagedValue, Records: records})
		if err != nil {
			t.Fatal(err)
		}
		ac := actionclient.New(actionclient.Options{Chart: chrt, Configs: configs, Recorder: record.NewFakeRecorder(100),
			Translate: func(_ context.Context, obj *unstructured.Unstructured) (map[string]any, error) {
				spec, _ := obj.Object["spec"].(map[string]any)
				return spec, nil
			}})
		r, err := ac.ActionClientFor(ctx, cr.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Another process installs the release.
	if _, err := begin(helmconfig.NewRecords(nil)).Install("edge", ns, nil, nil); err != nil {
		t.Fatal(err)
	}
	records := releaseRecords(ctx, t, c, ns, "edge")
	deployment := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "edge"}, deployment); err != nil {
		t.Fatal(err)
	}

	// This process's record cache has not seen it.
	known := helmconfig.NewRecords(staleIndex)
	stale := begin(known)
	if _, err := stale.Get("edge"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("get through the stale cache: %v, want its (stale) release-not-found", err)
	}
	_, err = stale.Install("edge", ns, nil, nil)
	if !strings.Contains(err.Error(), "uninstall failed") ||
		!strings.Contains(err.Error(), (&helmconfig.RecordExistsError{Namespace: ns, Release: "edge", Key: "sh.helm.release.v1.edge.v1"}).Error()) {
		t.Fatalf("install over the unseen release: %v, want its failure uninstall refused by a RecordExistsError", err)
	}
	t.Logf("install refused: %v", err)

	after := releaseRecords(ctx, t, c, ns, "edge")
	if len(after) != len(records) || after[0].UID != records[0].UID || after[0].ResourceVersion != records[0].ResourceVersion {
		t.Errorf("the release's records changed: %d records, was %d", len(after), len(records))
	}
	var again appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(deployment), &again); err != nil || again.UID != deployment.UID ||
		again.ResourceVersion != deployment.ResourceVersion {
		t.Errorf("the release's Deployment was touched (%v)", err)
	}

	// The next reconcile reads the apiserver, with the cache as stale as before.
	rel, err := begin(known).Get("edge")
	if err != nil || rel.Version != 1 {
		t.Fatalf("the next reconcile's get: %v, want revision 1 of the existing release", err)
	}
}

// A new MyProxy is installed without one list of release records at the apiserver: the record
// cache shows it has none. Its upgrade reads the apiserver (the release is known), which also
// shows that the audit log sees the lists it counts.
func TestANewReleaseIsInstalledWithoutListingItsRecords(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", timeout)
	if n := recordLists(t, ns); n != 0 {
		t.Errorf("the install listed the release's records %d times at the apiserver, want 0", n)
	}
	patchSpec(t, c, ns, "edge", `{"replicas": 2}`)
	waitDeployment(t, c, ns, "edge", "upgraded", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 2 })
	harness.Eventually(t, timeout, "the upgrade's lists in the audit log", func(context.Context) (bool, string) {
		n := recordLists(t, ns)
		return n > 0, fmt.Sprintf("%d lists", n)
	})
}

// recordLists counts the operator's lists of Secrets in ns in the audit log.
func recordLists(t *testing.T, ns string) int {
	t.Helper()
	f, err := os.Open(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			Verb, Stage string
			User        struct{ Username string }
			ObjectRef   *struct{ Resource, Namespace string } `json:"objectRef"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		if e.Stage == "ResponseComplete" && e.Verb == "list" && e.User.Username == operatorUser &&
			e.ObjectRef != nil && e.ObjectRef.Resource == "secrets" && e.ObjectRef.Namespace == ns {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

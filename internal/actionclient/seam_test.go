package actionclient

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	v3action "helm.sh/helm/v3/pkg/action"
	v3chartutil "helm.sh/helm/v3/pkg/chartutil"
	v3release "helm.sh/helm/v3/pkg/release"
	v3driver "helm.sh/helm/v3/pkg/storage/driver"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Every field of a release that the plugins' reconciler reads (name, revision, status, notes and
// manifest, for its status and its decision; the values and the chart for its own use) and that
// this operator's post hooks read (the manifest, the namespace) survives the trip to Helm 3's
// types and back; what stays behind (hooks, the chart's files, the apply method) is what
// neither reads.
func TestReleasesCrossTheSeamWithEveryFieldTheyAreReadFor(t *testing.T) {
	at := time.Unix(1700000000, 0).UTC()
	rel := &release.Release{Name: "p", Namespace: "ns", Version: 3, Manifest: "kind: ConfigMap\n",
		Config: map[string]any{"replicas": float64(2), "tls": map[string]any{"secretName": "edge"}},
		Labels: map[string]string{DigestLabel: "abc", RevisionLabel: "3"},
		Chart: &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "myproxy", Version: "0.2.0", AppVersion: "1.27",
			Description: "d", Type: "application", KubeVersion: ">=1.30.0"}},
		Info: &release.Info{FirstDeployed: at, LastDeployed: at.Add(time.Minute), Deleted: at.Add(time.Hour),
			Description: "Upgrade complete", Status: common.StatusDeployed, Notes: "visit http://p\n"},
		Hooks: []*release.Hook{{Name: "h", Manifest: "kind: Job\n"}}, ApplyMethod: "ssa"}
	old := toV3(rel)
	if old.Name != "p" || old.Version != 3 || old.Info.Status != v3release.StatusDeployed || old.Info.Notes != rel.Info.Notes ||
		old.Manifest != rel.Manifest || old.Chart.Metadata.Version != "0.2.0" {
		t.Errorf("the reconciler reads %+v", old)
	}
	back := fromV3(old)
	rel.Hooks, rel.ApplyMethod = nil, "" // left behind
	if !reflect.DeepEqual(back, rel) {
		t.Errorf("round trip:\n got %+v %+v %+v\nwant %+v %+v %+v", back, back.Info, back.Chart.Metadata, rel, rel.Info, rel.Chart.Metadata)
	}
	if toV3(nil) != nil || fromV3(nil) != nil {
		t.Error("a missing release crossed as one")
	}
}

// The chart the reconciler holds names the kind's chart and holds nothing to coalesce: the
// values it hands over are the translator's, as they were.
func TestTheReconcilersChartCoalescesNothing(t *testing.T) {
	c := testChart(configMap)
	c.Values["receivers"] = map[string]any{"jaeger": "14250", "otlp": "4317"}
	held := ReconcilerChart(c)
	if held.Metadata.Name != "myproxy" || held.Metadata.Version != "0.1.0" || len(held.Templates) != 0 || held.Values != nil {
		t.Errorf("the reconciler holds %+v", held)
	}
	vals := map[string]any{"receivers": map[string]any{"jaeger": nil}}
	coalesced, err := v3chartutil.CoalesceValues(&held, vals) // what the reconciler does
	if err != nil {
		t.Fatal(err)
	}
	if r := coalesced["receivers"].(map[string]any); len(r) != 1 || r["jaeger"] != nil {
		t.Errorf("the reconciler's coalescing made %v of the values: the null must reach Helm 4", coalesced)
	}
}

// Helm 4's "not found" is Helm 3's to the reconciler; other errors pass as they are.
func TestNotFoundCrossesAsHelm3s(t *testing.T) {
	if err := v3err(driver.ErrReleaseNotFound); !errors.Is(err, v3driver.ErrReleaseNotFound) {
		t.Errorf("%v is not Helm 3's not found", err)
	}
	boom := errors.New("boom")
	if err := v3err(boom); err != boom {
		t.Errorf("%v changed", err)
	}
}

// The reconciler's options reach the action (its annotations), and its dry run is the check.
func TestTheReconcilersOptionsAreTheActionsOptions(t *testing.T) {
	h := newHelm(t)
	k := newKind(t, h, testChart(configMap), Options{})
	ac, err := k.c.ActionClientFor(context.Background(), cr(map[string]any{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Get("p"); !errors.Is(err, v3driver.ErrReleaseNotFound) {
		t.Fatalf("get of no release: %v", err)
	}
	rel, err := ac.Install("p", "ns", nil, nil, func(i *v3action.Install) error { i.Description = "by annotation"; return nil })
	if err != nil || rel.Info.Description != "by annotation" {
		t.Fatalf("install: %v, description %q", err, rel.Info.Description)
	}
	ac, err = k.c.ActionClientFor(context.Background(), cr(map[string]any{"replicas": 5}))
	if err != nil {
		t.Fatal(err)
	}
	checked, err := ac.Upgrade("p", "ns", nil, nil, func(u *v3action.Upgrade) error { u.DryRun = true; return nil })
	if err != nil || !strings.Contains(checked.Manifest, `"5"`) || h.last(t).Version != 1 {
		t.Fatalf("the check: %v, manifest %q, stored revision %d", err, checked.Manifest, h.last(t).Version)
	}
	if _, err := ac.Upgrade("p", "ns", nil, nil, func(u *v3action.Upgrade) error { u.Description = "again"; return nil }); err != nil ||
		h.last(t).Info.Description != "again" {
		t.Errorf("upgrade: %v, description %q", err, h.last(t).Info.Description)
	}
}

// The values the reconciler coalesces and hands over are those the reconcile's client built
// when it began, for the same resource at the same version: the translator runs once per
// reconcile; no pointer is compared, and a call out of order builds the values again.
func TestTheReconcilerTranslatesWithTheValuesTheClientBuilt(t *testing.T) {
	translated := 0
	k := newKind(t, newHelm(t), testChart(configMap), Options{Overrides: map[string]string{"image": "nginx"},
		Translate: func(_ context.Context, obj *unstructured.Unstructured) (map[string]any, error) {
			translated++
			spec, _ := obj.Object["spec"].(map[string]any)
			return spec, nil
		}})
	obj := cr(map[string]any{"replicas": 2})
	if _, err := k.c.ActionClientFor(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	vals, err := k.c.Translator().Translate(context.Background(), obj)
	if err != nil || vals["image"] != "nginx" || vals["replicas"] != int64(2) || translated != 1 {
		t.Errorf("values %v (%v), translated %d times; want the spec with the override, once", vals, err, translated)
	}
	if _, ok := obj.Object["spec"].(map[string]any)["image"]; ok {
		t.Error("the override was written into the custom resource itself")
	}
	// Asked again (the reconciler's order changed), it builds them again, the same.
	if again, err := k.c.Translator().Translate(context.Background(), obj); err != nil || again["image"] != "nginx" || translated != 2 {
		t.Errorf("asked twice: values %v (%v), translated %d times; want them built again", again, err, translated)
	}
	// Of another version of the resource, it builds the values of that version.
	if _, err := k.c.ActionClientFor(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	changed := obj.DeepCopy()
	changed.SetResourceVersion("2")
	changed.Object["spec"] = map[string]any{"replicas": int64(3)}
	if vals, err := k.c.Translator().Translate(context.Background(), changed); err != nil || vals["replicas"] != int64(3) {
		t.Errorf("another version: values %v (%v)", vals, err)
	}
}

package actionclient

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/shard"
)

// An install labels the release with its digests, and the next reconcile of the same chart and
// values is answered without a dry run, in this process and the next; a change of values,
// templates or chart defaults renders.
func TestDigestSkipsTheDryRunOnlyForTheSameChartAndValues(t *testing.T) {
	h := newHelm(t)
	chrt := testChart(configMap)
	vals := map[string]any{"replicas": 2}
	k := newKind(t, h, chrt, digested())
	if _, _, err := k.reconcileAs(vals); err != nil {
		t.Fatal(err)
	}
	if d := h.last(t).Labels[DigestLabel]; len(d) != 32 {
		t.Fatalf("install labelled the release %q=%q, want a 32-character digest", DigestLabel, d)
	}
	for name, k := range map[string]*kind{"same process": k, "new process": newKind(t, h, chrt, digested())} {
		before := k.checks()
		r, rel, err := k.reconcileAs(map[string]any{"replicas": 2})
		if err != nil {
			t.Fatal(err)
		}
		if k.checks() != before || r.decision.Step != Unchanged || rel.Version != 1 {
			t.Errorf("%s, same chart and values: %d dry runs, step %s, revision %d; want none, unchanged, 1",
				name, k.checks()-before, r.decision.Step, rel.Version)
		}
	}
	changes := map[string]func() (*chart.Chart, map[string]any){
		"values":   func() (*chart.Chart, map[string]any) { return chrt, map[string]any{"replicas": 3} },
		"template": func() (*chart.Chart, map[string]any) { return testChart(configMap + "  more: x\n"), vals },
		"chart defaults": func() (*chart.Chart, map[string]any) {
			c := testChart(configMap)
			c.Values["x"] = 1
			return c, vals
		},
	}
	for what, change := range changes {
		c, v := change()
		k := newKind(t, h, c, digested())
		r := k.begin(cr(v))
		if k.checks() != 1 {
			t.Errorf("changed %s: %d dry runs, want 1", what, k.checks())
		}
		if what != "chart defaults" && r.decision.Step != Upgrade {
			t.Errorf("changed %s: step %s, want upgrade", what, r.decision.Step)
		}
	}
}

// The managed label value (the shard) is stamped on every rendered object: a release installed
// by one shard is not what another shard's rendering of the same chart and values is.
func TestDigestSeesTheStamp(t *testing.T) {
	h := newHelm(t)
	chrt, vals := testChart(configMap), map[string]any{}
	a := Options{Digests: NewDigests(nil, crGVK, nil, "a")}
	if _, _, err := newKind(t, h, chrt, a).reconcileAs(vals); err != nil {
		t.Fatal(err)
	}
	k := newKind(t, h, chrt, Options{Digests: NewDigests(nil, crGVK, nil, "a")})
	if k.begin(cr(vals)); k.checks() != 0 {
		t.Errorf("same shard: %d dry runs, want 0", k.checks())
	}
	k = newKind(t, h, chrt, Options{Digests: NewDigests(nil, crGVK, nil, "b")})
	if k.begin(cr(vals)); k.checks() != 1 {
		t.Errorf("another shard: %d dry runs, want 1", k.checks())
	}
}

// Values that render the deployed manifest but are not the record's (a value a new version of
// the kind renamed, or one the chart does not render) are recorded by an upgrade under its own
// name, when the reconciler asks for the drift correction; the values the record holds then
// change nothing, with digests or without.
func TestValuesThatRenderTheSameObjectsAreRecorded(t *testing.T) {
	for _, o := range []Options{{}, digested()} {
		h := newHelm(t)
		chrt := testChart(configMap)
		if _, _, err := newKind(t, h, chrt, o).reconcileAs(map[string]any{"replicas": 2, "unused": "a"}); err != nil {
			t.Fatal(err)
		}
		renamed := map[string]any{"replicas": 2, "renamed": "a"}
		k := newKind(t, h, chrt, o)
		r, _, err := k.reconcileAs(renamed)
		if err != nil {
			t.Fatal(err)
		}
		if r.decision.Step != RecordValues {
			t.Errorf("digests %v: step %s, want %s", o.Digests != nil, r.decision.Step, RecordValues)
		}
		rel := h.last(t)
		if rel.Version != 2 || rel.Info.Status != "deployed" || valuesDiffer(rel.Config, renamed) {
			t.Errorf("digests %v: the record is revision %d (%s) of values %v, want revision 2, deployed, of %v",
				o.Digests != nil, rel.Version, rel.Info.Status, rel.Config, renamed)
		}
		var ev []string
		for len(k.events.Events) > 0 {
			ev = append(ev, <-k.events.Events)
		}
		if !slices.ContainsFunc(ev, func(e string) bool { return strings.Contains(e, names.ReasonValuesRecorded) }) {
			t.Errorf("digests %v: Events %q, want %s", o.Digests != nil, ev, names.ReasonValuesRecorded)
		}
		if r, _, err := newKind(t, h, chrt, o).reconcileAs(renamed); err != nil || r.decision.Step != Unchanged || h.last(t).Version != 2 {
			t.Errorf("digests %v, values recorded: step %s, revision %d (%v), want %s at revision 2",
				o.Digests != nil, r.decision.Step, h.last(t).Version, err, Unchanged)
		}
	}
}

// A release that is not deployed is rendered whatever its digests, and upgraded (a retry).
func TestDigestNeverSkipsForAReleaseThatIsNotDeployed(t *testing.T) {
	h := newHelm(t)
	chrt, vals := testChart(configMap), map[string]any{"unused": "a"}
	h.failedUpgrade(t, chrt, digested(), vals)
	k := newKind(t, h, chrt, digested())
	r := k.begin(cr(vals))
	if k.checks() != 1 || r.decision.Step != Upgrade {
		t.Errorf("failed release: %d dry runs, step %s; want 1, upgrade", k.checks(), r.decision.Step)
	}
}

// The release is read once when the reconcile begins, every read of the reconciler is answered
// from it and writes nothing, and an upgrade records a new digest; a read after it reads afresh.
func TestUpgradeRecordsTheNewDigestAndGetIsReadOnceUntilAChange(t *testing.T) {
	h := newHelm(t)
	chrt := testChart(configMap)
	if _, _, err := newKind(t, h, chrt, digested()).reconcileAs(map[string]any{"replicas": 1}); err != nil {
		t.Fatal(err)
	}
	first := h.last(t).Labels[DigestLabel]
	k := newKind(t, h, chrt, digested())
	q0, w0 := h.counts()
	r := k.begin(cr(map[string]any{"replicas": 2}))
	for range 3 {
		if _, err := r.get(crKey.Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.check(); err != nil {
		t.Fatal(err)
	}
	q1, w1 := h.counts()
	// The reconcile's one read, and the dry run's own reads of the history (last, deployed).
	if q1-q0 > 3 || w1 != w0 {
		t.Errorf("the reconcile began, the reconciler read three times and checked: %d history reads, %d writes; "+
			"want the one read and the dry run's, no write", q1-q0, w1-w0)
	}
	if _, err := r.upgrade(actionOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := h.last(t).Labels[DigestLabel]; d == "" || d == first {
		t.Errorf("upgrade labelled %q, want a new digest (was %q)", d, first)
	}
	rel, _ := r.get(crKey.Name)
	if q2, _ := h.counts(); q2 == q1 || rel.Version != 2 {
		t.Errorf("read after an upgrade: revision %d, %d history reads; want a fresh read of revision 2", rel.Version, q2-q1)
	}
}

// Helm copies a release's labels into the next revision, also into one made by hand: those
// labels describe another rendering, and the check must run, in this process and the next.
func TestLabelsCopiedIntoAHandMadeRevisionAreNotTrusted(t *testing.T) {
	h := newHelm(t)
	chrt, vals := testChart(configMap), map[string]any{}
	k := newKind(t, h, chrt, digested())
	if _, _, err := k.reconcileAs(vals); err != nil {
		t.Fatal(err)
	}
	installed := h.last(t)
	if got := installed.Labels[RevisionLabel]; got != "1" {
		t.Fatalf("install labelled %s=%q, want 1", RevisionLabel, got)
	}
	handMade := *installed // `helm upgrade --reuse-values --set ...`: revision 2, labels of revision 1
	handMade.Version, handMade.Manifest = 2, "edited by hand"
	h.store(t, &handMade)
	for name, k := range map[string]*kind{"same process": k, "new process": newKind(t, h, chrt, digested())} {
		before := k.checks()
		if r := k.begin(cr(vals)); k.checks() != before+1 || r.decision.Step != Upgrade {
			t.Errorf("%s: %d dry runs, step %s; want 1 and upgrade: the hand-made revision was taken for the operator's",
				name, k.checks()-before, r.decision.Step)
		}
	}
}

// What a lookup sees is no input of the digest: a release whose rendering looked anything up is
// rendered again at every check, in this process and the next, and what it read is followed, so
// that a change of it wakes it. Helm stores the labels of a revision after its rendering ran,
// so the count of lookups the rendering did reaches the record; its uninstall forgets it.
func TestAReleaseThatLookedUpIsRenderedAtEveryCheck(t *testing.T) {
	h := newHelm(t)
	// The lookup's kind is a variable: nothing in the template text names it.
	chrt := testChart(`{{ $kind := "Secret" }}{{ $s := lookup "v1" $kind .Release.Namespace "tls" }}` +
		configMap + "  rv: {{ $s.metadata.resourceVersion | quote }}\n")
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, meta.RESTScopeNamespace)
	lookups := NewLookups(nil, mapper, nil)
	lookups.watched[schema.GroupVersionKind{Version: "v1", Kind: "Secret"}] = true // no informer to start here
	followed := func() []string {
		lookups.mu.Lock()
		defer lookups.mu.Unlock()
		return lookups.followed[shard.Key{GVK: crGVK, NamespacedName: crKey}]
	}
	o := Options{Digests: NewDigests(nil, crGVK, lookups, "")}
	k := newKind(t, h, chrt, o)
	for _, spec := range []map[string]any{{"replicas": 1}, {"replicas": 2}} {
		_, rel, err := k.reconcileAs(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := h.last(t).Labels[LookupsLabel]; got != "1" {
			t.Errorf("revision %d: stored %s=%q, want 1 (one object looked up)", rel.Version, LookupsLabel, got)
		}
		if !strings.Contains(rel.Manifest, `rv: "1"`) {
			t.Errorf("the lookup did not reach the template:\n%s", rel.Manifest)
		}
		if reads := followed(); len(reads) != 1 || !strings.HasSuffix(reads[0], "/ns/tls") {
			t.Errorf("the custom resource follows %+v, want the Secret ns/tls it looked up", reads)
		}
	}
	for i, k := range []*kind{k, k, newKind(t, h, chrt, o)} {
		before := k.checks()
		if r := k.begin(cr(map[string]any{"replicas": 2})); k.checks() != before+1 || r.decision.Step != Unchanged {
			t.Errorf("check %d of a release that looked up: %d dry runs, step %s; want 1, unchanged", i+1, k.checks()-before, r.decision.Step)
		}
	}
	r := k.begin(deleting(cr(nil)))
	if _, err := r.uninstall(actionOptions{}); err != nil {
		t.Fatal(err)
	}
	if lookups.Following() != 0 {
		t.Errorf("after the uninstall the custom resource still follows %v", followed())
	}
}

func deleting(u *unstructured.Unstructured) *unstructured.Unstructured {
	now := metav1.Now()
	u.SetDeletionTimestamp(&now)
	return u
}

func TestCapabilitiesEnterTheDigestOfChartsThatReadThem(t *testing.T) {
	plain := testChart(configMap)
	probing := testChart(`{{ if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}` + configMap + `{{ end }}`)
	for _, tc := range []struct {
		name      string
		chrt      *chart.Chart
		wantAfter int
	}{
		{name: "chart without .Capabilities", chrt: plain, wantAfter: 0},
		{name: "chart testing an API version", chrt: probing, wantAfter: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHelm(t)
			if _, _, err := newKind(t, h, tc.chrt, digested()).reconcileAs(map[string]any{}); err != nil {
				t.Fatal(err)
			}
			h.caps.APIVersions = append(slices.Clone(h.caps.APIVersions), "monitoring.coreos.com/v1")
			k := newKind(t, h, tc.chrt, digested())
			if k.begin(cr(map[string]any{})); k.checks() != tc.wantAfter {
				t.Errorf("after a new API appeared: %d dry runs, want %d", k.checks(), tc.wantAfter)
			}
		})
	}
}

// The watch's dryRunOption is the check's: client renders without the cluster, so the lookup
// sees nothing and the rendering differs from the one the server-side install made.
func TestDryRunOptionReachesTheCheck(t *testing.T) {
	h := newHelm(t)
	chrt := testChart(`{{ $s := lookup "v1" "Secret" .Release.Namespace "tls" }}` + configMap + "  found: {{ not (empty $s) | quote }}\n")
	if _, _, err := newKind(t, h, chrt, Options{}).reconcileAs(map[string]any{}); err != nil {
		t.Fatal(err)
	}
	for option, want := range map[string]Step{"": Unchanged, "server": Unchanged, "client": Upgrade} {
		if r := newKind(t, h, chrt, Options{DryRunOption: option}).begin(cr(map[string]any{})); r.decision.Step != want {
			t.Errorf("dryRunOption %q: step %s, want %s", option, r.decision.Step, want)
		}
	}
}

// The fast path answers "unchanged" only when Helm's own dry run renders the deployed manifest:
// each change of an input that the chart reads is run through both, on Helm's real actions.
func TestTheDigestAnswersOnlyWhatARenderingWould(t *testing.T) {
	h := newHelm(t)
	chrt := testChart(configMap + `  monitoring: {{ .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" | quote }}` + "\n")
	k := newKind(t, h, chrt, digested())
	vals := map[string]any{"replicas": 1}
	if _, _, err := k.reconcileAs(vals); err != nil {
		t.Fatal(err)
	}
	plain := newKind(t, h, chrt, Options{}) // every check renders
	for _, step := range []struct {
		name   string
		change func()
	}{
		{name: "nothing", change: func() {}},
		{name: "a new API", change: func() {
			h.caps.APIVersions = append(slices.Clone(h.caps.APIVersions), "monitoring.coreos.com/v1")
		}},
		{name: "the values", change: func() { vals = map[string]any{"replicas": 2} }},
		{name: "an unread API", change: func() {
			h.caps.APIVersions = append(slices.Clone(h.caps.APIVersions), "unrelated.example.com/v1")
		}},
	} {
		step.change()
		before := k.checks()
		fastR := k.begin(cr(vals))
		fast := k.checks() == before
		same := plain.begin(cr(vals)).decision.Step == Unchanged
		if fast && !same {
			t.Errorf("%s: answered unchanged from the digest, but a rendering differs from the deployed manifest", step.name)
		}
		if step.name == "nothing" && !fast {
			t.Errorf("%s: rendered although no input changed", step.name)
		}
		if !same {
			checked, err := fastR.check()
			if err != nil || checked.Manifest == h.last(t).Manifest {
				t.Errorf("%s: the check returned the deployed manifest for changed inputs (%v)", step.name, err)
			}
			if _, err := fastR.upgrade(actionOptions{}); err != nil { // what the reconciler does next
				t.Fatal(err)
			}
		}
	}
}

// A release left pending is unlocked by this process only when it may be its only writer; the
// reconcile's beginning and the reconciler's reads write nothing, and read the release as
// failed, as often as they read it; the unlock is written before the upgrade, which retries it.
// A release an interrupted action left pending is unlocked by the process that may be its only
// writer, as the first step of the reconcile (before the reconciler reads it), under its own
// name: the record's description, an Event and the metrics.
func TestAPendingReleaseIsUnlockedBeforeTheAction(t *testing.T) {
	for _, tc := range []struct {
		name    string
		writer  SoleWriter
		unlocks bool
	}{
		{name: "the Lease holder", writer: SoleWriter{Leading: func() bool { return true }}, unlocks: true},
		{name: "not the Lease holder", writer: SoleWriter{Leading: func() bool { return false }}},
		{name: "no leader election, long pending", writer: SoleWriter{PendingAfter: time.Minute}, unlocks: true},
		{name: "no leader election, just pending", writer: SoleWriter{PendingAfter: time.Hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHelm(t)
			chrt := testChart(configMap)
			h.store(t, &release.Release{Name: "p", Namespace: "ns", Version: 2, Chart: chrt, Manifest: "kind: ConfigMap\n",
				Info: &release.Info{Status: rcommon.StatusPendingUpgrade, LastDeployed: time.Now().Add(-10 * time.Minute)}})
			k := newKind(t, h, chrt, Options{Unlock: tc.writer})
			_, w0 := h.counts()
			r, err := k.c.begin(context.Background(), cr(map[string]any{}))
			if !tc.unlocks {
				if err == nil || !strings.Contains(err.Error(), "is left so") {
					t.Errorf("the reconcile began with %v, want an error saying the release is left pending", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The unlock is a step of its own, before the reconciler reads: it reads the record as
			// stored, failed.
			if stored := h.last(t); stored.Info.Status != rcommon.StatusFailed || !strings.HasPrefix(stored.Info.Description, UnlockedDescription) {
				t.Errorf("after the reconcile began, revision 2 is stored %s (%q); want failed, described as unlocked",
					stored.Info.Status, stored.Info.Description)
			}
			for range 3 {
				rel, err := r.get("p")
				if err != nil || rel.Info.Status != h.last(t).Info.Status || rel.Info.Description != h.last(t).Info.Description {
					t.Errorf("the reconciler read %v, %v; want the release as stored", rel, err)
				}
			}
			if _, w := h.counts(); w != w0+1 {
				t.Errorf("the reconcile's beginning and reads wrote %d records, want 1 (the unlock)", w-w0)
			}
			if _, err := r.upgrade(actionOptions{}); err != nil {
				t.Fatal(err)
			}
			history, _ := k.c.o.Configs.(*helm).mem.Query(map[string]string{"name": "p", "owner": "helm"})
			var unlocked bool
			for _, one := range history {
				if rel := one.(*release.Release); rel.Version == 2 {
					unlocked = rel.Info.Status != rcommon.StatusPendingUpgrade
				}
			}
			if last := h.last(t); !unlocked || last.Version != 3 || last.Info.Status != rcommon.StatusDeployed {
				t.Errorf("after the upgrade: revision 2 unlocked %v, last revision %d %s", unlocked, last.Version, last.Info.Status)
			}
			if len(k.events.Events) == 0 || !strings.Contains(<-k.events.Events, "ReleaseUnlocked") {
				t.Error("no Event says the release was unlocked")
			}
		})
	}
}

func TestSoleWriter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		w     SoleWriter
		since time.Time
		ok    bool
	}{
		{name: "leader", w: SoleWriter{Leading: func() bool { return true }}, since: time.Now(), ok: true},
		{name: "not leader", w: SoleWriter{Leading: func() bool { return false }}, since: time.Now().Add(-time.Hour)},
		{name: "unelected, old", w: SoleWriter{PendingAfter: time.Minute}, since: time.Now().Add(-2 * time.Minute), ok: true},
		{name: "unelected, recent", w: SoleWriter{PendingAfter: time.Minute}, since: time.Now()},
	} {
		why, err := tc.w.why(tc.since)
		if (err == nil) != tc.ok || (tc.ok && why == "") {
			t.Errorf("%s: why %q, err %v; want ok=%v", tc.name, why, err, tc.ok)
		}
	}
}

// gateCalls records what reconciles ask and tell a gate.
type gateCalls struct {
	hold                        bool
	asked                       []bool // specChanged of each Holds
	waiting, upToDate, upgraded int
	lastUpgradeErr              error
}

func (g *gateCalls) Holds(_ client.Object, specChanged bool) bool {
	g.asked = append(g.asked, specChanged)
	return g.hold
}
func (g *gateCalls) Decided(_ client.Object, held bool) {
	if held {
		g.waiting++
	}
}
func (g *gateCalls) UpToDate(client.Object) { g.upToDate++ }
func (g *gateCalls) Upgraded(_ client.Object, err error) {
	g.upgraded++
	g.lastUpgradeErr = err
}

// A new chart's upgrade waits for its wave: the check is answered with the rendering (a fact:
// it differs), the reconciler's upgrade is carried out as the hold step (the deployed revision
// stays, answered as stored), and the gate is asked whether the values changed (a user's change
// goes at once) and told the outcome.
func TestAHeldUpgradeIsAnsweredWithTheDeployedRelease(t *testing.T) {
	h := newHelm(t)
	gate := &gateCalls{hold: true}
	if _, _, err := newKind(t, h, testChart(configMap), Options{Waves: gate}).reconcileAs(map[string]any{"replicas": 2}); err != nil {
		t.Fatal(err)
	}
	deployed := h.last(t)
	newChart := testChart(configMap + "  new: chart\n")
	k := newKind(t, h, newChart, Options{Waves: gate})
	r := k.begin(cr(map[string]any{"replicas": int64(2)}))
	rel, err := r.check()
	if err != nil || rel.Manifest == deployed.Manifest || !strings.Contains(rel.Manifest, "new: chart") || r.decision.Step != Hold {
		t.Fatalf("held check answered %v (%v), step %s; want the new chart's rendering", rel, err, r.decision.Step)
	}
	if len(gate.asked) != 1 || gate.asked[0] || gate.waiting != 1 {
		t.Errorf("Holds asked %v, Waiting told %d times; want once with specChanged=false (values equal as JSON), once",
			gate.asked, gate.waiting)
	}
	// The reconciler asks for the upgrade its check calls for: the deployed revision stays.
	if rel, err := r.upgrade(actionOptions{}); err != nil || rel.Version != deployed.Version || rel.Manifest != deployed.Manifest ||
		h.last(t).Version != deployed.Version {
		t.Errorf("a held upgrade answered %v (%v); stored revision %d; want the deployed revision, as stored", rel, err, h.last(t).Version)
	}
	if k.begin(cr(map[string]any{"replicas": int64(3)})); !gate.asked[1] {
		t.Error("a change of values was not reported as a spec change")
	}
	gate.hold = false
	r = k.begin(cr(map[string]any{"replicas": int64(2)}))
	if rel, _ := r.check(); rel.Manifest == deployed.Manifest {
		t.Error("an admitted check was answered with the deployed release")
	}
	if _, err := r.upgrade(actionOptions{}); err != nil || gate.upgraded != 1 || gate.lastUpgradeErr != nil {
		t.Errorf("admitted upgrade: err %v, Upgraded told %d times", err, gate.upgraded)
	}
	if _, err := k.begin(cr(map[string]any{"replicas": int64(2)})).check(); err != nil || gate.upToDate != 2 {
		t.Errorf("a check that renders the deployed manifest: err %v, UpToDate told %d times, want twice (install, now)", err, gate.upToDate)
	}
}

// A failed release whose check renders the deployed manifest is retried, not held.
func TestAFailedReleaseIsRetriedNotHeld(t *testing.T) {
	h := newHelm(t)
	gate := &gateCalls{hold: true}
	chrt := testChart(configMap)
	h.failedUpgrade(t, chrt, Options{}, map[string]any{"unused": "a"})
	r := newKind(t, h, chrt, Options{Waves: gate}).begin(cr(map[string]any{"unused": "a"}))
	if _, err := r.upgrade(actionOptions{}); err != nil || r.decision.Step != Upgrade || len(gate.asked) != 0 {
		t.Errorf("the retry of a failed release: err %v, step %s, gate asked %v", err, r.decision.Step, gate.asked)
	}
}

// A failed install found when a reconcile begins (another process's, not yet removed, or one
// whose removal failed) is removed before the reconciler reads it: it reads no record, and the
// install starts afresh at revision 1, as after the removal that follows a failed install.
func TestAFailedInstallIsRemovedBeforeTheReconcilerReadsIt(t *testing.T) {
	h := newHelm(t)
	chrt := testChart(configMap)
	if _, _, err := newKind(t, h, chrt, Options{}).reconcileAs(map[string]any{}); err != nil {
		t.Fatal(err)
	}
	h.fail(t)
	k := newKind(t, h, chrt, Options{})
	r := k.begin(cr(map[string]any{}))
	if !r.decision.Remove || r.decision.Step != Install || h.records() != 0 {
		t.Fatalf("decided %+v, %d records left; want the failed install removed, then an install", r.decision, h.records())
	}
	if rel, err := r.get(crKey.Name); !isNotFound(err) {
		t.Errorf("the reconciler read %v, %v; want no record, as stored", rel, err)
	}
	if rel, err := r.install(actionOptions{}); err != nil || rel.Version != 1 || h.last(t).Info.Status != rcommon.StatusDeployed {
		t.Errorf("install: %v, %v; want revision 1 deployed", rel, err)
	}
	removed := false
	for len(k.events.Events) > 0 {
		removed = strings.Contains(<-k.events.Events, names.ReasonFailedInstallRemoved) || removed
	}
	if !removed {
		t.Errorf("no %s Event tells the removal", names.ReasonFailedInstallRemoved)
	}
}

// An install decides its resource for the gate: the first wave waits for every resource of the
// fleet to be decided, and one installed since the start may not be reconciled again.
func TestAnInstallTellsTheGateItIsUpToDate(t *testing.T) {
	gate := &gateCalls{}
	if _, _, err := newKind(t, newHelm(t), testChart(configMap), Options{Waves: gate}).reconcileAs(map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if gate.upToDate != 1 || len(gate.asked) != 0 || gate.upgraded != 0 {
		t.Errorf("after an install the gate was told: UpToDate %d, Holds %d, Upgraded %d; want UpToDate once only",
			gate.upToDate, len(gate.asked), gate.upgraded)
	}
}

// updates records the updates of custom resources (claims), answering err.
type updates struct {
	client.Writer
	owners []string
	err    error
}

func (u *updates) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	u.owners = append(u.owners, shard.Owner(obj))
	return u.err
}

func crOwnedBy(owner string) *unstructured.Unstructured {
	u := cr(map[string]any{})
	if owner != "" {
		u.SetLabels(map[string]string{shard.OwnerLabel: owner})
	}
	return u
}

// runs answers for the shards it knows.
func runs(live map[string]bool) shard.Liveness {
	return func(_ context.Context, id string) (bool, error) { return live[id], nil }
}

// A sharded reconcile acts only on what this shard claimed: it claims an unclaimed resource (or
// one of a shard gone) as the first step of its decision, before anything else is written, and
// refuses another running shard's.
func TestAReconcileActsOnlyOnWhatThisShardClaimed(t *testing.T) {
	a := shard.Shard{Name: "a", Fleet: []string{"a", "b"}}
	for _, tc := range []struct {
		name      string
		owner     string
		updateErr error
		running   shard.Liveness
		claims    []string // owners written
		refused   string   // in the error, when refused
	}{
		{name: "unclaimed: claimed, then acted on", owner: "", claims: []string{"a"}},
		{name: "its own: acted on", owner: "a"},
		{name: "another shard's: refused", owner: "b", refused: `shard "b" acts on it`},
		{name: "a stale claim of a shard not in the fleet: claimed", owner: "removed", claims: []string{"a"}},
		{name: "a claim of a shard not in the fleet that no longer runs: claimed", owner: "removed",
			running: runs(map[string]bool{"removed": false}), claims: []string{"a"}},
		{name: "a claim of a shard not in the fleet that runs: refused, naming --shards", owner: "c",
			running: runs(map[string]bool{"c": true}), refused: `shard "c" claims it and runs (its Lease is held), but is not in --shards [a b]`},
		{name: "whether the claiming shard runs cannot be read: refused", owner: "c",
			running: func(context.Context, string) (bool, error) { return false, errors.New("forbidden") },
			refused: `reading whether shard "c", which claims it, runs: forbidden`},
		{name: "a shard of the fleet is not asked about", owner: "b",
			running: func(context.Context, string) (bool, error) { panic("asked") }, refused: `shard "b" acts on it`},
		{name: "a concurrent change: the claim fails", owner: "", updateErr: apierrors.NewConflict(schema.GroupResource{}, "p", errors.New("changed")),
			claims: []string{"a"}, refused: "claiming it for shard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, w := newHelm(t), &updates{err: tc.updateErr}
			k := newKind(t, h, testChart(configMap), Options{Shard: a, Claims: shard.NewClaims(), Writer: w, Running: tc.running})
			r, err := k.c.begin(context.Background(), crOwnedBy(tc.owner))
			if err == nil {
				_, err = r.install(actionOptions{})
			}
			if strings.Join(w.owners, ",") != strings.Join(tc.claims, ",") {
				t.Errorf("claims written %v, want %v", w.owners, tc.claims)
			}
			installed := h.records() > 0
			switch {
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused) || installed):
				t.Errorf("error %v (installed %v), want one saying %q and nothing installed", err, installed, tc.refused)
			case tc.refused == "" && (err != nil || !installed):
				t.Errorf("install: %v, installed %v", err, installed)
			}
		})
	}
}

// A resource handed over starts nothing: not from a reconcile that began before, nor from one
// that begins from a lagging copy still naming this shard; claimed afresh, it is acted on.
func TestAReconcileStartsNothingAfterAHandover(t *testing.T) {
	a := shard.Shard{Name: "a", Fleet: []string{"a"}}
	h, claims := newHelm(t), shard.NewClaims()
	k := newKind(t, h, testChart(configMap), Options{Shard: a, Claims: claims, Writer: &updates{}})
	r := k.begin(crOwnedBy("a"))
	if !claims.Release(shard.Key{GVK: crGVK, NamespacedName: crKey}) {
		t.Fatal("nothing in flight, yet not released")
	}
	if _, err := r.install(actionOptions{}); !errors.Is(err, shard.ErrHandedOver) || h.records() != 0 {
		t.Errorf("install after the handover: %v, %d records", err, h.records())
	}
	r, err := k.c.begin(context.Background(), crOwnedBy("a"))
	if err == nil {
		_, err = r.install(actionOptions{})
	}
	if !errors.Is(err, shard.ErrHandedOver) || h.records() != 0 {
		t.Errorf("install from a lagging copy after the handover: %v, %d records", err, h.records())
	}
	if _, err := k.begin(crOwnedBy("")).install(actionOptions{}); err != nil || h.records() != 1 {
		t.Errorf("install once claimed again: %v, %d records", err, h.records())
	}
}

func TestNotShardedClaimsNothing(t *testing.T) {
	h, w := newHelm(t), &updates{}
	if _, err := newKind(t, h, testChart(configMap), Options{Writer: w}).begin(crOwnedBy("b")).install(actionOptions{}); err != nil ||
		len(w.owners) > 0 || h.records() != 1 {
		t.Errorf("not sharded: error %v, claims %v, %d records", err, w.owners, h.records())
	}
}

// Helm edits the chart it renders (subcharts switched off go, aliases are renamed): one release
// switching a subchart off leaves it for the next, and the kind's chart stays as loaded.
func TestTheKindsChartStaysAsLoaded(t *testing.T) {
	sub := func(name string) *chart.Chart {
		c := testChart("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n")
		c.Metadata.Name = name
		return c
	}
	umbrella := testChart(configMap)
	umbrella.Metadata.Dependencies = []*chart.Dependency{
		{Name: "backend", Version: "0.1.0"},
		{Name: "extra", Version: "0.1.0", Condition: "extra.enabled"},
		{Name: "backend", Alias: "second", Version: "0.1.0"},
	}
	umbrella.Values["extra"] = map[string]any{"enabled": false}
	umbrella.SetDependencies(sub("backend"), sub("extra"))
	k := newKind(t, newHelm(t), umbrella, Options{})
	if _, _, err := k.reconcileAs(map[string]any{}); err != nil {
		t.Fatal(err)
	}
	_, rel, err := k.reconcileAs(map[string]any{"extra": map[string]any{"enabled": true}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rel.Manifest, "name: extra") {
		t.Errorf("the subchart switched on again is missing from the upgrade:\n%s", rel.Manifest)
	}
	if len(umbrella.Dependencies()) != 2 || len(umbrella.Metadata.Dependencies) != 3 || umbrella.Metadata.Dependencies[2].Name != "backend" {
		t.Errorf("the kind's chart was edited: %d subcharts, entries %+v", len(umbrella.Dependencies()), umbrella.Metadata.Dependencies)
	}
}

// A null in the values deletes the chart's default, as in `helm install -f`: Helm coalesces the
// values once.
func TestANullDeletesADefault(t *testing.T) {
	chrt := testChart("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n" +
		"{{- range $k, $v := .Values.receivers }}\n  {{ $k }}: {{ $v | quote }}\n{{- end }}\n")
	chrt.Values["receivers"] = map[string]any{"otlp": "4317", "jaeger": "14250"}
	_, rel, err := newKind(t, newHelm(t), chrt, Options{}).reconcileAs(map[string]any{"receivers": map[string]any{"jaeger": nil}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rel.Manifest, "jaeger") || !strings.Contains(rel.Manifest, "otlp") {
		t.Errorf("a null left the default, or took the others:\n%s", rel.Manifest)
	}
}

// The values of an upgrade are the custom resource's, whole: a spec emptied is not Helm's
// "no values given, reuse the last".
func TestAnEmptySpecIsNotTheLastValues(t *testing.T) {
	k := newKind(t, newHelm(t), testChart(configMap), Options{})
	if _, _, err := k.reconcileAs(map[string]any{"replicas": 3}); err != nil {
		t.Fatal(err)
	}
	_, rel, err := k.reconcileAs(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.Config) != 0 || !strings.Contains(rel.Manifest, `replicas: "1"`) {
		t.Errorf("revision %d kept values %v:\n%s", rel.Version, rel.Config, rel.Manifest)
	}
}

// Every answer the client gives the reconciler is a fact: a read is the release's last record as
// stored at that moment (none, or an uninstalled one, answered not found), and the check is
// that record or the rendering the chart makes of the values at hand, as a dry run of its own
// renders it. The reconciler's calls are made in its order, for every kind of release the
// decision tells apart.
func TestEveryAnswerIsARecordAsStoredOrARendering(t *testing.T) {
	stored := func(t *testing.T, h *helm) *release.Release {
		t.Helper()
		rel, err := last(&action.Configuration{Releases: storage.Init(h.mem)}, crKey.Name)
		if isNotFound(err) || rel != nil && rel.Info.Status == rcommon.StatusUninstalled {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return rel
	}
	same := func(a, b *release.Release) bool {
		if a == nil || b == nil {
			return a == nil && b == nil
		}
		return a.Version == b.Version && a.Info.Status == b.Info.Status && a.Info.Description == b.Info.Description && a.Manifest == b.Manifest
	}
	for _, tc := range []struct {
		name  string
		setUp func(t *testing.T, h *helm, chrt *chart.Chart)
		spec  map[string]any
		held  bool
	}{
		{name: "new", spec: map[string]any{}},
		{name: "unchanged", spec: map[string]any{"replicas": int64(2)}},
		{name: "changed values", spec: map[string]any{"replicas": int64(3)}},
		{name: "held", spec: map[string]any{"replicas": int64(2)}, held: true},
		{name: "failed", spec: map[string]any{"replicas": int64(2)}, setUp: func(t *testing.T, h *helm, _ *chart.Chart) {
			failed := h.last(t)
			failed.Info.Status, failed.Info.Description = rcommon.StatusFailed, "failed by the test"
			if err := h.mem.Update("sh.helm.release.v1.p.v1", failed); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "left pending", spec: map[string]any{"replicas": int64(2)}, setUp: func(t *testing.T, h *helm, chrt *chart.Chart) {
			h.store(t, &release.Release{Name: "p", Namespace: "ns", Version: 2, Chart: chrt, Manifest: "kind: ConfigMap\n",
				Info: &release.Info{Status: rcommon.StatusPendingUpgrade, LastDeployed: time.Now().Add(-2 * time.Hour)}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHelm(t)
			chrt := testChart(configMap)
			if tc.name != "new" {
				if _, _, err := newKind(t, h, chrt, digested()).reconcileAs(map[string]any{"replicas": 2}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.setUp != nil {
				tc.setUp(t, h, chrt)
			}
			if tc.held {
				chrt = testChart(configMap + "  new: chart\n")
			}
			k := newKind(t, h, chrt, Options{Waves: &gateCalls{hold: tc.held}})
			r := k.begin(cr(tc.spec))
			// The reconciler reads the release, then checks it, then acts, reading it again
			// before an upgrade.
			got, err := r.get(crKey.Name)
			if err != nil && !isNotFound(err) || !same(got, stored(t, h)) {
				t.Fatalf("read answered %v (%v); stored: %v", got, err, stored(t, h))
			}
			if isNotFound(err) {
				if _, err := r.install(actionOptions{}); err != nil {
					t.Fatal(err)
				}
				return
			}
			checked, err := r.check()
			if err != nil {
				t.Fatal(err)
			}
			rendering, err := k.c.Render(context.Background(), cr(tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			// The rendering, or a deployed record that renders the same; or a record that is not
			// deployed, whose status tells the reconciler to upgrade.
			if checked.Manifest != rendering.Rendered.Manifest && (!same(checked, stored(t, h)) || checked.Info.Status == rcommon.StatusDeployed) {
				t.Errorf("check answered revision %d %s, neither the rendering nor a record as stored that is not deployed (stored: %d %s)",
					checked.Version, checked.Info.Status, stored(t, h).Version, stored(t, h).Info.Status)
			}
			if checked.Manifest == got.Manifest && got.Info.Status == rcommon.StatusDeployed {
				if err := r.reconcileObjects(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if again, err := r.get(crKey.Name); err != nil || !same(again, stored(t, h)) {
				t.Errorf("read before the upgrade answered %v (%v); stored: %v", again, err, stored(t, h))
			}
			upgraded, err := r.upgrade(actionOptions{})
			if err != nil || !same(upgraded, stored(t, h)) {
				t.Errorf("upgrade answered %v (%v); stored: %v", upgraded, err, stored(t, h))
			}
		})
	}
}

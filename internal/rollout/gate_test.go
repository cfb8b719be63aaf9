package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// memStore keeps the state in memory, and what was saved last.
type memStore struct {
	stored *State
	saves  int
}

func (m *memStore) Load(_ context.Context, target string) (State, error) {
	if m.stored == nil || m.stored.Target != target {
		return newState(target), nil
	}
	return copyState(*m.stored), nil
}

func (m *memStore) Save(_ context.Context, st State) error {
	c := copyState(st)
	m.stored, m.saves = &c, m.saves+1
	return nil
}

func copyState(st State) State {
	out := st
	out.Members = map[string]Member{}
	for k, v := range st.Members {
		out.Members[k] = v
	}
	return out
}

type fixture struct {
	gate  *Gate
	store *memStore
	fleet map[string]*unstructured.Unstructured
	ready map[string]bool
	woken []string
}

func newFixture(t *testing.T, names ...string) *fixture {
	t.Helper()
	f := &fixture{store: &memStore{}, fleet: map[string]*unstructured.Unstructured{}, ready: map[string]bool{}}
	for _, n := range names {
		u := &unstructured.Unstructured{}
		u.SetNamespace("ns")
		u.SetName(n)
		f.fleet[n] = u
	}
	sel, _ := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"canary": "yes"}})
	g := NewGate()
	g.Kind, g.Target, g.Store = "MyProxy", "target-1", f.store
	g.Settings = Settings{CanarySelector: sel, Defaults: Defaults{Canaries: 1, Growth: 2, Timeout: time.Hour}}
	g.Fleet = func(context.Context) ([]client.Object, error) {
		var out []client.Object
		for _, u := range f.fleet {
			out = append(out, u)
		}
		return out, nil
	}
	g.Ready = func(_ context.Context, key types.NamespacedName) (string, error) {
		if f.ready[key.Name] {
			return "", nil
		}
		return "Deployment/" + key.Name + ": not available", nil
	}
	g.Wake = func(key types.NamespacedName) {
		// A wave's releases may upgrade only once it is saved.
		if _, saved := f.store.stored.Members[key.String()]; !saved {
			t.Errorf("%s woken before its admission was saved", key)
		}
		f.woken = append(f.woken, key.Name)
	}
	g.Nudge = func(types.NamespacedName) {}
	g.pollEvery = 0 // every step reads health
	f.gate = g
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) step(t *testing.T) {
	t.Helper()
	if err := f.gate.step(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// hold asks the gate whether an upgrade waits, and tells it the decision, as the action client does.
func hold(g *Gate, obj client.Object, specChanged bool) bool {
	held := g.Holds(obj, specChanged)
	g.Decided(obj, held)
	return held
}

// wave returns who was woken since the last call, sorted.
func (f *fixture) wave() []string {
	w := slices.Sorted(slices.Values(f.woken))
	f.woken = nil
	return w
}

func TestChartUpgradesWaitForTheirWaveAndSpecChangesDoNot(t *testing.T) {
	f := newFixture(t, "a", "b", "c", "d", "e", "f")
	f.fleet["c"].SetLabels(map[string]string{"canary": "yes"})
	if hold(f.gate, f.fleet["a"], true) {
		t.Error("a spec change was held while the rollout runs")
	}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		if !hold(f.gate, f.fleet[n], false) {
			t.Errorf("%s: a chart upgrade went before its wave", n)
		}
	}
	f.step(t)
	if w := f.wave(); len(w) != 0 {
		t.Fatalf("a wave opened (%v) before every resource of the fleet was seen once", w)
	}
	f.gate.UpToDate(f.fleet["f"]) // the last one seen: nothing to upgrade
	f.step(t)
	if w := f.wave(); !slices.Equal(w, []string{"c"}) {
		t.Fatalf("first wave %v, want the canary c", w)
	}
	if hold(f.gate, f.fleet["c"], false) {
		t.Error("an admitted release is still held")
	}
	f.gate.Upgraded(f.fleet["c"], nil)
	f.step(t)
	if w := f.wave(); len(w) != 0 {
		t.Fatalf("wave %v opened before the canary was Ready", w)
	}
	f.ready["c"] = true
	f.step(t)
	if w := f.wave(); !slices.Equal(w, []string{"a", "b"}) { // Canaries × Growth, by name
		t.Fatalf("second wave %v, want [a b]", w)
	}
	for _, n := range []string{"a", "b"} {
		f.gate.Upgraded(f.fleet[n], nil)
		f.ready[n] = true
	}
	f.step(t)
	if w := f.wave(); !slices.Equal(w, []string{"d", "e"}) { // all that is left of four
		t.Fatalf("third wave %v, want [d e]", w)
	}
	st := f.store.stored
	if st.Wave != 2 || st.Members["ns/c"].Phase != PhaseReady || st.Members["ns/d"].Phase != PhaseAdmitted {
		t.Errorf("stored state %+v", st)
	}
}

func TestAFailureBeyondTheBudgetHaltsTheRollout(t *testing.T) {
	f := newFixture(t, "a", "b", "c", "d")
	f.gate.Settings.CanarySelector = labels.Nothing()
	f.gate.Settings.Canaries = 2
	for _, n := range []string{"a", "b", "c", "d"} {
		hold(f.gate, f.fleet[n], false)
	}
	f.step(t)
	if w := f.wave(); !slices.Equal(w, []string{"a", "b"}) {
		t.Fatalf("first wave %v, want [a b] (the selector matches none: by count)", w)
	}
	f.gate.Upgraded(f.fleet["a"], errors.New("boom"))
	f.step(t)
	st := f.store.stored
	if !strings.Contains(st.Halted, "ns/a: upgrade failed: boom") {
		t.Fatalf("halted %q, want it to name a's failure", st.Halted)
	}
	if !hold(f.gate, f.fleet["c"], true) {
		t.Error("a spec change went while the rollout is halted")
	}
	if !hold(f.gate, f.fleet["b"], false) {
		t.Error("an admitted release that had not upgraded went while the rollout is halted")
	}
	for _, n := range []string{"b", "c", "d"} {
		if why, held := f.gate.Held(types.NamespacedName{Namespace: "ns", Name: n}); !held || !strings.Contains(why, "ns/a: upgrade failed") {
			t.Errorf("%s: held %v, %q", n, held, why)
		}
	}
	if _, held := f.gate.Held(types.NamespacedName{Namespace: "ns", Name: "a"}); held {
		t.Error("the failed release itself is reported held")
	}
	f.fleet["d"].SetAnnotations(map[string]string{UpgradeNowAnnotation: "true"})
	if hold(f.gate, f.fleet["d"], false) {
		t.Error("the upgrade-now annotation did not let the upgrade go")
	}
	f.step(t)
	if w := f.wave(); len(w) != 0 {
		t.Errorf("wave %v opened on a halted rollout", w)
	}

	// A new chart starts afresh, and what waited is decided again.
	var redecided []string
	f.gate.Wake = func(key types.NamespacedName) { redecided = append(redecided, key.Name) }
	f.gate.Target = "target-2"
	if err := f.gate.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.gate.state.Halted != "" || len(f.gate.state.Members) != 0 || f.gate.state.Wave != -1 {
		t.Errorf("state for a new chart: %+v, want a fresh one", f.gate.state)
	}
	if slices.Sort(redecided); !slices.Equal(redecided, []string{"c"}) {
		t.Errorf("woken on load: %v, want the held c", redecided)
	}
}

func TestAnAdministratorResumesAHaltedRolloutOnce(t *testing.T) {
	f := newFixture(t, "a", "b", "c")
	f.gate.Settings.CanarySelector = nil
	f.gate.Settings.Timeout = time.Minute
	var nudged []string
	f.gate.Nudge = func(key types.NamespacedName) { nudged = append(nudged, key.Name) }
	f.gate.RequestResume("before") // a request left from an earlier halt: handled, no effect
	for _, n := range []string{"a", "b", "c"} {
		hold(f.gate, f.fleet[n], false)
	}
	f.step(t)
	if w := f.wave(); !slices.Equal(w, []string{"a"}) {
		t.Fatalf("first wave %v, want the canary a", w)
	}
	if got := f.store.stored.Resumed; got != "before" {
		t.Errorf("request handled while running: stored %q, want it recorded as handled", got)
	}
	f.gate.Upgraded(f.fleet["a"], nil)
	f.step(t)
	m := f.store.stored.Members["ns/a"]
	m.Since = metav1.NewTime(time.Now().Add(-time.Hour)) // not Ready within the timeout
	f.gate.state.Members["ns/a"] = m
	f.step(t)
	if f.store.stored.Halted == "" {
		t.Fatal("the rollout did not halt on a's timeout")
	}

	f.gate.RequestResume("before") // the same request again: not a new one
	f.step(t)
	if f.store.stored.Halted == "" {
		t.Fatal("an old request resumed the rollout")
	}

	nudged = nil
	f.gate.RequestResume("2026-12-02T17:00:00Z")
	f.step(t)
	st := f.store.stored
	if st.Halted != "" || st.Resumed != "2026-12-02T17:00:00Z" {
		t.Fatalf("after the request: halted %q, resumed %q", st.Halted, st.Resumed)
	}
	if a := st.Members["ns/a"]; a.Phase != PhaseAdmitted || a.Wave != 0 || time.Since(a.Since.Time) > time.Minute {
		t.Errorf("a after the resume: %+v, want admitted again to its wave with a fresh timeout", a)
	}
	if w := f.wave(); !slices.Equal(w, []string{"a"}) {
		t.Errorf("woken %v, want the failed a, once the resume is saved", w)
	}
	for _, n := range []string{"b", "c"} {
		if !slices.Contains(nudged, n) {
			t.Errorf("%s: its RolloutHeld status was not written again (nudged %v)", n, nudged)
		}
		if _, held := f.gate.Held(types.NamespacedName{Namespace: "ns", Name: n}); held {
			t.Errorf("%s still reported held by a halted rollout", n)
		}
	}
	if hold(f.gate, f.fleet["a"], false) {
		t.Error("the release admitted again is held")
	}
	f.gate.UpToDate(f.fleet["a"]) // it renders the target already: judged by its health again
	f.ready["a"] = true
	f.step(t)
	if w := f.wave(); !slices.Equal(w, []string{"b", "c"}) {
		t.Errorf("next wave %v, want [b c] once a is Ready", w)
	}
}

func TestAFailedSaveWakesItsWaveWithTheNextSave(t *testing.T) {
	f := newFixture(t, "a")
	f.gate.Settings.CanarySelector = nil
	failing := &failingStore{StateStore: f.store, fail: true}
	f.gate.Store = failing
	hold(f.gate, f.fleet["a"], false)
	if err := f.gate.step(context.Background()); err == nil {
		t.Fatal("the save failed and the step did not say so")
	}
	if w := f.wave(); len(w) != 0 {
		t.Fatalf("woken %v before the wave was saved", w)
	}
	failing.fail = false
	f.step(t)
	if w := f.wave(); !slices.Equal(w, []string{"a"}) {
		t.Errorf("woken %v once saved, want [a]", w)
	}
}

// failingStore fails its saves while fail is set.
type failingStore struct {
	StateStore
	fail bool
}

func (s *failingStore) Save(ctx context.Context, st State) error {
	if s.fail {
		return errors.New("apiserver unavailable")
	}
	return s.StateStore.Save(ctx, st)
}

func TestARestartResumesTheWaveAndRestartsItsClock(t *testing.T) {
	f := newFixture(t, "a", "b")
	f.gate.Settings.CanarySelector = nil
	f.gate.Settings.Timeout = time.Minute
	for _, n := range []string{"a", "b"} {
		hold(f.gate, f.fleet[n], false)
	}
	f.step(t)
	_ = f.wave()
	old := f.store.stored.Members["ns/a"]
	old.Since = metav1.NewTime(time.Now().Add(-time.Hour)) // the operator was down for an hour
	f.store.stored.Members["ns/a"] = old

	g := NewGate()
	g.Kind, g.Target, g.Store, g.Settings = "MyProxy", "target-1", f.store, f.gate.Settings
	g.Fleet, g.Ready, g.Wake, g.Nudge, g.pollEvery = f.gate.Fleet, f.gate.Ready, f.gate.Wake, f.gate.Nudge, 0
	if err := g.load(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.gate = g
	if hold(g, f.fleet["a"], false) {
		t.Error("an admitted release is held after a restart")
	}
	if !hold(g, f.fleet["b"], false) {
		t.Error("a release not admitted went after a restart")
	}
	f.step(t)
	if m := f.store.stored.Members["ns/a"]; m.Phase != PhaseAdmitted {
		t.Errorf("a: %s (%s) after the restart, want still admitted: its wait starts again", m.Phase, m.Message)
	}
	g.Forget(types.NamespacedName{Namespace: "ns", Name: "b"})
	g.Forget(types.NamespacedName{Namespace: "ns", Name: "a"})
	if n := g.Len(); n != 0 {
		t.Errorf("%d entries remembered after every resource was forgotten", n)
	}
}

func TestPolicyMergesOverDefaults(t *testing.T) {
	two, zero := 2, 0
	d := Defaults{Canaries: 1, Growth: 2, Timeout: time.Minute, MaxFailures: 1}
	s := Policy{Canaries: &two, MaxFailures: &zero, Timeout: &metav1.Duration{Duration: time.Second}}.Merge(d)
	if s.Canaries != 2 || s.Growth != 2 || s.Timeout != time.Second || s.MaxFailures != 0 || s.CanarySelector != nil {
		t.Errorf("merged %+v", s)
	}
	bad := -1
	for _, p := range []Policy{{Canaries: &zero}, {Growth: &zero}, {MaxFailures: &bad}, {Timeout: &metav1.Duration{}},
		{CanarySelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}} {
		if err := p.Check(); err == nil {
			t.Errorf("%s accepted", fmt.Sprintf("%+v", p))
		}
	}
}

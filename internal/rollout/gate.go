package rollout

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/example/myproxy-operator/internal/names"
)

// Gate decides which upgrades of one watch's fleet may go, and runs its rollout (Start).
type Gate struct {
	Kind     string
	Target   string // digest of the chart and rendering code the releases upgrade to
	Settings Settings
	Store    StateStore
	// Fleet lists the custom resources this process reconciles (its shard, the watch's selector).
	Fleet func(ctx context.Context) ([]client.Object, error)
	// Ready tells why a release is not Ready now, from its live objects: "" when it is.
	Ready func(ctx context.Context, key types.NamespacedName) (string, error)
	// Wake has the Helm reconciler reconcile a resource; Nudge has the status controller write
	// its status again.
	Wake, Nudge func(types.NamespacedName)
	Recorder    record.EventRecorder
	Metrics     *Metrics

	mu      sync.Mutex
	loaded  bool
	state   State
	held    map[types.NamespacedName]labels.Set // waiting for a wave, with their labels
	seen    map[types.NamespacedName]bool       // decided since start; nil once the first wave opened here
	started time.Time
	dirty   bool
	// lastPoll is when the health of the waves' releases was last read, every pollEvery.
	lastPoll  time.Time
	pollEvery time.Duration
	kick      chan struct{}
	// resumeRequest is the last value of ResumeAnnotation seen on the state's ConfigMap.
	resumeRequest string
	// unsaved are the releases admitted by a step whose save failed: not woken yet.
	unsaved []types.NamespacedName
}

// pollInterval is how often the health of the releases in a wave is read while any is
// waiting to be Ready, and timeouts are checked.
const pollInterval = 2 * time.Second

// NewGate returns a gate; set its fields before the manager starts it.
func NewGate() *Gate {
	return &Gate{held: map[types.NamespacedName]labels.Set{}, seen: map[types.NamespacedName]bool{},
		kick: make(chan struct{}, 1), pollEvery: pollInterval}
}

func (g *Gate) wakeRunner() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// Holds reports whether an upgrade of obj must wait. specChanged says the upgrade renders
// values other than the deployed release's (a user's change), which goes at once unless the
// rollout is halted. Every other upgrade (a new chart, new rendering code) waits for its wave.
// It changes nothing: Decided tells the gate what the reconcile decided.
func (g *Gate) Holds(obj client.Object, specChanged bool) bool {
	key := client.ObjectKeyFromObject(obj)
	if obj.GetAnnotations()[UpgradeNowAnnotation] == "true" {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.state.Members[key.String()]; ok { // no member before the state is loaded
		return g.state.Halted != "" && m.Phase == PhaseAdmitted
	}
	return !g.loaded || g.state.Halted != "" || !specChanged
}

// Decided tells that the reconcile of obj decided its upgrade: held (it waits for its wave:
// the runner takes it into the next one) or not (it goes now).
func (g *Gate) Decided(obj client.Object, held bool) {
	key := client.ObjectKeyFromObject(obj)
	g.mu.Lock()
	g.see(key)
	_, was := g.held[key]
	_, member := g.state.Members[key.String()]
	waits := held && !was && !member // a member of a wave waits where it is
	switch {
	case waits:
		g.held[key] = labels.Set(obj.GetLabels())
	case !held:
		delete(g.held, key)
	}
	nudge := waits && g.state.Halted != ""
	g.mu.Unlock()
	if nudge {
		g.Nudge(key) // its status says why it waits
	}
	if held && !member {
		g.wakeRunner()
	}
}

// see records that key was decided, while the first wave waits for the whole fleet to be.
func (g *Gate) see(key types.NamespacedName) {
	if g.seen != nil {
		g.seen[key] = true
	}
}

// UpToDate tells that obj's release renders what the chart at hand renders: nothing to upgrade.
// The runner is woken only when that moves the rollout: a member upgraded, a hold ended, or the
// first wave waiting for the fleet to be decided.
func (g *Gate) UpToDate(obj client.Object) {
	key := client.ObjectKeyFromObject(obj)
	g.mu.Lock()
	g.see(key)
	_, moved := g.held[key]
	delete(g.held, key)
	if m, ok := g.state.Members[key.String()]; ok && m.Phase == PhaseAdmitted {
		g.setPhase(key, m, PhaseUpgraded, "")
		moved = true
	}
	moved = moved || g.seen != nil && len(g.held) > 0
	g.mu.Unlock()
	if moved {
		g.wakeRunner()
	}
}

// Upgraded tells the outcome of an upgrade of obj's release.
func (g *Gate) Upgraded(obj client.Object, err error) {
	key := client.ObjectKeyFromObject(obj)
	g.mu.Lock()
	g.see(key)
	delete(g.held, key)
	m, ok := g.state.Members[key.String()]
	judged := ok && m.inFlight() // else not in a wave (a spec change, an override)
	switch {
	case judged && err != nil:
		g.setPhase(key, m, PhaseFailed, "upgrade failed: "+err.Error())
	case judged:
		g.setPhase(key, m, PhaseUpgraded, "")
	}
	g.mu.Unlock()
	if judged {
		g.wakeRunner()
	}
}

func (g *Gate) setPhase(key types.NamespacedName, m Member, p Phase, message string) {
	m.Phase, m.Since, m.Message = p, metav1.Now(), message
	g.state.Members[key.String()] = m
	g.dirty = true
}

// Held returns, for a release held by a halted rollout, the message of the condition its
// custom resource carries.
func (g *Gate) Held(key types.NamespacedName) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, held := g.held[key]
	if g.state.Halted == "" || (!held && g.state.Members[key.String()].Phase != PhaseAdmitted) {
		return "", false
	}
	return fmt.Sprintf("this release stays on the chart it has: the rollout of chart %.12s %s; a new chart restarts "+
		"the rollout, an administrator resumes it (the annotation %s on its state ConfigMap), the annotation %s=true "+
		"upgrades this resource regardless", g.Target, g.state.Halted, ResumeAnnotation, UpgradeNowAnnotation), true
}

// Forget drops what the gate remembers of a resource gone.
func (g *Gate) Forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.held, key)
	delete(g.seen, key)
	if _, ok := g.state.Members[key.String()]; ok {
		delete(g.state.Members, key.String())
		g.dirty = true
	}
}

// Len is the number of resources held.
func (g *Gate) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held) + len(g.seen)
}

// NeedLeaderElection reports that the gate runs with the reconcilers, on the leader.
func (g *Gate) NeedLeaderElection() bool { return true }

// Start loads the rollout's state and advances it until ctx ends.
func (g *Gate) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithValues("kind", g.Kind)
	for err := g.load(ctx); err != nil; err = g.load(ctx) {
		log.Error(err, "cannot read the rollout state; chart upgrades wait")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pollInterval):
		}
	}
	for {
		err := g.step(ctx)
		if err != nil {
			log.Error(err, "rollout step failed; retrying")
		}
		// An idle rollout waits to be woken; one in flight (or failing) steps every pollInterval.
		var tick <-chan time.Time
		if err != nil || g.busy() {
			tick = time.After(pollInterval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
		case <-g.kick:
		}
	}
}

// busy reports whether the rollout has anything to step on: releases held or in a wave, or a
// state not saved yet.
func (g *Gate) busy() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.held) > 0 || g.dirty || len(g.unsaved) > 0 || g.waveInFlight(true)
}

// load reads the stored state; until it is read, every upgrade waits, and those that waited are
// decided again once it is.
func (g *Gate) load(ctx context.Context) error {
	st, err := g.Store.Load(ctx, g.Target)
	if err != nil {
		return err
	}
	g.mu.Lock()
	waited := slices.Collect(maps.Keys(g.held))
	g.state, g.loaded, g.started = st, true, time.Now()
	g.dirty = true // records the target (and replaces the state of an older one)
	// The waits of releases in flight start again with this process: while no operator ran,
	// nothing could upgrade them or see them become Ready.
	for k, m := range g.state.Members {
		if m.inFlight() {
			m.Since = metav1.NewTime(g.started)
			g.state.Members[k] = m
		}
	}
	g.mu.Unlock()
	for _, k := range waited {
		g.Wake(k)
	}
	return nil
}

// step judges the releases of the waves, halts the rollout past its failure budget, opens the
// next wave when the last one is done, and saves what changed.
//
// Health is read at most once per pollInterval, whatever woke the step, and so is a state that
// changed only by the phases of releases written back: a restart that lost such a change finds
// it again (an upgraded release renders the new chart, a Ready one is read Ready, a failure
// times out again). An admission or a halt is saved before anything follows from it.
func (g *Gate) step(ctx context.Context) error {
	verdicts, poll, err := g.readHealth(ctx)
	if err != nil {
		return err
	}
	g.mu.Lock()
	now := time.Now()
	if g.seen != nil && now.Sub(g.started) >= g.Settings.Timeout {
		g.seen = nil // the first wave no longer waits for the fleet to be seen
	}
	resumed, resumeHandled := g.resume()
	g.judge(verdicts, now)
	halted := g.haltPastBudget()
	var admitted []types.NamespacedName
	if g.state.Halted == "" && !g.waveInFlight(false) {
		if admitted, err = g.admit(ctx, now); err != nil {
			g.mu.Unlock()
			return err
		}
	}
	// Releases admitted (or admitted again) by a step whose save failed are woken by the
	// step that saves them.
	wake := slices.Concat(g.unsaved, admitted, resumed)
	g.unsaved = nil
	var st State
	dirty := g.dirty && (len(wake) > 0 || len(halted) > 0 || resumeHandled || poll)
	if dirty {
		g.dirty, st = false, g.state // saved as it is now
		st.Members = maps.Clone(g.state.Members)
	}
	if dirty || poll {
		g.Metrics.set(g.Kind, g.state, len(g.held))
	}
	held := slices.Collect(maps.Keys(g.held))
	g.mu.Unlock()

	if dirty {
		if err := g.Store.Save(ctx, st); err != nil {
			g.mu.Lock()
			g.dirty = true
			g.unsaved = append(g.unsaved, wake...)
			g.mu.Unlock()
			return err
		}
	}
	// Only once the wave is saved may its releases upgrade: a restart then knows them.
	for _, key := range wake {
		g.Wake(key)
	}
	if len(halted) > 0 {
		g.report(ctx, st, halted, held, corev1.EventTypeWarning, names.ReasonRolloutHalted,
			fmt.Sprintf("the rollout of chart %.12s %s", st.Target, st.Halted))
		logf.FromContext(ctx).Info("rollout halted", "kind", g.Kind, "why", st.Halted, "held", len(held))
	}
	if len(resumed) > 0 {
		g.report(ctx, st, resumed, held, corev1.EventTypeNormal, names.ReasonRolloutResumed,
			fmt.Sprintf("the rollout of chart %.12s resumed on request %q: this release is admitted again", st.Target, st.Resumed))
		logf.FromContext(ctx).Info("rollout resumed", "kind", g.Kind, "request", st.Resumed, "admitted again", len(resumed))
	}
	return nil
}

// RequestResume takes the value of ResumeAnnotation on the rollout's state ConfigMap; the next
// step acts on it if it is new.
func (g *Gate) RequestResume(request string) {
	g.mu.Lock()
	changed := request != g.resumeRequest
	g.resumeRequest = request
	g.mu.Unlock()
	if changed {
		g.wakeRunner()
	}
}

// resume acts on a new resume request: a halted rollout runs again, its failed releases
// admitted again (into the waves they were in) with a fresh timeout, so that the failure budget
// counts anew; it returns them, and whether there was a request to handle (its handling is
// saved at once). A request that finds the rollout running is only recorded as handled: it was
// meant for a halt that is over.
func (g *Gate) resume() (again []types.NamespacedName, handled bool) {
	if g.resumeRequest == "" || g.resumeRequest == g.state.Resumed {
		return nil, false
	}
	g.state.Resumed = g.resumeRequest
	g.dirty = true
	if g.state.Halted == "" {
		return nil, true
	}
	g.state.Halted = ""
	for _, k := range slices.Sorted(maps.Keys(g.state.Members)) {
		if key, m := keyOf(k), g.state.Members[k]; m.Phase == PhaseFailed {
			g.setPhase(key, m, PhaseAdmitted, "")
			again = append(again, key)
		}
	}
	return again, true
}

// readHealth reads, when pollEvery has passed (poll), whether each upgraded release is Ready:
// "" when it is, else why not.
func (g *Gate) readHealth(ctx context.Context) (verdicts map[types.NamespacedName]string, poll bool, err error) {
	g.mu.Lock()
	poll = time.Since(g.lastPoll) >= g.pollEvery
	var waiting []types.NamespacedName
	if poll {
		g.lastPoll = time.Now()
		for k, m := range g.state.Members {
			if m.Phase == PhaseUpgraded {
				waiting = append(waiting, keyOf(k))
			}
		}
	}
	g.mu.Unlock()
	verdicts = map[types.NamespacedName]string{}
	for _, key := range waiting {
		why, err := g.Ready(ctx, key)
		if err != nil {
			return nil, poll, err
		}
		verdicts[key] = why
	}
	return verdicts, poll, nil
}

// judge moves the releases read Ready on, and fails those past the timeout.
func (g *Gate) judge(verdicts map[types.NamespacedName]string, now time.Time) {
	for key, why := range verdicts {
		m, ok := g.state.Members[key.String()]
		if !ok || m.Phase != PhaseUpgraded {
			continue
		}
		switch {
		case why == "":
			g.setPhase(key, m, PhaseReady, "")
		case now.Sub(m.Since.Time) > g.Settings.Timeout:
			g.setPhase(key, m, PhaseFailed, fmt.Sprintf("not Ready within %s: %s", g.Settings.Timeout, why))
		}
	}
	for k, m := range g.state.Members {
		if m.Phase == PhaseAdmitted && g.state.Halted == "" && now.Sub(m.Since.Time) > g.Settings.Timeout {
			g.setPhase(keyOf(k), m, PhaseFailed, fmt.Sprintf("not upgraded within %s (see its conditions)", g.Settings.Timeout))
		}
	}
}

// haltPastBudget halts the rollout when more releases failed than it tolerates, and returns
// the failed ones then.
func (g *Gate) haltPastBudget() []types.NamespacedName {
	if g.state.Halted != "" {
		return nil
	}
	var keys []types.NamespacedName
	var failed []string // with why, in name order
	for k, m := range g.state.Members {
		if m.Phase == PhaseFailed {
			keys, failed = append(keys, keyOf(k)), append(failed, k+": "+m.Message)
		}
	}
	if len(failed) <= g.Settings.MaxFailures {
		return nil
	}
	slices.Sort(failed)
	g.state.Halted = fmt.Sprintf("halted: %d release(s) failed, %d tolerated: %s", len(failed),
		g.Settings.MaxFailures, strings.Join(failed, "; "))
	g.dirty = true
	return keys
}

// keyOf is the release of a member key, which is its key's String(): namespace/name.
func keyOf(member string) types.NamespacedName {
	ns, name, _ := strings.Cut(member, "/")
	return types.NamespacedName{Namespace: ns, Name: name}
}

// waveInFlight reports whether a release of the last wave (of any wave: all) is in flight: still to
// be judged.
func (g *Gate) waveInFlight(all bool) bool {
	for _, m := range g.state.Members {
		if (all || m.Wave == g.state.Wave) && m.inFlight() {
			return true
		}
	}
	return false
}

// admit opens the next wave over the held releases. The first waits until every resource of
// the fleet has been decided once since the start (or the timeout passed: step forgets seen
// then), so that it is chosen from the whole fleet and not from whichever releases were
// reconciled first.
func (g *Gate) admit(ctx context.Context, now time.Time) ([]types.NamespacedName, error) {
	if len(g.held) == 0 {
		return nil, nil
	}
	if g.seen != nil {
		fleet, err := g.Fleet(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range fleet {
			if !g.seen[client.ObjectKeyFromObject(o)] && o.GetDeletionTimestamp() == nil {
				return nil, nil
			}
		}
		g.seen = nil
	}
	candidates := slices.DeleteFunc(slices.Collect(maps.Keys(g.held)), func(k types.NamespacedName) bool {
		_, member := g.state.Members[k.String()]
		return member
	})
	slices.SortFunc(candidates, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	wave := g.state.Wave + 1
	var chosen []types.NamespacedName
	if sel := g.Settings.CanarySelector; wave == 0 && sel != nil {
		chosen = slices.DeleteFunc(slices.Clone(candidates), func(k types.NamespacedName) bool { return !sel.Matches(g.held[k]) })
	}
	if len(chosen) == 0 {
		size := g.Settings.Canaries
		for range max(wave, 0) {
			size *= g.Settings.Growth
		}
		chosen = candidates[:min(size, len(candidates))]
	}
	if len(chosen) == 0 {
		return nil, nil
	}
	g.state.Wave = wave
	for _, k := range chosen {
		g.state.Members[k.String()] = Member{Wave: wave, Phase: PhaseAdmitted, Since: metav1.NewTime(now)}
		delete(g.held, k)
	}
	g.dirty = true
	return chosen, nil
}

// report records an Event on the resource of each release in keys and has every resource whose
// RolloutHeld condition a halt sets or clears (the held ones, and those admitted but not
// upgraded) write its status again. A failure to list the fleet loses only the Events.
func (g *Gate) report(ctx context.Context, st State, keys, held []types.NamespacedName, eventType, reason, message string) {
	fleet, err := g.Fleet(ctx)
	if err != nil {
		logf.FromContext(ctx).Error(err, "cannot list the fleet to report on the rollout", "kind", g.Kind)
	}
	for _, o := range fleet {
		if slices.Contains(keys, client.ObjectKeyFromObject(o)) && g.Recorder != nil {
			g.Recorder.Event(o, eventType, reason, message)
		}
	}
	for _, key := range held {
		g.Nudge(key)
	}
	for k, m := range st.Members {
		if m.Phase == PhaseAdmitted {
			g.Nudge(keyOf(k))
		}
	}
}

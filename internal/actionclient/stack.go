package actionclient

import (
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/shard"
)

// StackOptions configure Stack.
type StackOptions struct {
	Recorder record.EventRecorder
	Metrics  *Metrics
	Digest   DigestOptions
	Unlock   SoleWriter
	// Shard, Claims, Writer and Running serve Claimed; a Shard that is not sharded leaves it out.
	Shard   shard.Shard
	Claims  *shard.Claims
	Writer  client.Writer
	Running shard.Liveness
	// Tap, when set, is given each layer's getter, named after its outermost layer (a Layer
	// constant), as the stack is built from the base up, and what it returns is built on: a
	// test's view of every boundary. Nil in the operator.
	Tap func(layer string, g helmclient.ActionClientGetter) helmclient.ActionClientGetter
	// Waves, when set, holds upgrades back for the chart rollout's waves (Waved).
	Waves WaveGate
	// NoDigests leaves Digested out: every upgrade check is the reconciler's own dry run (and
	// a new chart is not paced).
	NoDigests bool
}

// The layers of Stack, outermost first, by the names Tap is given.
const (
	LayerClaimed          = "Claimed"
	LayerWaved            = "Waved"
	LayerDigested         = "Digested"
	LayerObserved         = "Observed"
	LayerUninstallWaiting = "UninstallWaiting"
	LayerHooksUninstalled = "HooksUninstalled"
	LayerUnlocked         = "Unlocked"
	LayerBase             = "base"
)

// Stack builds the action clients the reconciler uses from the plugins' (base), in this order,
// outermost first:
//
//   - Claimed (when sharded) claims the custom resource for this shard before anything reads
//     or writes its release, and brackets every call below, the record relabelling of Digested
//     included, so that a handover to another shard waits for them and none starts after it;
//   - Waved (when a rollout gate is set) holds back the upgrades a new chart brings until the
//     rollout's wave admits them; it is above Digested to see every upgrade check;
//   - Digested answers the reconciler's dry-run upgrade from digests. It is above the rest so
//     that an answered check costs nothing below it: no Event, no metric, no release read;
//   - Observed reports every action that does run (Events, metrics), including the uninstall
//     wait and the unlocking below, with the error the reconciler will see;
//   - UninstallWaiting holds an uninstall until the release's objects are gone when the custom
//     resource asks for it (uninstall-wait); it reads the release through Unlocked;
//   - HooksUninstalled deletes a release's hook objects after each uninstall below it;
//   - Unlocked repairs a release left pending by an interrupted action before anything reads it;
//   - base, the plugins' action clients (chosen per custom resource by RollbackChoice), each
//     handing Helm a copy of the chart (ChartCopies).
//
// test/integration/stack_test.go holds each layer to its promise under the plugins' reconciler.
func Stack(base helmclient.ActionClientGetter, o StackOptions) helmclient.ActionClientGetter {
	tap := o.Tap
	if tap == nil {
		tap = func(_ string, g helmclient.ActionClientGetter) helmclient.ActionClientGetter { return g }
	}
	g := tap(LayerBase, base)
	g = tap(LayerUnlocked, Unlocked(g, o.Recorder, o.Unlock))
	g = tap(LayerHooksUninstalled, HooksUninstalled(g))
	g = tap(LayerUninstallWaiting, UninstallWaiting(g))
	g = tap(LayerObserved, Observed(g, Events{Recorder: o.Recorder}, o.Metrics))
	if !o.NoDigests {
		g = tap(LayerDigested, Digested(g, o.Digest))
	}
	if o.Waves != nil {
		g = tap(LayerWaved, Waved(g, o.Waves))
	}
	return tap(LayerClaimed, Claimed(g, o.Shard, o.Claims, o.Writer, o.Running))
}

package actionclient

import (
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"k8s.io/client-go/tools/record"
)

// StackOptions configure Stack.
type StackOptions struct {
	Recorder record.EventRecorder
	Metrics  *Metrics
	Digest   DigestOptions
	Unlock   SoleWriter
}

// Stack builds the action clients the reconciler uses from the plugins' (base), in this order,
// outermost first:
//
//   - Digested answers the reconciler's dry-run upgrade from digests. It is outermost so that
//     an answered check costs nothing below it: no Event, no metric, no release read;
//   - Observed reports every action that does run (Events, metrics), including the uninstall
//     wait and the unlocking below, with the error the reconciler will see;
//   - UninstallWaiting holds an uninstall until the release's objects are gone when the custom
//     resource asks for it (uninstall-wait); it reads the release through Unlocked;
//   - Unlocked repairs a release left pending by an interrupted action before anything reads it;
//   - base, the plugins' action clients (chosen per custom resource by RollbackChoice).
func Stack(base helmclient.ActionClientGetter, o StackOptions) helmclient.ActionClientGetter {
	unlocked := Unlocked(base, o.Recorder, o.Unlock)
	waiting := UninstallWaiting(unlocked)
	observed := Observed(waiting, Events{Recorder: o.Recorder}, o.Metrics)
	return Digested(observed, o.Digest)
}

// Package status owns the status of the custom resources: everything that writes it, in what
// order, and what it holds.
//
// Two writers share a status. helm-operator-plugins' status updater writes the conditions of
// the Helm reconciler (Initialized, Deployed, ReleaseFailed, Irreconcilable, Paused) and
// deployedRelease at the end of each of its reconciles; its client is wrapped by PluginWrites.
// The Reconciler writes the rest: the fields and conditions the chart declares (kind.yaml)
// evaluated over the live objects of the release, Ready by the kstatus rules, and
// observedGeneration, the generation the Helm reconciler last applied (AppliedGenerations).
//
// Who writes what, and when:
//   - an install or upgrade: the post hooks tell AppliedGenerations the release's objects and
//     generation; the updater's write then carries the Reconciler's fields too (PluginWrites
//     fills them), and the Reconciler, woken wakeDelay later, finds nothing left to write;
//   - a release object changes (a Deployment becomes available): the Reconciler patches what
//     changed, its events coalesced for coalesceDelay;
//   - the updater rewrites status without the Reconciler's fields (its schema has none):
//     PluginWrites carries them over from the cached object of the version written.
//
// Every write is guarded by the resourceVersion it read, so neither writer overwrites the
// other; the windows (wakeDelay, coalesceDelay) only keep them from conflicting. The updater's shape, which
// this package reads, is pinned by an integration test (TestThePluginsStatusShapeIsTheOneThis
// OperatorReads): an upgrade of the plugins that changes it fails there.
package status

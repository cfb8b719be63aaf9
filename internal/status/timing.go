package status

import "time"

// The two writers of a status are ordered by these windows, not by locks: each write is
// guarded by the resourceVersion it read, and the later writer keeps the earlier one's fields.
const (
	// wakeDelay is how long after a successful Helm action (its post hook) the Reconciler runs.
	// The post hooks run just before helm-operator-plugins' updater writes status, and that write
	// carries the Reconciler's fields already (PluginWrites); a patch of the Reconciler's sent at
	// once would only make the updater's write conflict and retry after its backoff. Waking a
	// moment later lets the updater's write land first, and the Reconciler then writes only what
	// changed since (or what the updater's write could not carry).
	wakeDelay = time.Second
	// coalesceDelay is how long a request of the Reconciler waits in its queue, so that the
	// bursts of events a rollout brings (a Deployment's status changes several times in a
	// second) end in one status write.
	coalesceDelay = 500 * time.Millisecond
	// conflictRetry is how soon the Reconciler tries again after its patch met a newer
	// resourceVersion (the updater wrote in between).
	conflictRetry = coalesceDelay
)

// Package status computes the part of a custom resource's status that the Helm reconciler does
// not own, from the chart's declarations (kind.yaml) and the live objects of its release: the
// declared fields and conditions, Ready by the kstatus rules, observedGeneration (the
// generation the Helm reconciler last applied, AppliedGenerations), and the merge patch that
// writes only what changed. The controller that writes it is controller.StatusReconciler.
package status

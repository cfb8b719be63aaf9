// Package chartapi reads what a chart declares about the custom resource kind it serves, from
// the chart's `kind.yaml`: the CRD's names, printer columns and rules, the status fields and
// conditions (CEL expressions over the custom resource and the live objects of its release), the
// scale subresource, and the checks its values get before a rendering.
//
// The chart is the one place a chart author edits; the Go code here knows no chart. A
// declaration is checked when it is loaded (at the operator's start and by `make manifests`):
// every expression must compile, and must evaluate to its declared type against the chart's own
// renderings (default values and each ci/*-values.yaml) both before the objects exist and
// before they have a status. An error names the file and line.
package chartapi

// Package renderinputs knows everything a Helm rendering reads besides the chart and its
// values, so that a digest of those inputs can stand in for a rendering:
//
//   - the rendering code: the running executable (Helm's engine, the post-renderers, the
//     label added in the kube client), digested once per process (CodeVersion);
//   - the cluster's capabilities, as far as the chart's templates read them: the parsed
//     templates are walked for references to .Capabilities (AnalyseChart);
//   - every object a template read through `lookup`, whatever the template's spelling: the REST
//     config Helm's engine builds its lookup clients from records each read (Recorder, which
//     also lets the release's reach refuse a read before it is sent), and a Tracker watches the
//     metadata of those objects and wakes the custom resources whose rendering read one that
//     changed. A digest says nothing of what a lookup sees: a rendering that looked anything up
//     is rendered again at every check (package actionclient).
//
// A digest built from these inputs equals an earlier one only when a new rendering would read
// the same inputs and so render the same manifest.
package renderinputs

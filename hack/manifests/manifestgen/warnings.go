package manifestgen

import (
	"fmt"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/myproxy-operator/hack/manifests/crdgen"
)

// typoWarnings returns the ValidatingAdmissionPolicy (with its binding) that warns of the keys
// of a kind's spec that no template of its chart reads, nil when nothing is checked, and the
// notes make manifests prints of the spec: which keys the CRD types, which objects it leaves
// open and why, and what the warnings check.
func typoWarnings(chartDir string, gvk schema.GroupVersionKind, ch *chart.Chart, s specSchema,
	crd *apiextv1.CustomResourceDefinition) ([]byte, []string, error) {
	reads, err := crdgen.AnalyseReads(ch)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", chartDir, err)
	}
	var spec *apiextv1.JSONSchemaProps
	if s.spec.Schema != nil {
		p := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		spec = &p
	}
	keys := crdgen.KnownKeys(ch, reads, spec)
	notes := specNotes(s, spec, keys)
	checks, unchecked := keys.Checks()
	if len(checks) == 0 {
		return nil, append(notes, "no typo warnings: "+unchecked), nil
	}
	var paths [][]string
	for _, c := range checks {
		paths = append(paths, append([]string{"spec"}, c.Path...))
	}
	plural := crd.Spec.Names.Plural
	policy, err := crdgen.WarningPolicy(gvk, plural, ch.Name(), checks, keys.TplOfValues() != "", filepath.ToSlash(chartDir))
	if err != nil {
		return nil, nil, err
	}
	note := fmt.Sprintf("typo warnings: ValidatingAdmissionPolicy %s (config/%s) warns, and never refuses, at kubectl apply of a key "+
		"that no values.yaml, comment of it, schema or template names, in %s", crdgen.WarningPolicyName(gvk, plural),
		filepath.ToSlash(filepath.Join(WarningsDir, fmt.Sprintf("%s_%s.yaml", gvk.Group, plural))), crdgen.Compact(paths))
	if whole := keys.ReadWhole(); len(whole) > 0 {
		note += "; nothing is warned of below what templates read whole: " + strings.Join(whole, ", ")
	}
	if at := keys.TplOfValues(); at != "" {
		note += "; the warning allows that a value rendered with tpl (" + at + ") reads the key"
	}
	return policy, append(notes, note), nil
}

// specNotes says what the CRD types of a spec and what it leaves open, and why.
func specNotes(s specSchema, spec *apiextv1.JSONSchemaProps, keys *crdgen.Keys) []string {
	if spec == nil {
		return []string{"spec: any keys and values (no schema)"}
	}
	l := crdgen.SpecLayout(spec)
	var notes []string
	if len(l.Typed) > 0 {
		what := "as the schema says"
		if s.inferred {
			what = "as the type of its value in values.yaml (a number also as a string, or null)"
		}
		notes = append(notes, fmt.Sprintf("spec typed, each %s: %s", what, crdgen.Compact(l.Typed)))
	}
	specPaths := func(paths [][]string) string {
		var out [][]string
		for _, p := range paths {
			out = append(out, append([]string{"spec"}, p...))
		}
		return crdgen.Compact(out)
	}
	if len(l.Open) > 0 {
		why := "the schema leaves them open (no additionalProperties: false), and Helm accepts keys it does not describe"
		if s.inferred {
			why = "inferred: values.yaml is a sample of the values, and templates read keys it does not set"
		}
		notes = append(notes, fmt.Sprintf("spec open (unknown keys kept beside the typed ones), %s: %s", why, specPaths(l.Open)))
	}
	if len(l.Closed) > 0 {
		notes = append(notes, "spec closed (keys not named refused at kubectl apply), by additionalProperties: false: "+specPaths(l.Closed))
	}
	if len(l.Free) > 0 {
		why := "a map, an object of any keys or a value of any type in the schema"
		if s.inferred {
			why = "an empty map, an empty string or null in values.yaml"
		}
		notes = append(notes, fmt.Sprintf("spec free (any keys or value), %s: %s", why, specPaths(l.Free)))
	}
	if undescribed := keys.Undescribed(); len(undescribed) > 0 {
		notes = append(notes, "spec accepts untyped, as keys of open objects, what only values.yaml's comments name or only templates read: "+
			strings.Join(undescribed, ", "))
	}
	if len(l.Required) > 0 {
		notes = append(notes, "spec requires, as the schema does and values.yaml gives no default: "+specPaths(l.Required))
	}
	return notes
}

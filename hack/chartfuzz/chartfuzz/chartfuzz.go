// Package chartfuzz renders a chart with values its values.schema.json admits but that carry
// hostile strings, and checks what no tenant's values may change: the set of objects
// (kind, namespace, name) a rendering yields, their namespace, and that every document is a
// well-formed object. A custom resource's spec is a tenant's input; whatever the schema lets
// through must render harmlessly, or the schema must refuse it.
//
// The schema is the one the kind's CRD is made from (manifestgen.SpecSchemaDocument): the chart's
// values.schema.json, or for a chart without one the schema inferred from its values.yaml, which
// takes a number's key as a string too. Values are made from seeds (the chart's defaults and each
// ci/*-values.yaml, plus the caller's), each filled with one entry in every map the schema leaves
// open, then mutated one string, number or map key at a time with each fragment of Fragments
// (appended, alone, prepended; a number as the string it is written as), and once with every
// string and key mutated together. A mutation the schema refuses is counted and dropped; one it
// admits is rendered and checked against the seed's rendering.
package chartfuzz

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/example/myproxy-operator/hack/manifests/chartrender"
	"github.com/example/myproxy-operator/hack/manifests/manifestgen"
)

// Fragments are the hostile strings: every line break YAML knows, quotes, backslashes, nginx
// and shell syntax, template delimiters, YAML indicators, control and non-ASCII characters.
var Fragments = []string{
	"\n", "\r", "\r\n", "\u0085", "\u2028", "\u2029", "\t", " ", "\x00", "\x1b",
	`"`, "'", `\`, "`", "{", "}", ";", "$", "$host", "${x}", "#", "{{", "}}", "{{ .Release.Name }}",
	": ", "- ", "---", "\n---\nkind: Secret\n", "&a", "*a", "!!binary", "%", "|", ">",
	"ü", "日本", "\U0001F600", "\u202e", "\ufeff",
}

// Rendering is one admitted set of values and what it rendered.
type Rendering struct {
	// Mutation says what was changed from the seed ("" for a seed itself).
	Mutation string
	Values   map[string]any
	Objects  []map[string]any
}

// Finding is an admitted set of values that broke an invariant.
type Finding struct {
	Mutation string
	Problem  string
}

func (f Finding) String() string { return f.Mutation + ": " + f.Problem }

// Report says what was tried and what broke.
type Report struct {
	Tried, Admitted int
	Findings        []Finding
}

// Run fuzzes the chart in chartDir. seeds are value sets besides the chart's own; check, if not
// nil, adds the caller's invariants (nginx -t for an nginx chart), called on every admitted
// rendering with the seed's rendering beside it.
func Run(chartDir string, seeds []map[string]any, check func(r, seed Rendering) error) (Report, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return Report{}, err
	}
	if len(ch.Schema) == 0 {
		// Helm checks no schema then; the CRD checks the inferred one at kubectl apply.
		if ch.Schema, err = manifestgen.SpecSchemaDocument(chartDir); err != nil {
			return Report{}, err
		}
	}
	var root map[string]any
	if len(ch.Schema) > 0 {
		if err := json.Unmarshal(ch.Schema, &root); err != nil {
			return Report{}, fmt.Errorf("values.schema.json: %w", err)
		}
	}
	own, err := chartrender.Render(chartDir)
	if err != nil {
		return Report{}, err
	}
	for _, r := range own {
		seeds = append(seeds, r.Values)
	}
	f := &fuzzer{chart: ch, schema: root, check: check}
	for i, seed := range seeds {
		if err := f.fuzzSeed(fmt.Sprintf("seed %d", i+1), seed); err != nil {
			return f.report, err
		}
	}
	return f.report, nil
}

type fuzzer struct {
	chart  *chart.Chart
	schema map[string]any
	check  func(r, seed Rendering) error
	report Report
}

func (f *fuzzer) fuzzSeed(name string, seed map[string]any) error {
	full, err := chartutil.CoalesceValues(f.chart, clone(seed))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	values := map[string]any(full)
	if filled := clone(values); fill(filled, f.schema) && f.admitted(filled) {
		values = filled
	}
	if !f.admitted(values) {
		return fmt.Errorf("%s: the schema refuses the seed itself", name)
	}
	objs, err := chartrender.RenderValues(f.chart, values)
	if err != nil {
		return fmt.Errorf("%s: rendering the seed: %w", name, err)
	}
	base := Rendering{Mutation: name, Values: values, Objects: objs}
	if msg := f.invariants(base, base); msg != "" {
		f.report.Findings = append(f.report.Findings, Finding{Mutation: name, Problem: msg})
	}
	for _, site := range sites(values, f.schema, "") {
		for _, frag := range Fragments {
			for _, how := range []string{"appended", "alone", "prepended"} {
				mutated := clone(values)
				site.set(mutated, mutate(site.current, frag, how))
				f.try(fmt.Sprintf("%s, %s %q %s", name, site.path, frag, how), mutated, base)
			}
		}
	}
	// Everything at once: the sites found before any change, each with a fragment in turn.
	all := clone(values)
	for i, site := range sites(all, f.schema, "") {
		if !site.number { // a number's key takes few strings: the rest would have the set refused
			site.set(all, mutate(site.current, Fragments[i%len(Fragments)], "appended"))
		}
	}
	f.try(name+", every string and key at once", all, base)
	return nil
}

// try renders admitted values and records what breaks.
func (f *fuzzer) try(mutation string, values map[string]any, base Rendering) {
	f.report.Tried++
	if !f.admitted(values) {
		return
	}
	f.report.Admitted++
	objs, err := chartrender.RenderValues(f.chart, values)
	if err != nil {
		f.report.Findings = append(f.report.Findings, Finding{Mutation: mutation,
			Problem: "admitted by the schema, but the chart does not render: " + err.Error()})
		return
	}
	r := Rendering{Mutation: mutation, Values: values, Objects: objs}
	if msg := f.invariants(r, base); msg != "" {
		f.report.Findings = append(f.report.Findings, Finding{Mutation: mutation, Problem: msg})
	}
}

func (f *fuzzer) admitted(values map[string]any) bool {
	return chartutil.ValidateAgainstSchema(f.chart, values) == nil
}

// invariants returns what r breaks, compared with the seed's rendering base ("" for nothing).
func (f *fuzzer) invariants(r, base Rendering) string {
	var problems []string
	for _, o := range r.Objects {
		apiVersion, _ := o["apiVersion"].(string)
		kind, _ := o["kind"].(string)
		md, _ := o["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		ns, _ := md["namespace"].(string)
		if apiVersion == "" || kind == "" || name == "" {
			problems = append(problems, fmt.Sprintf("a document is not an object with apiVersion, kind and metadata.name: %.200v", o))
		}
		if ns != chartrender.SampleNamespace {
			problems = append(problems, fmt.Sprintf("%s %s is in namespace %q, not the release's", kind, name, ns))
		}
	}
	if got, want := identities(r.Objects), identities(base.Objects); !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("renders %v, the seed %v", got, want))
	}
	if f.check != nil {
		if err := f.check(r, base); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return strings.Join(problems, "; ")
}

// identities are the kind, namespace and name of each object, sorted.
func identities(objs []map[string]any) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		md, _ := o["metadata"].(map[string]any)
		out = append(out, fmt.Sprintf("%v %v/%v", o["kind"], md["namespace"], md["name"]))
	}
	sort.Strings(out)
	return out
}

func mutate(current, frag, how string) string {
	switch how {
	case "alone":
		return frag
	case "prepended":
		return frag + current
	default:
		return current + frag
	}
}

// site is a string value, a number (which the schema may take as a string) or a free map key
// that a tenant chooses.
type site struct {
	path    string
	current string
	number  bool
	set     func(root map[string]any, v string)
}

// asString is a string leaf as it is, and a number as the string it is written as.
func asString(v any) (s string, number, ok bool) {
	switch x := v.(type) {
	case string:
		return x, false, true
	case float64, int, int64:
		return fmt.Sprint(x), true, true
	}
	return "", false, false
}

// sites lists the string leaves of root and the keys of its free maps (maps whose keys the
// schema does not name), each with a setter that finds its place again in a copy of root.
// A key comes after the values below it, so that setting every site in order still finds each.
func sites(root map[string]any, schema map[string]any, path string) []site {
	var out []site
	// walk visits v, found in a root by locate.
	var walk func(v any, s map[string]any, path string, locate func(map[string]any) any)
	walk = func(v any, s map[string]any, path string, locate func(map[string]any) any) {
		switch x := v.(type) {
		case map[string]any:
			props, _ := s["properties"].(map[string]any)
			free, _ := s["additionalProperties"].(map[string]any)
			for _, k := range slices.Sorted(maps.Keys(x)) {
				childSchema, named := props[k].(map[string]any)
				if !named {
					childSchema = free
				}
				child := path + "." + k
				inMap := func(r map[string]any) map[string]any { return locate(r).(map[string]any) }
				if str, number, ok := asString(x[k]); ok {
					out = append(out, site{path: child, current: str, number: number, set: func(r map[string]any, nv string) { inMap(r)[k] = nv }})
				} else {
					walk(x[k], childSchema, child, func(r map[string]any) any { return inMap(r)[k] })
				}
				if free != nil && !named {
					out = append(out, site{path: child + " (key)", current: k, set: func(r map[string]any, nk string) {
						m := inMap(r)
						m[nk] = m[k]
						if nk != k {
							delete(m, k)
						}
					}})
				}
			}
		case []any:
			items, _ := s["items"].(map[string]any)
			for i := range x {
				child := fmt.Sprintf("%s[%d]", path, i)
				inList := func(r map[string]any) []any { return locate(r).([]any) }
				if str, number, ok := asString(x[i]); ok {
					out = append(out, site{path: child, current: str, number: number, set: func(r map[string]any, nv string) { inList(r)[i] = nv }})
				} else {
					walk(x[i], items, child, func(r map[string]any) any { return inList(r)[i] })
				}
			}
		}
	}
	walk(root, schema, path, func(r map[string]any) any { return r })
	return out
}

// fill adds, where the schema allows and the values lack it, one entry to every map of strings
// (so that its keys and values are fuzzed too); it reports whether it added anything.
func fill(v any, s map[string]any) bool {
	added := false
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			ps, _ := p.(map[string]any)
			if _, ok := x[name]; !ok && stringMap(ps) {
				x[name] = map[string]any{"k": "v"}
				added = true
			}
		}
		if len(x) == 0 && stringMap(s) {
			x["k"] = "v"
			added = true
		}
		for name, child := range x {
			ps, _ := props[name].(map[string]any)
			added = fill(child, ps) || added
		}
	case []any:
		items, _ := s["items"].(map[string]any)
		for _, item := range x {
			added = fill(item, items) || added
		}
	}
	return added
}

// stringMap tells whether s is an object schema whose free values are strings.
func stringMap(s map[string]any) bool {
	ap, _ := s["additionalProperties"].(map[string]any)
	return s["type"] == "object" && ap["type"] == "string"
}

// clone copies the maps and lists of v; leaves keep their types.
func clone(v map[string]any) map[string]any {
	return deepCopy(v).(map[string]any)
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case chartutil.Values:
		return deepCopy(map[string]any(x))
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	default:
		return x
	}
}

package chartapi

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"
)

// Version is one API version of the kind (kind.yaml `versions`, newest first). The first is the
// chart's own: served, stored, its spec the chart's values. Each older one is a version users'
// resources were written in: the CRD keeps serving it with the schema it was served with, and
// its Changes say how a spec of it becomes a spec of the version before it in the list; the way
// back is their inverse. A spec field the changes do not name keeps its path.
type Version struct {
	Name string `yaml:"name"`
	// Served: false stops serving an old version (its stored resources are migrated first).
	Served *bool `yaml:"served"`
	// Changes from this version to the next newer one.
	Changes []Change `yaml:"changes"`
	// Breaking accepts changes of the chart's own version that resources already stored may not
	// fit (an alpha API's narrowed enum), each with its reason; only the first version has them.
	Breaking []Breaking `yaml:"breaking"`

	// Published is an older version as its CRD served it (name, schema, subresources, columns),
	// read from the chart's versions/<name>.yaml, which make manifests writes once, from the CRD
	// it replaces, when the version stops being the chart's own; nil until then.
	Published map[string]any `yaml:"-"`
}

// VersionsDir holds, in a chart, each older version of its kind as its CRD served it.
const VersionsDir = "versions"

// PublishedFile is where a chart keeps an older version as its CRD served it.
func PublishedFile(chartDir, version string) string {
	return filepath.Join(chartDir, VersionsDir, version+".yaml")
}

// loadPublished reads the version as its CRD served it, when the chart keeps it.
func (v *Version) loadPublished(chartDir string) error {
	raw, err := os.ReadFile(PublishedFile(chartDir, v.Name))
	if err == nil {
		err = sigsyaml.Unmarshal(raw, &v.Published)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %w", PublishedFile(chartDir, v.Name), err)
	}
	return nil
}

// SpecSchema is the spec schema an older version was served with; nil when the chart keeps none.
func (v Version) SpecSchema() map[string]any {
	spec, _, _ := unstructured.NestedMap(v.Published, "schema", "openAPIV3Schema", "properties", "spec")
	return spec
}

// Change is one change of a spec from its version to the next newer one; exactly one is set.
type Change struct {
	// Move takes the value at From to To (a rename, or a move into another object).
	Move *Move `yaml:"move"`
	// Compute sets To from an expression over the older spec, and back.
	Compute *Compute `yaml:"compute"`
	// Remove drops a field the newer version has no place for. The value is kept on the
	// resource (an annotation) and comes back when the resource is read at its version again.
	Remove *Remove `yaml:"remove"`
}

// Move renames or moves a value: dotted paths in the spec.
type Move struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
}

// Compute sets To to Expression, evaluated with self the older spec; it replaces the fields
// From. Back computes each of them again from the newer spec (self), so that a round trip gives
// back what was stored. An expression that gives null or optional.none() leaves its field out.
type Compute struct {
	To         string          `yaml:"to"`
	From       []string        `yaml:"from"`
	Expression Expr            `yaml:"expression"`
	Back       map[string]Expr `yaml:"back"`
}

// Remove drops Field, saying Why.
type Remove struct {
	Field string `yaml:"field"`
	Why   string `yaml:"why"`
}

// Breaking is a field whose narrowed schema is accepted, and Why.
type Breaking struct {
	Field string `yaml:"field"`
	Why   string `yaml:"why"`
}

// IsServed reports whether the version is served (the default).
func (v Version) IsServed() bool { return v.Served == nil || *v.Served }

// versionName is the form of a Kubernetes API version (v1, v1beta2, v2alpha1).
var versionName = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)

// fieldPath is a dotted path of spec keys.
var fieldPath = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// CheckVersions checks the versions' declaration against the version watches.yaml names for the
// kind, which must be the newest: the one the operator reconciles and the chart renders.
func (k *Kind) CheckVersions(watched string) error {
	if len(k.Versions) == 0 {
		return nil
	}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: versions: "+format, append([]any{cmp.Or(k.File, FileName)}, args...)...))
	}
	if k.Versions[0].Name != watched {
		fail("the first is %s, but watches.yaml watches %s: the first version is the chart's own, which the operator reconciles",
			k.Versions[0].Name, watched)
	}
	if !k.Versions[0].IsServed() || len(k.Versions[0].Changes) > 0 {
		fail("%s, the chart's own version, is served and has no changes", k.Versions[0].Name)
	}
	seen := map[string]bool{}
	for i, v := range k.Versions {
		if !versionName.MatchString(v.Name) || seen[v.Name] {
			fail("%q: a version is named once, as v1, v1beta1 or v2alpha1", v.Name)
		}
		seen[v.Name] = true
		if i > 0 && len(v.Breaking) > 0 {
			fail("%s: only the chart's own version accepts breaking changes", v.Name)
		}
		for _, p := range v.paths() {
			if !fieldPath.MatchString(p) {
				fail("%s: %q: a field is a dotted path of spec keys (tls.secretName)", v.Name, p)
			}
		}
		for j, c := range v.Changes {
			if set := btoi(c.Move != nil) + btoi(c.Compute != nil) + btoi(c.Remove != nil); set != 1 {
				fail("%s: changes[%d]: one of move, compute or remove", v.Name, j)
			} else if c.Remove != nil && strings.TrimSpace(c.Remove.Why) == "" {
				fail("%s: changes[%d]: remove %s says why", v.Name, j, c.Remove.Field)
			} else if c.Compute != nil && !slices.Equal(slices.Sorted(maps.Keys(c.Compute.Back)), slices.Sorted(slices.Values(c.Compute.From))) {
				fail("%s: changes[%d]: compute %s has a back expression for each of its from fields, and no other", v.Name, j, c.Compute.To)
			}
		}
	}
	return errors.Join(errs...)
}

// paths are the fields the version's changes and accepted breaking changes name.
func (v Version) paths() []string {
	var out []string
	for _, c := range v.Changes {
		switch {
		case c.Move != nil:
			out = append(out, c.Move.From, c.Move.To)
		case c.Compute != nil:
			out = append(append(out, c.Compute.To), c.Compute.From...)
		case c.Remove != nil:
			out = append(out, c.Remove.Field)
		}
	}
	for _, b := range v.Breaking {
		out = append(out, b.Field)
	}
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// compileVersions compiles the expressions of the versions' changes.
func (c *Compiled) compileVersions(env *cel.Env) error {
	var errs []error
	compile := func(v Version, what string, e Expr) {
		p, err := compileOne(env, e, cel.DynType) // an empty expression does not compile
		if err != nil {
			errs = append(errs, c.Kind.errorAt(e.Line, "versions["+v.Name+"]."+what, err))
		}
		c.programs[e.Source] = p
	}
	for _, v := range c.Kind.Versions {
		for _, ch := range v.Changes {
			if ch.Compute == nil {
				continue
			}
			compile(v, "compute "+ch.Compute.To, ch.Compute.Expression)
			for f, e := range ch.Compute.Back {
				compile(v, "compute "+ch.Compute.To+" back "+f, e)
			}
		}
	}
	return errors.Join(errs...)
}

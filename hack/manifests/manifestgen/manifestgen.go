// Package manifestgen writes what `make manifests` generates from watches.yaml and the charts it
// names: one CRD per entry (hack/manifests/crdgen) and, for a kind whose spec has objects with
// keys to check, the ValidatingAdmissionPolicy that warns of keys no template reads
// (crd/warnings), the CRD kustomization listing them, the manager's ClusterRole, derived from
// every chart's rendered kinds, and the editor and viewer roles of each kind with the rbac
// kustomization listing them; and it sets the resources of the project file (PROJECT) to the
// watched kinds. Adding a kind is a chart, a watches.yaml entry and `make manifests`, which
// says per kind what its spec schema types, leaves open and why, what the warnings check, and
// whether the chart's fixed object names allow one custom resource per namespace or per cluster.
package manifestgen

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/myproxy-operator/hack/manifests/chartrender"
	"github.com/example/myproxy-operator/hack/manifests/crdgen"
	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/watchesfile"
)

// Paths of the generated files, below the kustomize config directory.
const (
	CRDDir = "crd/bases"
	// WarningsDir holds each kind's ValidatingAdmissionPolicy that warns of the spec keys no
	// template reads (crdgen.WarningPolicy), installed with the CRDs.
	WarningsDir       = "crd/warnings"
	CRDKustomization  = "crd/kustomization.yaml"
	ManagerRole       = "rbac/role.yaml"
	valuesSchemaFile  = chartapi.SpecFromValuesSchema
	valuesFile        = "values.yaml"
	crdKustomizeIntro = "# The CRDs of every watches.yaml entry and of its chart's crds/ folders, and the policies that warn of\n" +
		"# spec keys no template reads (warnings/; not in OLM bundles); generated with bases/ by `make manifests`.\n"
)

// Kind is one generated kind.
type Kind struct {
	GVK    schema.GroupVersionKind
	Plural string
	// Namespaced is the CRD's scope.
	Namespaced bool
	Rendered   []schema.GroupVersionKind // what its chart renders
	LookedUp   []schema.GroupVersionKind // what its templates read with lookup
	// Grants are what its chart's Roles and ClusterRoles grant: whoever creates them must hold it.
	Grants []rule
	// ServiceAccount is the one its releases run as (watches.yaml serviceAccountName), or "".
	ServiceAccount string
	// Converts: its CRD serves more than one version, converted by the operator's webhook.
	Converts bool
}

// Previous reads the CRD a generated one replaces, by name; nil when there is none.
type Previous func(name string) (*apiextv1.CustomResourceDefinition, error)

// Options change what Generate reads.
type Options struct {
	// Previous reads the CRDs the generated ones replace (nil: none): each is checked against
	// it, and keeps its older versions (crdgen.Evolve).
	Previous Previous
	// ChartDir, when set, serves the kind whose chart has its chart's name (a new chart, before
	// it ships: make preview).
	ChartDir string
}

// watches loads the watches file, with the chart of ChartDir in place.
func (o Options) watches(path string) ([]watchesfile.Watch, error) {
	ws, err := watchesfile.Load(path)
	if err == nil && o.ChartDir != "" {
		ws, err = watchesfile.WithChart(ws, o.ChartDir)
	}
	return ws, err
}

// Generate returns the generated files by path below configDir (such as "crd/bases/x.yaml"),
// after checking every declaration as the operator does at start, and a note per kind saying
// where its spec schema came from and why.
func Generate(watchesPath string, o Options) (files map[string][]byte, notes []string, err error) {
	ws, err := o.watches(watchesPath)
	if err != nil {
		return nil, nil, err
	}
	files = map[string][]byte{}
	seen := map[schema.GroupKind]string{}
	var kinds []Kind
	var bases []string
	var outOfReach []error
	for _, w := range ws {
		gk := w.GroupKind()
		if other, dup := seen[gk]; dup {
			return nil, nil, fmt.Errorf("%s: %s is watched twice (versions %s and %s): a kind is watched at its newest version, and kind.yaml declares the older ones",
				watchesPath, gk, other, w.Version)
		}
		seen[gk] = w.Version
		decl, err := chartrender.LoadChecked(w.ChartPath, w.GroupVersionKind)
		if err != nil {
			return nil, nil, err
		}
		ch, err := loader.Load(w.ChartPath)
		if err != nil {
			return nil, nil, err
		}
		spec, err := specSchemaOf(w.ChartPath, ch, decl.Kind)
		if err != nil {
			return nil, nil, err
		}
		notes = append(notes, fmt.Sprintf("%s: spec schema %s", gk, spec.why))
		crd, crdNotes, kept, err := kindCRD(w, decl, spec, o.Previous)
		if err != nil {
			return nil, nil, err
		}
		maps.Copy(files, kept)
		for _, n := range crdNotes {
			notes = append(notes, fmt.Sprintf("%s: %s", gk, n))
		}
		sources := []string{filepath.ToSlash(spec.source)}
		if decl.Kind.File != "" {
			sources = append(sources, filepath.ToSlash(decl.Kind.File))
		}
		raw, err := crdgen.Marshal(crd, sources...)
		if err != nil {
			return nil, nil, err
		}
		base := fmt.Sprintf("%s_%s.yaml", w.Group, crd.Spec.Names.Plural)
		files[filepath.Join(CRDDir, base)] = raw
		bases = append(bases, "bases/"+base)
		warnings, specNotes, err := typoWarnings(w.ChartPath, w.GroupVersionKind, ch, spec, crd)
		if err != nil {
			return nil, nil, err
		}
		for _, n := range specNotes {
			notes = append(notes, fmt.Sprintf("%s: %s", gk, n))
		}
		if warnings != nil {
			files[filepath.Join(WarningsDir, base)] = warnings
			bases = append(bases, "warnings/"+base)
		}
		own, err := chartCRDs(w.ChartPath)
		if err != nil {
			return nil, nil, err
		}
		for name, raw := range own {
			path := filepath.Join(CRDDir, name)
			if _, dup := files[path]; dup {
				return nil, nil, fmt.Errorf("%s: its crds/ folder defines %s, which another kind or chart already does", w.ChartPath, name)
			}
			files[path] = raw
			bases = append(bases, "bases/"+name)
		}
		renderings, err := chartrender.Render(w.ChartPath)
		if err != nil {
			return nil, nil, err
		}
		if err := checkReach(gk, w.ChartPath, w.Reach, renderings); err != nil {
			// Told with every other kind's, so that one run of make manifests names all it needs.
			outOfReach = append(outOfReach, err)
			continue
		}
		perNamespace, perCluster, err := fixedNames(ch, renderings)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", w.ChartPath, err)
		}
		if len(perCluster) > 0 {
			notes = append(notes, fmt.Sprintf("%s: one custom resource per cluster: the chart names objects without the release's name, "+
				"so a second %s anywhere in the cluster renders the same ones: %s", gk, gk.Kind, strings.Join(perCluster, ", ")))
		}
		if len(perNamespace) > 0 {
			notes = append(notes, fmt.Sprintf("%s: one custom resource per namespace: the chart names objects without the release's name, "+
				"so a second %s in a namespace renders the same ones: %s", gk, gk.Kind, strings.Join(perNamespace, ", ")))
		}
		// The RBAC covers what a tenant may switch on, beyond the renderings checked above.
		granted := renderings
		if on, err := chartrender.SwitchedOn(w.ChartPath); err != nil {
			notes = append(notes, fmt.Sprintf("%s: RBAC covers the default values and ci/*-values.yaml only: %v", gk, err))
		} else {
			on, refused := withinReach(w.Reach, on)
			for _, err := range refused {
				notes = append(notes, fmt.Sprintf("%s: with every boolean value true: %v: no right granted for it (%s)", gk, err, allowedBy(err)))
			}
			granted = append(slices.Clone(renderings), on)
		}
		grants, grantNotes := chartGrants(granted)
		for _, n := range grantNotes {
			notes = append(notes, fmt.Sprintf("%s: %s", gk, n))
		}
		kinds = append(kinds, Kind{GVK: w.GroupVersionKind, Plural: crd.Spec.Names.Plural, Converts: len(crd.Spec.Versions) > 1,
			Namespaced: crd.Spec.Scope == apiextv1.NamespaceScoped, Rendered: chartrender.Kinds(granted),
			LookedUp: chartrender.LookedUp(granted), Grants: grants, ServiceAccount: w.ServiceAccountName})
	}
	if len(outOfReach) > 0 {
		return nil, notes, errors.Join(outOfReach...)
	}
	sort.Strings(bases)
	files[CRDKustomization] = []byte(crdKustomizeIntro + "resources:\n- " + strings.Join(bases, "\n- ") + "\n")
	files[ManagerRole] = Role(kinds)
	for path, raw := range Webhook(kinds) {
		files[path] = raw
	}
	for path, raw := range UserRoles(kinds) {
		files[path] = raw
	}
	project, err := Project(projectPath(watchesPath), kinds)
	if err != nil {
		return nil, nil, err
	}
	if project != nil {
		files[ProjectFile] = project
	}
	return files, notes, nil
}

// kindCRD is the CRD of a watched kind with its older versions (crdgen.Evolve, against the CRD
// previous reads), what it notes, and the older versions its chart is to keep, by file.
func kindCRD(w watchesfile.Watch, decl *chartapi.Compiled, spec specSchema, previous Previous) (
	*apiextv1.CustomResourceDefinition, []string, map[string][]byte, error) {
	crd, rewritten, err := crdgen.Generate(w.GroupVersionKind, decl.Kind, spec.spec)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", spec.source, err)
	}
	var replaced *apiextv1.CustomResourceDefinition
	if previous != nil {
		if replaced, err = previous(crd.Name); err != nil {
			return nil, nil, nil, err
		}
	}
	crd, evolved, kept, err := crdgen.Evolve(crd, replaced, decl, w.ChartPath)
	files := map[string][]byte{}
	for path, raw := range kept {
		abs, absErr := filepath.Abs(path) // written where the chart is, not below config
		files[abs], err = raw, errors.Join(err, absErr)
	}
	return crd, append(rewritten, evolved...), files, err
}

// Write writes the generated files below configDir (or where their path, absolute, says: the
// older versions a chart keeps).
func Write(configDir string, files map[string][]byte) error {
	for path, raw := range files {
		full := path
		if !filepath.IsAbs(path) {
			full = filepath.Join(configDir, path)
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}

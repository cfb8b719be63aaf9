package integration

import (
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/example/myproxy-operator/test/harness"
)

// The wrapper types of docs/architecture.md are every type of the operator's linked packages
// that embeds a value and declares a method of that value's own: a type that stands in for
// another implementation and intercepts it. The doc's list is held equal to the code.
func TestTheArchitectureNamesEveryWrapperType(t *testing.T) {
	found := wrapperTypes(t)
	named := namedWrappers(t)
	if !slices.Equal(named, found) {
		t.Errorf("docs/architecture.md names wrapper types %v; the code has %v", named, found)
	}
	if len(found) > 6 {
		t.Errorf("%d wrapper types, more than 6: %v", len(found), found)
	}
}

// wrapperTypes type-checks each of this module's packages that the operator links, its imports
// read from the export data the go command builds, and returns its wrapper types as
// package.Type, sorted.
func wrapperTypes(t *testing.T) []string {
	t.Helper()
	all := linkedPackages(t)
	exports := map[string]string{}
	var ours []linkedPackage
	for _, p := range all {
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path+"/" == modulePath {
			ours = append(ours, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) })
	var wrappers []string
	for _, p := range ours {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		checked, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, nil)
		if err != nil {
			t.Fatalf("type-checking %s: %v", p.ImportPath, err)
		}
		for _, name := range checked.Scope().Names() {
			if named, ok := checked.Scope().Lookup(name).Type().(*types.Named); ok && wraps(named) {
				wrappers = append(wrappers, checked.Name()+"."+name)
			}
		}
	}
	slices.Sort(wrappers)
	return wrappers
}

// wraps reports whether a struct type embeds a value one of whose methods it declares itself.
func wraps(named *types.Named) bool {
	st, ok := named.Underlying().(*types.Struct)
	if !ok {
		return false
	}
	own := map[string]bool{}
	for i := range named.NumMethods() {
		own[named.Method(i).Name()] = true
	}
	for i := range st.NumFields() {
		if f := st.Field(i); f.Embedded() {
			typ := f.Type()
			if _, ok := typ.Underlying().(*types.Struct); ok {
				typ = types.NewPointer(typ) // its methods of either receiver
			}
			embedded := types.NewMethodSet(typ)
			for j := range embedded.Len() {
				if own[embedded.At(j).Obj().Name()] {
					return true
				}
			}
		}
	}
	return false
}

// namedWrappers returns the types the table of section "Wrapper types" of docs/architecture.md
// names in its first column, sorted.
func namedWrappers(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, body, found := strings.Cut(string(doc), "\n### Wrapper types\n")
	if !found {
		t.Fatal("docs/architecture.md has no section \"Wrapper types\"")
	}
	body, _, _ = strings.Cut(body, "\n#")
	named := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if cell, ok := strings.CutPrefix(line, "| "); ok {
			first, _, _ := strings.Cut(cell, " |")
			for _, m := range regexp.MustCompile("`([a-z]+\\.[A-Za-z]+)`").FindAllStringSubmatch(first, -1) {
				named[m[1]] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(named))
}

// linkedPackage is a package the operator links, as go list describes it.
type linkedPackage struct {
	ImportPath, Dir, Export string
	GoFiles                 []string
	Module                  *struct{ Path string }
}

// linkedPackages lists every package the operator links, with its export data built.
func linkedPackages(t *testing.T) []linkedPackage {
	t.Helper()
	list := exec.Command("go", "list", "-deps", "-export", "-json=ImportPath,Dir,GoFiles,Export,Module", "./cmd")
	list.Dir = harness.RepoRoot()
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []linkedPackage
	for dec := json.NewDecoder(strings.NewReader(string(out))); dec.More(); {
		var p linkedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

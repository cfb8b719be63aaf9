package integration

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Every Helm action the operator runs is Helm 4's: of this module's packages the operator links,
// only the file of the seam with helm-operator-plugins' reconciler imports Helm 3 (its types),
// and the action client imports Helm 4's actions.
func TestOnlyTheSeamImportsHelm3(t *testing.T) {
	var helm3, helm4Actions []string
	for _, p := range linkedPackages(t) {
		if p.Module == nil || p.Module.Path != strings.TrimSuffix(modulePath, "/") {
			continue
		}
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(p.Dir, name), nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				file := strings.TrimPrefix(p.ImportPath, modulePath) + "/" + name
				switch {
				case strings.HasPrefix(path, "helm.sh/helm/v3/"):
					helm3 = append(helm3, file)
				case path == "helm.sh/helm/v4/pkg/action":
					helm4Actions = append(helm4Actions, file)
				}
			}
		}
	}
	helm3 = slices.Compact(slices.Sorted(slices.Values(helm3)))
	if want := []string{"internal/actionclient/seam.go"}; !slices.Equal(helm3, want) {
		t.Errorf("linked files importing Helm 3: %v, want only %v", helm3, want)
	}
	if !slices.Contains(helm4Actions, "internal/actionclient/client.go") {
		t.Errorf("the action client does not run Helm 4's actions: files importing helm.sh/helm/v4/pkg/action: %v", helm4Actions)
	}
}

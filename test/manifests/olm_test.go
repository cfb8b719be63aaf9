package manifests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/example/myproxy-operator/test/harness"
)

// The committed bundle passes operator-sdk's validators, the operatorframework suite included.
func TestBundleValidates(t *testing.T) {
	sdk := harness.Tool(t, "OPERATOR_SDK", "operator-sdk")
	harness.Run(t, nil, sdk, "bundle", "validate", "./bundle", "--select-optional", "suite=operatorframework")
}

// The committed bundle is what `make bundle` generates from config/ today (createdAt aside):
// make render-bundle, the step of make bundle that writes it, run into a temporary folder.
func TestBundleIsUpToDate(t *testing.T) {
	work := t.TempDir()
	out := filepath.Join(work, "bundle")
	env := []string{"OPERATOR_SDK=" + harness.Tool(t, "OPERATOR_SDK", "operator-sdk")}
	harness.Run(t, env, "make", "-s", "--no-print-directory", "render-bundle", "BUNDLE_CONTEXT="+work)
	if dockerfile, err := os.ReadFile(filepath.Join(work, "bundle.Dockerfile")); err != nil {
		t.Error(err)
	} else if committed, _ := os.ReadFile(filepath.Join(harness.RepoRoot(), "bundle.Dockerfile")); string(committed) != string(dockerfile) {
		t.Error("bundle.Dockerfile is out of date: run make bundle and commit it")
	}
	createdAt := regexp.MustCompile(`(?m)^\s*createdAt: .*$`)
	err := filepath.WalkDir(filepath.Join(harness.RepoRoot(), "bundle", "manifests"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		committed, _ := os.ReadFile(path)
		fresh, readErr := os.ReadFile(filepath.Join(out, "manifests", d.Name()))
		if readErr != nil {
			t.Errorf("bundle/manifests/%s is no longer generated: run make bundle", d.Name())
			return nil
		}
		if createdAt.ReplaceAllString(string(committed), "") != createdAt.ReplaceAllString(string(fresh), "") {
			t.Errorf("bundle/manifests/%s is out of date with config/: run make bundle and commit it", d.Name())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	generated, _ := os.ReadDir(filepath.Join(out, "manifests"))
	committed, _ := os.ReadDir(filepath.Join(harness.RepoRoot(), "bundle", "manifests"))
	if len(generated) != len(committed) {
		t.Errorf("make bundle generates %d manifests, bundle/ has %d: run make bundle", len(generated), len(committed))
	}
}

// The CSV carries what OperatorHub shows and what OLM needs to install the operator right.
func TestCSVIsComplete(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "bundle", "manifests", "myproxy-operator.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	csv := string(raw)
	for _, want := range []string{
		"displayName: MyProxy Operator", "description: |", "base64data:", "keywords:", "maintainers:", "links:",
		"capabilities: Seamless Upgrades", `"kind": "MyProxy"`, "specDescriptors:", "statusDescriptors:",
		"type: AllNamespaces", "clusterPermissions:", "minKubeVersion:",
	} {
		if !strings.Contains(csv, want) {
			t.Errorf("the CSV lacks %q", want)
		}
	}
	// Install modes match what the operator supports: WATCH_NAMESPACE takes one, several or all.
	for _, mode := range []string{"OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces"} {
		if !regexp.MustCompile(`supported: true\s+type: ` + mode).MatchString(csv) {
			t.Errorf("install mode %s is not supported in the CSV", mode)
		}
	}
}

// make catalog renders a file-based catalog from the bundle that opm validates.
func TestCatalogValidates(t *testing.T) {
	env := []string{"OPM=" + harness.Tool(t, "OPM", "opm")}
	out := harness.Run(t, env, "make", "-s", "--no-print-directory", "catalog", "CATALOG_CONTEXT="+t.TempDir())
	if !strings.Contains(out, "is valid: myproxy-operator.v") {
		t.Errorf("catalog: %s", out)
	}
}

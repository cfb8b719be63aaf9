package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/myproxy-operator/hack/manifests/manifestgen"
	"github.com/example/myproxy-operator/test/harness"
)

// A project with a kind whose chart gets a policy that warns of spec keys no template reads
// (config/crd/warnings) installs it with the CRDs (make install: config/crd) and with the
// operator (make deploy: config/default, its name prefix carried into the binding), and leaves
// it out of the OLM bundle (config/manifests), which cannot carry a ValidatingAdmissionPolicy
// and still validates.
func TestWarningPoliciesInstallWithTheCRDsButNotInTheBundle(t *testing.T) {
	root, dir := harness.RepoRoot(), t.TempDir()
	harness.CopyDir(t, filepath.Join(root, "config"), filepath.Join(dir, "config"))
	project, err := os.ReadFile(filepath.Join(root, "PROJECT"))
	if err != nil {
		t.Fatal(err)
	}
	watches := filepath.Join(dir, "watches.yaml")
	for path, content := range map[string][]byte{filepath.Join(dir, "PROJECT"): project, watches: []byte(
		"- group: gateway.example.com\n  version: v1alpha1\n  kind: MyProxy\n  chart: " + filepath.Join(root, "helm-charts", "myproxy") + "\n" +
			"- group: corpus.example.com\n  version: v1\n  kind: Undeclared\n  chart: " +
			filepath.Join(root, "test", "integration", "testdata", "corpus", "undeclared") + "\n")} {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, _, err := manifestgen.Generate(watches, manifestgen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := manifestgen.Write(filepath.Join(dir, "config"), files); err != nil {
		t.Fatal(err)
	}
	kustomize := harness.Tool(t, "KUSTOMIZE", "kustomize")
	policies := func(overlay string) map[string]string {
		out := map[string]string{}
		for _, o := range decodeAll(t, harness.Run(t, nil, kustomize, "build", filepath.Join(dir, "config", overlay))) {
			if strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
				name, _, _ := unstructured.NestedString(o.Object, "spec", "policyName")
				out[o.GetKind()+" "+o.GetName()] = name
			}
		}
		return out
	}
	const name = "unread-keys.undeclareds.corpus.example.com"
	for overlay, want := range map[string]map[string]string{
		"crd": {"ValidatingAdmissionPolicy " + name: "", "ValidatingAdmissionPolicyBinding " + name: name},
		"default": {"ValidatingAdmissionPolicy myproxy-operator-" + name: "",
			"ValidatingAdmissionPolicyBinding myproxy-operator-" + name: "myproxy-operator-" + name},
		"manifests": {},
	} {
		got := policies(overlay)
		if len(got) != len(want) {
			t.Errorf("config/%s renders the policies %v, want %v", overlay, got, want)
			continue
		}
		for k, v := range want {
			if p, ok := got[k]; !ok || p != v {
				t.Errorf("config/%s renders the policies %v, want %v", overlay, got, want)
			}
		}
	}
	env := []string{"OPERATOR_SDK=" + harness.Tool(t, "OPERATOR_SDK", "operator-sdk"), "KUSTOMIZE=" + kustomize, "WORK=" + dir}
	harness.Run(t, env, "bash", "-c", `set -e
		"$KUSTOMIZE" build "$WORK/config/manifests" | (cd "$WORK" && "$OPERATOR_SDK" generate bundle -q --overwrite \
		  --version 0.1.0 --channels=alpha --default-channel=alpha --output-dir bundle >/dev/null)
		cd "$WORK" && "$OPERATOR_SDK" bundle validate ./bundle >/dev/null`)
	bundled, err := os.ReadDir(filepath.Join(dir, "bundle", "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range bundled {
		raw, err := os.ReadFile(filepath.Join(dir, "bundle", "manifests", f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "kind: ValidatingAdmissionPolicy") {
			t.Errorf("the bundle carries a policy: bundle/manifests/%s", f.Name())
		}
	}
}

package manifestgen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: SINGULARs.parts.example.com
spec:
  group: parts.example.com
  names: {kind: KIND, plural: SINGULARs, singular: SINGULAR, listKind: KINDList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        SCHEMA
`

// A chart's crds/ folder, and its subcharts', become CRDs that make install installs, each
// checked by the apiserver's validation; the release never installs them.
func TestChartCRDsAreInstalledWithTheKinds(t *testing.T) {
	dir, chart, write := testChart(t, map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"})
	for _, d := range []string{"crds", "charts/sub/crds", "charts/sub/templates"} {
		if err := os.MkdirAll(filepath.Join(chart, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(chart, "crds", "widgets.yaml"), sprintfCRD("widget", "Widget", "x-kubernetes-preserve-unknown-fields: true"))
	write(filepath.Join(chart, "charts", "sub", "Chart.yaml"), "apiVersion: v2\nname: sub\nversion: 0.1.0\n")
	write(filepath.Join(chart, "charts", "sub", "crds", "gadgets.yaml"), sprintfCRD("gadget", "Gadget", "x-kubernetes-preserve-unknown-fields: true"))
	watches := filepath.Join(dir, "watches.yaml")
	write(watches, "- group: example.com\n  version: v1\n  kind: Thing\n  chart: "+chart+"\n")
	files, _, err := Generate(watches, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"parts.example.com_widgets.yaml", "parts.example.com_gadgets.yaml"} {
		if !strings.Contains(string(files[filepath.Join(CRDDir, name)]), "kind: CustomResourceDefinition") {
			t.Errorf("%s not written; files: %v", name, keys(files))
		}
		if !strings.Contains(string(files[CRDKustomization]), "bases/"+name) {
			t.Errorf("%s not in the CRD kustomization:\n%s", name, files[CRDKustomization])
		}
	}

	// One the apiserver would refuse (a property without a type) stops the generation, naming it.
	write(filepath.Join(chart, "crds", "widgets.yaml"), sprintfCRD("widget", "Widget", "properties: {spec: {description: untyped}}"))
	if _, _, err := Generate(watches, Options{}); err == nil || !strings.Contains(err.Error(), "crds/widgets.yaml") || !strings.Contains(err.Error(), "Required value") {
		t.Errorf("error %v, want the apiserver's refusal naming crds/widgets.yaml", err)
	}
}

func sprintfCRD(singular, kind, schema string) string {
	return strings.NewReplacer("SINGULAR", singular, "KIND", kind, "SCHEMA", schema).Replace(widgetCRD)
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A kind a tenant may switch on (a value false by default, or a boolean only the schema names)
// is granted; one the watch's reach would refuse is not, and make manifests says so.
func TestWhatValuesSwitchOnIsGranted(t *testing.T) {
	dir, chart, write := testChart(t, map[string]string{
		"cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n",
		"pdb.yaml": "{{ if .Values.pdb.enabled }}apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: {{ .Release.Name }}\n{{ end }}",
		"monitor.yaml": "{{ if .Values.metrics.enabled }}apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {{ .Release.Name }}\n" +
			"---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {{ .Release.Name }}\n{{ end }}",
	})
	write(filepath.Join(chart, "values.yaml"), "pdb:\n  enabled: false\nmetrics: {}\n")
	write(filepath.Join(chart, "values.schema.json"), `{"type":"object","properties":{"metrics":{"type":"object","properties":{"enabled":{"type":"boolean"}}}}}`)
	files, notes := generateThing(t, dir, chart, write)
	role := string(files[ManagerRole])
	for _, resource := range []string{"poddisruptionbudgets", "roles"} {
		if !strings.Contains(role, "resources: ["+resource+"]") {
			t.Errorf("%s not granted:\n%s", resource, role)
		}
	}
	if strings.Contains(role, "resources: [clusterroles]") {
		t.Errorf("clusterroles granted although reach does not allow them:\n%s", role)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "ClusterRole") {
		t.Errorf("notes %q do not say the ClusterRole is left out", notes)
	}
}

// A chart's Role can only be created by whoever holds what it grants: the operator is given
// those rules, but never a wildcard, escalate, bind or impersonate.
func TestWhatAChartsRolesGrantIsHeld(t *testing.T) {
	dir, chart, write := testChart(t, map[string]string{
		"role.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {{ .Release.Name }}\nrules:\n" +
			"- apiGroups: [\"\"]\n  resources: [pods, pods/log]\n  verbs: [get, list, escalate]\n" +
			"- apiGroups: [apps]\n  resources: [\"*\"]\n  verbs: [get]\n" +
			"- apiGroups: [policy]\n  resources: [podsecuritypolicies]\n  verbs: [use]\n",
	})
	files, notes := generateThing(t, dir, chart, write)
	role := string(files[ManagerRole])
	for _, want := range []string{"resources: [pods]\n  verbs: [get, list]", "resources: [pods/log]\n  verbs: [get, list]",
		"resources: [podsecuritypolicies]\n  verbs: [use]", "resources: [roles]"} {
		if !strings.Contains(role, want) {
			t.Errorf("the manager role lacks %q:\n%s", want, role)
		}
	}
	for _, refused := range []string{"escalate", "[\"*\"]", "[*]"} {
		if strings.Contains(role, refused) {
			t.Errorf("the manager role holds %s:\n%s", refused, role)
		}
	}
	said := strings.Join(notes, "\n")
	if !strings.Contains(said, "wildcard") || !strings.Contains(said, "escalate") {
		t.Errorf("notes %q do not say what was left out", notes)
	}
}

// generateThing generates the manifests of one kind, Thing, served by chart.
func generateThing(t *testing.T, dir, chart string, write func(path, content string)) (map[string][]byte, []string) {
	t.Helper()
	watches := filepath.Join(dir, "watches.yaml")
	write(watches, "- group: example.com\n  version: v1\n  kind: Thing\n  chart: "+chart+"\n")
	files, notes, err := Generate(watches, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return files, notes
}

package manifestgen

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func inRepo(t *testing.T) {
	t.Helper()
	t.Chdir(filepath.Join("..", "..", ".."))
}

// What `make manifests` writes is committed: a change of a chart, its kind.yaml or watches.yaml
// without regenerating fails here.
func TestCommittedManifestsAreUpToDate(t *testing.T) {
	inRepo(t)
	files, _, err := Generate("watches.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join("config", path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("config/%s is out of date: run `make manifests` and commit the result", path)
		}
	}
}

// Every generated CRD passes the apiserver's own validation of CRDs (structural schema, scale
// paths, CEL rules, printer columns).
func TestGeneratedCRDsAreValid(t *testing.T) {
	inRepo(t)
	files, _, err := Generate("watches.yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	crds := 0
	for path, raw := range files {
		if !strings.HasPrefix(path, CRDDir) {
			continue
		}
		crds++
		var v1 apiextv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &v1); err != nil {
			t.Fatal(err)
		}
		var internal apiextensions.CustomResourceDefinition
		if err := apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, &internal, nil); err != nil {
			t.Fatal(err)
		}
		internal.Status.StoredVersions = []string{internal.Spec.Versions[0].Name} // the apiserver records it
		if errs := validation.ValidateCustomResourceDefinition(context.Background(), &internal); len(errs) > 0 {
			t.Errorf("%s: %v", path, errs.ToAggregate())
		}
	}
	if crds == 0 {
		t.Fatal("no CRD generated")
	}
}

// A watches file naming a chart whose kind.yaml does not compile fails with the file and line.
// testChart makes a directory with a chart (Chart.yaml, an open values.schema.json and the
// given templates) and returns the directory, the chart's path and a file writer.
func testChart(t *testing.T, templates map[string]string) (dir, chart string, write func(path, content string)) {
	t.Helper()
	dir = t.TempDir()
	chart = filepath.Join(dir, "chart")
	if err := os.MkdirAll(filepath.Join(chart, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	write = func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(chart, "Chart.yaml"), "apiVersion: v2\nname: c\nversion: 0.1.0\n")
	write(filepath.Join(chart, "values.schema.json"), `{"type":"object"}`)
	for name, content := range templates {
		write(filepath.Join(chart, "templates", name), content)
	}
	return dir, chart, write
}

func TestABadDeclarationStopsTheGeneration(t *testing.T) {
	dir, chart, write := testChart(t, nil)
	write(filepath.Join(chart, "templates", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n")
	write(filepath.Join(chart, "kind.yaml"), "status:\n  fields:\n    n:\n      type: string\n      expression: objects.size(\n")
	watches := filepath.Join(dir, "watches.yaml")
	write(watches, "- group: example.com\n  version: v1\n  kind: Thing\n  chart: "+chart+"\n")
	_, _, err := Generate(watches, Options{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(chart, "kind.yaml")+":5: status.fields.n") {
		t.Fatalf("error %v, want one naming kind.yaml:5", err)
	}
	// Without kind.yaml the same chart is a kind with defaults: a Ready condition, default names.
	if err := os.Remove(filepath.Join(chart, "kind.yaml")); err != nil {
		t.Fatal(err)
	}
	files, _, err := Generate(watches, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := files[filepath.Join(CRDDir, "example.com_things.yaml")]; !ok {
		t.Errorf("no CRD for Thing among %d files", len(files))
	}
	if role := string(files[ManagerRole]); !strings.Contains(role, "resources: [things]") || !strings.Contains(role, "resources: [configmaps]") {
		t.Errorf("role lacks things or configmaps:\n%s", role)
	}
}

// A second kind gets what the first has beside its CRD: editor and viewer roles aggregated
// into the built-in ones and listed in the rbac kustomization, and its entry in PROJECT.
func TestASecondKindGetsItsUserRolesAndProjectEntry(t *testing.T) {
	inRepo(t)
	dir := t.TempDir()
	watches, err := os.ReadFile("watches.yaml")
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(filepath.Join("examples", "staticsite"))
	if err != nil {
		t.Fatal(err)
	}
	mine, err := filepath.Abs(filepath.Join("helm-charts", "myproxy"))
	if err != nil {
		t.Fatal(err)
	}
	watches = bytes.ReplaceAll(watches, []byte("helm-charts/myproxy"), []byte(mine))
	watches = append(watches, []byte("- group: web.example.com\n  version: v1alpha1\n  kind: StaticSite\n  chart: "+abs+"\n")...)
	if err := os.WriteFile(filepath.Join(dir, "watches.yaml"), watches, 0o644); err != nil {
		t.Fatal(err)
	}
	project, err := os.ReadFile("PROJECT")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "PROJECT"), project, 0o644); err != nil {
		t.Fatal(err)
	}
	files, _, err := Generate(filepath.Join(dir, "watches.yaml"), Options{})
	if err != nil {
		t.Fatal(err)
	}

	type role struct {
		APIVersion, Kind string
		Metadata         struct {
			Name   string
			Labels map[string]string
		}
		Rules []struct{ APIGroups, Resources, Verbs []string }
	}
	for file, want := range map[string]struct {
		name, aggregate string
		verbs           []string
	}{
		"rbac/staticsite_editor_role.yaml": {"staticsite-editor-role", "rbac.authorization.k8s.io/aggregate-to-edit", editorVerbs},
		"rbac/staticsite_viewer_role.yaml": {"staticsite-viewer-role", "rbac.authorization.k8s.io/aggregate-to-view", viewerVerbs},
	} {
		var r role
		if err := yaml.UnmarshalStrict(files[file], &r); err != nil {
			t.Fatalf("%s: %v\n%s", file, err, files[file])
		}
		if r.Metadata.Name != want.name || r.Metadata.Labels[want.aggregate] != "true" {
			t.Errorf("%s: named %s with labels %v, want %s aggregated by %s", file, r.Metadata.Name, r.Metadata.Labels, want.name, want.aggregate)
		}
		if len(r.Rules) != 2 || !slices.Equal(r.Rules[0].APIGroups, []string{"web.example.com"}) ||
			!slices.Equal(r.Rules[0].Resources, []string{"staticsites"}) || !slices.Equal(r.Rules[0].Verbs, want.verbs) ||
			!slices.Equal(r.Rules[1].Resources, []string{"staticsites/status"}) || !slices.Equal(r.Rules[1].Verbs, []string{"get"}) {
			t.Errorf("%s: rules %+v", file, r.Rules)
		}
		if !bytes.Contains(files[RBACKustomization], []byte("\n- "+filepath.Base(file)+"\n")) {
			t.Errorf("%s does not list %s:\n%s", RBACKustomization, file, files[RBACKustomization])
		}
	}
	if !bytes.Contains(files[RBACKustomization], []byte("\n- myproxy_editor_role.yaml\n")) {
		t.Errorf("%s lost the first kind's roles:\n%s", RBACKustomization, files[RBACKustomization])
	}

	var p struct {
		Domain    string
		Resources []struct {
			API struct {
				CRDVersion string `json:"crdVersion"`
				Namespaced bool
			}
			Domain, Group, Kind, Version string
		}
	}
	if err := yaml.Unmarshal(files[ProjectFile], &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Resources) != 2 {
		t.Fatalf("PROJECT resources %+v, want MyProxy and StaticSite", p.Resources)
	}
	if r := p.Resources[1]; r.Group != "web" || r.Domain != p.Domain || r.Kind != "StaticSite" || r.Version != "v1alpha1" || !r.API.Namespaced {
		t.Errorf("PROJECT's StaticSite entry: %+v", r)
	}
	if !bytes.HasPrefix(files[ProjectFile], []byte("# Code generated by tool. DO NOT EDIT.\n")) {
		t.Errorf("PROJECT lost its header:\n%s", files[ProjectFile])
	}
}

// A kind a chart only looks up is readable and followed (get, list, watch), nothing more; a
// kind it also renders keeps the rights to manage it.
func TestLookedUpKindsAreReadable(t *testing.T) {
	role := string(Role([]Kind{{
		GVK:    schema.GroupVersionKind{Group: "web.example.com", Version: "v1alpha1", Kind: "StaticSite"},
		Plural: "staticsites",
		Rendered: []schema.GroupVersionKind{
			{Version: "v1", Kind: "ConfigMap"},
		},
		LookedUp: []schema.GroupVersionKind{
			{Version: "v1", Kind: "ConfigMap"},
			{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
		},
	}}))
	mustContain(t, "the role", role,
		"- apiGroups: [networking.k8s.io]\n  resources: [ingresses]\n  verbs: [get, list, watch]\n",
		"- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: ["+strings.Join(manage, ", ")+"]\n")
	if strings.Count(role, "resources: [configmaps]") != 1 {
		t.Errorf("configmaps granted twice:\n%s", role)
	}
}

// A chart that renders outside its release's namespace stops the generation until the watch
// allows it; then the role grants it. Every such object of every rendering is named at once,
// each with the reach entry that allows it, and the watch's whole reach that allows them all.
func TestRenderingsOutsideTheNamespaceNeedTheWatchsReach(t *testing.T) {
	dir, chart, write := testChart(t, map[string]string{"role.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\n" +
		"metadata:\n  name: reader\nrules: []\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: monitoring\n" +
		"{{ if .Values.binding }}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: reader\n" +
		"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}\n{{ end }}"})
	if err := os.MkdirAll(filepath.Join(chart, "ci"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(chart, "ci", "binding-values.yaml"), "binding: true\n")
	watches := filepath.Join(dir, "watches.yaml")
	entry := "- group: example.com\n  version: v1\n  kind: Thing\n  chart: " + chart + "\n"
	for _, tc := range []struct {
		reach   string
		wantErr []string
	}{
		{wantErr: []string{"writes 3 object(s) outside the custom resource's namespace",
			"ClusterRole.rbac.authorization.k8s.io reader (cluster-scoped) (reach.clusterScoped: [ClusterRole.rbac.authorization.k8s.io] would allow it), " +
				"rendered with the default values, " + filepath.Join(chart, "ci", "binding-values.yaml"),
			"ConfigMap monitoring/cm (reach.namespaces: [monitoring] would allow it)",
			"ClusterRoleBinding.rbac.authorization.k8s.io reader (cluster-scoped) (reach.clusterScoped: [ClusterRoleBinding.rbac.authorization.k8s.io] " +
				"would allow it), rendered with " + filepath.Join(chart, "ci", "binding-values.yaml"),
			"  reach:\n    clusterScoped: [ClusterRole.rbac.authorization.k8s.io, ClusterRoleBinding.rbac.authorization.k8s.io]\n    namespaces: [monitoring]"}},
		{reach: "  reach: {clusterScoped: [ClusterRole.rbac.authorization.k8s.io], namespaces: [kube-system]}\n",
			wantErr: []string{"writes 2 object(s)", "ConfigMap monitoring/cm",
				"  reach:\n    clusterScoped: [ClusterRole.rbac.authorization.k8s.io, ClusterRoleBinding.rbac.authorization.k8s.io]\n    namespaces: [kube-system, monitoring]"}},
		{reach: "  reach: {clusterScoped: [ClusterRole.rbac.authorization.k8s.io, ClusterRoleBinding.rbac.authorization.k8s.io], namespaces: [monitoring]}\n"},
	} {
		write(watches, entry+tc.reach)
		files, _, err := Generate(watches, Options{})
		if len(tc.wantErr) > 0 {
			if err == nil {
				t.Errorf("reach %q: no error, want one naming %q", tc.reach, tc.wantErr)
				continue
			}
			mustContain(t, "the error", err.Error(), tc.wantErr...)
			continue
		}
		if err != nil {
			t.Fatalf("reach %q: %v", tc.reach, err)
		}
		if role := string(files[ManagerRole]); !strings.Contains(role, "resources: [clusterroles]") {
			t.Errorf("the allowed ClusterRole is not granted:\n%s", role)
		}
	}
	// Two kinds out of reach are told in one run.
	write(watches, entry+strings.ReplaceAll(entry, "Thing", "Other"))
	if _, _, err := Generate(watches, Options{}); err == nil || !strings.Contains(err.Error(), "Thing.example.com: ") || !strings.Contains(err.Error(), "Other.example.com: ") {
		t.Errorf("error %v, want one naming both kinds", err)
	}
}

// A kind whose releases run as a tenant's ServiceAccount leaves the writes of what its chart
// renders to that ServiceAccount: the manager keeps only what it reads and follows, plus the
// right to act as the ServiceAccounts of that name (and nothing else of ServiceAccounts). Its
// deployer role, for the tenants to bind, holds the writes.
func TestATenantKindLeavesTheWritesToItsServiceAccount(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	deploy := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	tenantKind := Kind{GVK: schema.GroupVersionKind{Group: "web.example.com", Version: "v1", Kind: "Site"}, Plural: "sites",
		Rendered: []schema.GroupVersionKind{cm, deploy}, ServiceAccount: "site-deployer"}
	ownKind := Kind{GVK: schema.GroupVersionKind{Group: "web.example.com", Version: "v1", Kind: "Page"}, Plural: "pages",
		Rendered: []schema.GroupVersionKind{cm}}
	role := string(Role([]Kind{tenantKind, ownKind}))
	mustContain(t, "the role", role,
		"- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, list, watch]\n",
		// Another kind renders ConfigMaps with the operator's identity.
		"- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: ["+strings.Join(manage, ", ")+"]\n",
		"- apiGroups: [\"\"]\n  resources: [serviceaccounts]\n  resourceNames: [site-deployer]\n  verbs: [impersonate, get, list, watch]\n")
	if n := strings.Count(role, "serviceaccounts"); n != 1 {
		t.Errorf("serviceaccounts appear %d times:\n%s", n, role)
	}
	if own := string(Role([]Kind{ownKind})); strings.Contains(own, "serviceaccounts") {
		t.Errorf("a role without tenant kinds grants ServiceAccount rights:\n%s", own)
	}
	deployer := string(DeployerRole(tenantKind))
	mustContain(t, "the deployer role", deployer,
		"  name: site-deployer-role\n",
		"- apiGroups: [apps]\n  resources: [deployments]\n  verbs: ["+strings.Join(manage, ", ")+"]\n",
		"- apiGroups: [web.example.com]\n  resources: [sites/finalizers]\n  verbs: [update]\n")
	if strings.Contains(deployer, "aggregate-to") || strings.Contains(deployer, "secrets") {
		t.Errorf("the deployer role is aggregated or reaches the release records:\n%s", deployer)
	}
}

// mustContain reports each of wants that text (named what) lacks.
func mustContain(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks\n%s\nin\n%s", what, want, text)
		}
	}
}

// An inferred kind's CRD is open beside the keys values.yaml types; make manifests says so, and
// writes the policy that warns of keys no template reads, listed with the CRDs for make install.
// A kind whose schema closes every object it describes needs none, and make manifests says why.
func TestMakeManifestsSaysWhatTheSpecChecks(t *testing.T) {
	dir, chart, write := testChart(t, map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n" +
		"data:\n  tag: {{ .Values.image.tag | quote }}\n  name: {{ .Values.nameOverride | quote }}\n  {{- with .Values.podAnnotations }}{{ toYaml . }}{{ end }}\n"})
	if err := os.Remove(filepath.Join(chart, "values.schema.json")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(chart, "values.yaml"), "image:\n  tag: \"1\"\nport: 80\nratio: 0.5\n# podAnnotations: {}\n")
	files, notes := generateThing(t, dir, chart, write)
	said := strings.Join(notes, "\n")
	mustContain(t, "the notes", said,
		"Thing.example.com: spec typed, each as the type of its value in values.yaml (a number also as a string, or null): image.tag, port, ratio\n",
		"Thing.example.com: spec open (unknown keys kept beside the typed ones), inferred: values.yaml is a sample of the values, and templates read keys it does not set: spec, spec.image\n",
		"Thing.example.com: spec accepts untyped, as keys of open objects, what only values.yaml's comments name or only templates read: nameOverride, podAnnotations\n",
		"Thing.example.com: typo warnings: ValidatingAdmissionPolicy unread-keys.things.example.com (config/crd/warnings/example.com_things.yaml) warns, "+
			"and never refuses, at kubectl apply of a key that no values.yaml, comment of it, schema or template names, in spec, spec.image")
	policy := string(files[filepath.Join(WarningsDir, "example.com_things.yaml")])
	mustContain(t, "the policy", policy, "kind: ValidatingAdmissionPolicy\n", "kind: ValidatingAdmissionPolicyBinding\n", "- Warn\n")
	var vap struct {
		Spec struct{ Variables []struct{ Expression string } }
	}
	if err := yaml.Unmarshal([]byte(strings.Split(policy, "\n---\n")[0]), &vap); err != nil || len(vap.Spec.Variables) != 2 {
		t.Fatalf("the policy's variables %+v (%v): want spec's and spec.image's", vap, err)
	}
	mustContain(t, "the policy", vap.Spec.Variables[0].Expression, "!(k in ['global', 'image', 'nameOverride', 'podAnnotations', 'port', 'ratio'])")
	mustContain(t, "the CRD kustomization", string(files[CRDKustomization]), "- bases/example.com_things.yaml\n- warnings/example.com_things.yaml\n")

	write(filepath.Join(chart, "values.schema.json"), `{"type":"object","additionalProperties":false,"properties":{"image":{"type":"object",`+
		`"additionalProperties":false,"properties":{"tag":{"type":"string"}}},"nameOverride":{"type":"string"},"podAnnotations":{"type":"object"},`+
		`"port":{"type":"integer"},"ratio":{"type":"number"}}}`)
	files, notes = generateThing(t, dir, chart, write)
	mustContain(t, "the notes", strings.Join(notes, "\n"), "Thing.example.com: no typo warnings: the CRD refuses the keys its schema does not name")
	if _, ok := files[filepath.Join(WarningsDir, "example.com_things.yaml")]; ok || strings.Contains(string(files[CRDKustomization]), "- warnings/") {
		t.Errorf("a policy written for a closed spec:\n%s", files[CRDKustomization])
	}
}

// A chart that names objects without the release's name allows one custom resource per
// namespace (a namespaced object, or a cluster-scoped one named after the namespace) or per
// cluster (a cluster-scoped object of a fixed name); make manifests says which, naming them.
// Names derived from the release say nothing.
func TestMakeManifestsSaysWhereFixedNamesAllowOneResource(t *testing.T) {
	role := "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: %s\nrules: []\n"
	dir, chart, write := testChart(t, map[string]string{
		"derived.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n",
		"fixed.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\n",
		"roles.yaml":   fmt.Sprintf(role, "app-reader") + "---\n" + fmt.Sprintf(role, "{{ .Release.Namespace }}-app") + "---\n" + fmt.Sprintf(role, "{{ .Release.Name }}-app"),
	})
	watches := filepath.Join(dir, "watches.yaml")
	write(watches, "- group: example.com\n  version: v1\n  kind: Thing\n  chart: "+chart+"\n  reach:\n    clusterScoped: [ClusterRole.rbac.authorization.k8s.io]\n")
	_, notes, err := Generate(watches, Options{})
	if err != nil {
		t.Fatal(err)
	}
	said := strings.Join(notes, "\n")
	mustContain(t, "the notes", said,
		"Thing.example.com: one custom resource per cluster: the chart names objects without the release's name, so a second Thing anywhere in the cluster renders the same ones: ClusterRole app-reader\n",
		"Thing.example.com: one custom resource per namespace: the chart names objects without the release's name, so a second Thing in a namespace renders the same ones: ClusterRole default-app, ConfigMap app-config")
	if strings.Contains(said, "-cm") || strings.Contains(said, "example-app") {
		t.Errorf("names derived from the release told as fixed:\n%s", said)
	}

	write(filepath.Join(chart, "templates", "fixed.yaml"), "")
	write(filepath.Join(chart, "templates", "roles.yaml"), fmt.Sprintf(role, "{{ .Release.Namespace }}-{{ .Release.Name }}"))
	_, notes, err = Generate(watches, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if said := strings.Join(notes, "\n"); strings.Contains(said, "one custom resource per") {
		t.Errorf("a chart that names every object after its release told as fixed:\n%s", said)
	}
}

// The example of a kind whose API changed with its chart (examples/greeter) generates from the
// chart alone: v1beta1 from its values.schema.json, v1alpha1 as the chart keeps it (served as it
// was, deprecated), converted through the webhook; and the chart's conversion survives its round
// trip (make manifests checks it). A CRD it replaces that served v1alpha1 otherwise is refused.
func TestTheExampleOfTwoVersionsGeneratesFromItsChart(t *testing.T) {
	inRepo(t)
	dir := t.TempDir()
	watches := filepath.Join(dir, "watches.yaml")
	chart, err := filepath.Abs(filepath.Join("examples", "greeter"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(watches, []byte("- group: examples.example.com\n  version: v1beta1\n  kind: Greeter\n  chart: "+chart+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, notes, err := Generate(watches, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(files[filepath.Join(CRDDir, "examples.example.com_greeters.yaml")], &crd); err != nil {
		t.Fatal(err)
	}
	v := crd.Spec.Versions
	if len(v) != 2 || v[0].Name != "v1beta1" || !v[0].Storage || v[1].Name != "v1alpha1" || !v[1].Served || !v[1].Deprecated ||
		crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextv1.WebhookConverter {
		t.Fatalf("versions %+v, conversion %+v:\n%s", v, crd.Spec.Conversion, strings.Join(notes, "\n"))
	}
	if _, ok := v[1].Schema.OpenAPIV3Schema.Properties["spec"].Properties["timeoutSeconds"]; !ok {
		t.Error("v1alpha1 is not served with the schema it was served with")
	}
	if !strings.Contains(string(Role([]Kind{{GVK: schema.GroupVersionKind{Group: "examples.example.com", Version: "v1beta1", Kind: "Greeter"},
		Plural: "greeters", Converts: true}})), "resourceNames: [greeters.examples.example.com]") {
		t.Error("the manager role does not name the converting CRD")
	}
	// A CRD that served v1alpha1 with another schema than the chart keeps.
	other := crd.DeepCopy()
	other.Spec.Versions = other.Spec.Versions[1:]
	other.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["extra"] = apiextv1.JSONSchemaProps{Type: "string"}
	if _, _, err := Generate(watches, Options{Previous: func(string) (*apiextv1.CustomResourceDefinition, error) { return other, nil }}); err == nil ||
		!strings.Contains(err.Error(), "versions/v1alpha1.yaml is not the schema the CRD this one replaces serves") {
		t.Errorf("a kept version that is not the one served: %v", err)
	}
}

package renderinputs

import (
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func chartOf(templates ...string) *chart.Chart {
	c := &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "0.1.0"}}
	for i, t := range templates {
		c.Templates = append(c.Templates, &chart.File{Name: "templates/t" + string(rune('a'+i)) + ".yaml", Data: []byte(t)})
	}
	return c
}

func TestAnalyseChartFindsEveryReferenceToCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name     string
		template string
		kube     bool
		apis     bool
		tpl      bool
	}{
		{name: "none", template: `kind: ConfigMap {{ .Values.x }}`},
		{name: "api versions", template: `{{ if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" }}x{{ end }}`, apis: true},
		{name: "kube version from the root", template: `{{ $.Capabilities.KubeVersion.Minor }}`, kube: true},
		{name: "helm version only", template: `{{ .Capabilities.HelmVersion.Version }}`},
		{name: "kept in a variable", template: `{{ $c := .Capabilities }}{{ $c.APIVersions }}`, kube: true, apis: true},
		{name: "indexed by name", template: `{{ index $ "Capabilities" }}`, kube: true, apis: true},
		{name: "in a defined template", template: `{{ define "x" }}{{ with .Capabilities.APIVersions }}{{ end }}{{ end }}`, apis: true},
		{name: "in a range's else", template: `{{ range .Values.l }}{{ else }}{{ .Capabilities.KubeVersion }}{{ end }}`, kube: true},
		{name: "through a chain", template: `{{ (.Capabilities).APIVersions }}`, kube: true, apis: true},
		{name: "tpl", template: `{{ tpl .Values.t . }}`, tpl: true},
		{name: "the word in plain text", template: `# Capabilities are not read here`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			use, err := AnalyseChart(chartOf(tc.template))
			if err != nil {
				t.Fatal(err)
			}
			if use.KubeVersion != tc.kube || use.APIVersions != tc.apis || use.ThroughTpl != tc.tpl {
				t.Errorf("got kube=%v apis=%v tpl=%v, want %v %v %v", use.KubeVersion, use.APIVersions, use.ThroughTpl, tc.kube, tc.apis, tc.tpl)
			}
		})
	}
}

func TestAnalyseChartCoversDependenciesConstraintsAndTpl(t *testing.T) {
	parent := chartOf(`kind: ConfigMap`)
	parent.AddDependency(chartOf(`{{ .Capabilities.APIVersions }}`))
	if use, _ := AnalyseChart(parent); !use.APIVersions {
		t.Error("a dependency's reference was missed")
	}
	constrained := chartOf(`kind: ConfigMap`)
	constrained.Metadata.KubeVersion = ">=1.30.0"
	if use, _ := AnalyseChart(constrained); !use.KubeVersion {
		t.Error("a kubeVersion constraint does not make the kube version an input")
	}
	viaTpl := chartOf(`{{ tpl .Values.t . }}`)
	use, _ := AnalyseChart(viaTpl)
	if r := use.Reads([]byte(`{"t":"{{ .Values.x }}"}`)); r.APIVersions {
		t.Error("values that do not mention .Capabilities made a tpl chart read them")
	}
	if r := use.Reads([]byte(`{"t":"{{ .Capabilities.KubeVersion }}"}`)); !r.APIVersions || !r.KubeVersion {
		t.Error("a tpl'd value reading .Capabilities was missed")
	}
	viaTpl.Files = []*chart.File{{Name: "files/x.tpl", Data: []byte(`{{ .Capabilities.APIVersions }}`)}}
	use, _ = AnalyseChart(viaTpl)
	if r := use.Reads([]byte(`{}`)); !r.APIVersions {
		t.Error("a chart file rendered with tpl that reads .Capabilities was missed")
	}
	if _, err := AnalyseChart(chartOf(`{{ if }}`)); err == nil {
		t.Error("a template that does not parse was accepted")
	}
}

func TestCapabilitiesDigestInputHoldsOnlyWhatIsRead(t *testing.T) {
	caps := chartutil.DefaultCapabilities.Copy()
	none := CapabilitiesDigestInput(caps, CapabilityUse{})
	apis := CapabilitiesDigestInput(caps, CapabilityUse{APIVersions: true})
	caps.APIVersions = append(caps.APIVersions, "monitoring.coreos.com/v1")
	if CapabilitiesDigestInput(caps, CapabilityUse{}) != none {
		t.Error("a chart that reads no capabilities saw a new API")
	}
	if CapabilitiesDigestInput(caps, CapabilityUse{APIVersions: true}) == apis {
		t.Error("a chart reading API versions did not see a new API")
	}
	if CapabilitiesDigestInput(caps, CapabilityUse{KubeVersion: true}) == CapabilitiesDigestInput(caps, CapabilityUse{}) {
		t.Error("the kube version is missing")
	}
}

func TestParsePath(t *testing.T) {
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	for _, tc := range []struct {
		path string
		want Read
		ok   bool
	}{
		{path: "/api/v1/namespaces/ns/secrets/tls", want: Read{Resource: secrets, Namespace: "ns", Name: "tls"}, ok: true},
		{path: "/api/v1/namespaces/ns/secrets", want: Read{Resource: secrets, Namespace: "ns"}, ok: true},
		{path: "/api/v1/secrets", want: Read{Resource: secrets}, ok: true},
		{path: "/api/v1/namespaces/ns", want: Read{Resource: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Name: "ns"}, ok: true},
		{path: "/apis/apps/v1/namespaces/ns/deployments/d/status",
			want: Read{Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespace: "ns", Name: "d"}, ok: true},
		{path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.example.com",
			want: Read{Resource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, Name: "x.example.com"}, ok: true},
		{path: "/api/v1"},
		{path: "/apis/apps/v1"},
		{path: "/apis"},
		{path: "/version"},
	} {
		got, ok := ParsePath(tc.path)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParsePath(%q) = %+v, %v; want %+v, %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRecorderCountsEachObjectReadOnce(t *testing.T) {
	r := &Recorder{}
	var counts []int
	r.OnRead(func(n int) { counts = append(counts, n) })
	rd := Read{Resource: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: "ns", Name: "a"}
	r.add(rd)
	r.add(rd)
	if reads := r.Reads(); len(reads) != 1 || reads[0] != rd {
		t.Errorf("reads = %+v, want the Secret once", reads)
	}
	if len(counts) != 2 || counts[1] != 1 {
		t.Errorf("OnRead counts = %v, want [1 1]", counts)
	}
	r.Start()
	if len(r.Reads()) != 0 {
		t.Error("Start did not forget earlier reads")
	}
}

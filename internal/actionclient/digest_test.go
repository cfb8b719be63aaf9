package actionclient

import (
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
)

// What a chart's templates read of the capabilities: the field named after .Capabilities, and
// all of it when none is named.
func TestAnalyseChartFindsWhatTemplatesReadOfTheCapabilities(t *testing.T) {
	for _, tc := range []struct {
		template string
		want     CapabilityUse
	}{
		{`kind: ConfigMap`, CapabilityUse{}},
		{`{{ semverCompare ">=1.25-0" .Capabilities.KubeVersion.Version }}`, CapabilityUse{KubeVersion: true}},
		{`{{ if $.Capabilities.APIVersions.Has "x/v1" }}`, CapabilityUse{APIVersions: true}},
		{`{{ .Capabilities.HelmVersion.Version }}`, CapabilityUse{}},
		{`{{ $c := .Capabilities }}{{ $c.KubeVersion }}`, CapabilityUse{KubeVersion: true, APIVersions: true}},
		{`{{ (index $ "Capabilities").APIVersions }}`, CapabilityUse{KubeVersion: true, APIVersions: true}},
		{`{{ tpl .Values.t . }}`, CapabilityUse{ThroughTpl: true}},
	} {
		got := AnalyseChart(&chart.Chart{Metadata: &chart.Metadata{Name: "c"},
			Templates: []*common.File{{Name: "templates/t.yaml", Data: []byte(tc.template)}}})
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.template, got, tc.want)
		}
	}
	dep := &chart.Chart{Metadata: &chart.Metadata{Name: "dep", KubeVersion: ">=1.30"}}
	parent := &chart.Chart{Metadata: &chart.Metadata{Name: "c"}}
	parent.SetDependencies(dep)
	if got := AnalyseChart(parent); !got.KubeVersion {
		t.Errorf("a dependency's kubeVersion constraint: %+v, want KubeVersion", got)
	}
}

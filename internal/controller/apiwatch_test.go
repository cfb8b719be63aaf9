package controller

import (
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/myproxy-operator/internal/actionclient"
)

func TestOnlyCustomResourcesWhoseRenderingReadsCapabilitiesAreQueued(t *testing.T) {
	analyse := func(template string) actionclient.CapabilityUse {
		return actionclient.AnalyseChart(&chart.Chart{Metadata: &chart.Metadata{Name: "c"},
			Templates: []*common.File{{Name: "templates/t.yaml", Data: []byte(template)}}})
	}
	cr := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	}
	plainSpec := cr(map[string]any{"t": "{{ .Values.x }}"})
	capsSpec := cr(map[string]any{"t": "{{ .Capabilities.KubeVersion }}"})
	for _, tc := range []struct {
		name      string
		k         capabilityReader
		cr        *unstructured.Unstructured
		wantQueue bool
	}{
		{name: "chart without .Capabilities", k: capabilityReader{use: analyse(`kind: ConfigMap`)}, cr: plainSpec},
		{name: "chart testing an API", k: capabilityReader{use: analyse(`{{ .Capabilities.APIVersions.Has "x/v1" }}`)}, cr: plainSpec, wantQueue: true},
		{name: "tpl of a spec without .Capabilities", k: capabilityReader{use: analyse(`{{ tpl .Values.t . }}`)}, cr: plainSpec},
		{name: "tpl of a spec reading .Capabilities", k: capabilityReader{use: analyse(`{{ tpl .Values.t . }}`)}, cr: capsSpec, wantQueue: true},
		{name: "tpl of an override reading .Capabilities", k: capabilityReader{use: analyse(`{{ tpl .Values.t . }}`),
			overrides: []byte(`{"t":"{{ .Capabilities.APIVersions }}"}`)}, cr: plainSpec, wantQueue: true},
	} {
		if got := tc.k.reads(tc.cr); got != tc.wantQueue {
			t.Errorf("%s: queued %v, want %v", tc.name, got, tc.wantQueue)
		}
	}
}

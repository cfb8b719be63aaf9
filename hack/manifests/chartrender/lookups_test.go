package chartrender

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The offline renderings record every kind a template looks up, however it is spelled, and
// find nothing, as Helm's engine without a cluster does.
func TestRenderingsRecordTheKindsLookedUp(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml":             "apiVersion: v2\nname: reader\nversion: 0.1.0\n",
		"values.yaml":            "ingressKind: Ingress\n",
		"ci/gateway-values.yaml": "gateway: true\n",
		"templates/cm.yaml": `{{- $cm := lookup "v1" "ConfigMap" .Release.Namespace "settings" }}
{{- $ingresses := (lookup "networking.k8s.io/v1" .Values.ingressKind .Release.Namespace "") }}
{{- $v := "policy/v1" }}
{{- $pdbs := "" | lookup $v "PodDisruptionBudget" .Release.Namespace }}
{{- if .Values.gateway }}{{ $gw := lookup "gateway.networking.k8s.io/v1" "Gateway" "" "edge" }}{{ end }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  found: {{ ternary "yes" "no" (or (not (empty $cm)) (not (empty $ingresses)) (not (empty $pdbs))) | quote }}
`,
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	renderings, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []schema.GroupVersionKind{ // sorted as GVK strings: the core group first
		{Version: "v1", Kind: "ConfigMap"},
		{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "Gateway"},
		{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
		{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
	}
	if got := LookedUp(renderings); !slices.Equal(got, want) {
		t.Errorf("looked up %v, want %v", got, want)
	}
	if len(renderings) != 2 || len(renderings[0].LookedUp) != 3 {
		t.Errorf("the default rendering looked up %v, want all but the Gateway (only the ci values look it up)", renderings[0].LookedUp)
	}
	for _, r := range renderings {
		if got := r.Objects[0]["data"].(map[string]any)["found"]; got != "no" {
			t.Errorf("%s: a lookup found something offline (%v)", r.ValuesFile, got)
		}
	}
}

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/discovery"

	"github.com/example/myproxy-operator/test/harness"
)

// The control plane `make test` and `make demo` build reports the Kubernetes release it is
// built from (hack/cluster/build.sh stamps it), so charts with a kubeVersion constraint or a
// version check in their templates install on it, as on a real cluster; a development build
// would report v0.0.0-master, which every such constraint refuses.
func TestChartsWithKubeVersionConstraintsInstall(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.GitVersion, "v1.") || v.Major != "1" {
		t.Fatalf("the apiserver reports %+v, want a Kubernetes 1.x release", v)
	}
	chart := writeChart(t, map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: versioned\nversion: 0.1.0\nkubeVersion: \">=1.21.0-0\"\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n" +
			"  policy: {{ if semverCompare \">=1.25-0\" .Capabilities.KubeVersion.Version }}policy/v1{{ else }}policy/v1beta1{{ end }}\n",
	})
	ns := newNamespace(t, harness.NewClient(t, cfg), nil)
	out := harness.Run(t, []string{"KUBECONFIG=" + kubeconfig}, harness.Tool(t, "HELM", "helm"),
		"install", "versioned", chart, "-n", ns, "--dry-run=server", "-o", "json")
	if !strings.Contains(out, "policy/v1\\n") && !strings.Contains(out, "policy: policy/v1\\n") {
		t.Errorf("the version check did not see a current Kubernetes (%s):\n%s", v.GitVersion, out)
	}
}

// writeChart writes a chart of these files (paths relative to its directory) into a new
// directory and returns it.
func writeChart(t *testing.T, files map[string]string) string {
	t.Helper()
	chart := t.TempDir()
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(chart, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chart, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return chart
}

package e2e

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/example/myproxy-operator/test/harness"
)

// The operator's own chart (dist/chart) installs with helm into a namespace of the release's
// choice: the manager Deployment becomes Available there under the restricted standard, and
// helm uninstall removes it.
func TestHelmInstallOperatorChart(t *testing.T) {
	helm := harness.Tool(t, "HELM", "helm")
	const ns = "myproxy-helm"
	env := []string{"KUBECONFIG=" + kubeconfig}
	kubectl(t, "create", "namespace", ns)
	kubectl(t, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
	t.Cleanup(func() {
		_, _ = harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "delete", "namespace", ns, "--wait=false")
	})

	harness.Run(t, env, helm, "install", "op", filepath.Join(harness.RepoRoot(), "dist", "chart"), "-n", ns,
		"--set", "image.tag=v0.1.0-e2e", "--set", "watchNamespaces={team-a,team-b}", "--wait", "--timeout=120s")
	deployment := "deployment/myproxy-operator-controller-manager"
	kubectl(t, "wait", "-n", ns, "--for=condition=Available", deployment, "--timeout=60s")
	got := kubectl(t, "get", "-n", ns, deployment, "-o",
		`jsonpath={.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].env[?(@.name=="WATCH_NAMESPACE")].value}`)
	if want := "example.com/myproxy-operator:v0.1.0-e2e team-a,team-b"; got != want {
		t.Errorf("manager image and WATCH_NAMESPACE = %q, want %q", got, want)
	}
	if subject := kubectl(t, "get", "clusterrolebinding", "myproxy-operator-manager-rolebinding", "-o",
		"jsonpath={.subjects[0].namespace}"); subject != ns {
		t.Errorf("the manager role is bound to a ServiceAccount in %q, want the release namespace %q", subject, ns)
	}
	kubectl(t, "get", "crd", "myproxies.gateway.example.com")

	harness.Run(t, env, helm, "uninstall", "op", "-n", ns, "--wait", "--timeout=120s")
	if left := kubectl(t, "get", "deployments,serviceaccounts,roles", "-n", ns, "-l", "app.kubernetes.io/name=myproxy-operator", "-o", "name"); strings.TrimSpace(left) != "" {
		t.Errorf("helm uninstall left:\n%s", left)
	}
}

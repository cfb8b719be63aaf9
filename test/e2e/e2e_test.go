package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/test/harness"
)

const sample = "config/samples/gateway_v1alpha1_myproxy.yaml"

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return harness.Run(t, nil, "kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...)
}

// installCRD applies config/crd the way `make install` does.
func installCRD(t *testing.T) {
	t.Helper()
	kustomize := harness.Tool(t, "KUSTOMIZE", "kustomize")
	crd := harness.Run(t, nil, kustomize, "build", filepath.Join(harness.RepoRoot(), "config", "crd"))
	path := harness.WriteTemp(t, "crd-*.yaml", []byte(crd))
	kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", path)
	kubectl(t, "wait", "--for=condition=Established", "crd/myproxies.gateway.example.com", "--timeout=30s")
}

// sampleSpec reads the sample's name and spec.
func sampleSpec(t *testing.T) (name string, replicas int, image string) {
	t.Helper()
	var obj struct {
		Metadata struct{ Name string }
		Spec     struct {
			Replicas int
			Image    string
		}
	}
	if err := yaml.Unmarshal([]byte(readFile(t, filepath.Join(harness.RepoRoot(), sample))), &obj); err != nil {
		t.Fatal(err)
	}
	return obj.Metadata.Name, obj.Spec.Replicas, obj.Spec.Image
}

// The sample, applied with kubectl in a namespace that enforces the restricted Pod Security
// Standard, is installed, runs the requested replicas and image, and is removed whole.
func TestSampleLifecycle(t *testing.T) {
	installCRD(t)
	harness.StartOperator(t, operatorBin, kubeconfig,
		[]string{"--watches-file=" + filepath.Join(harness.RepoRoot(), "watches.yaml")})
	c := harness.NewClient(t, harness.ConfigFromKubeconfig(t, kubeconfig))
	ns := harness.Namespace(t, c, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	t.Cleanup(func() {
		_, _ = harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "delete", "namespace", ns, "--wait=false")
	})
	name, replicas, image := sampleSpec(t)

	kubectl(t, "apply", "-n", ns, "-f", sample)
	kubectl(t, "wait", "-n", ns, "--for=condition=Deployed", "myproxy/"+name, "--timeout=120s")
	// Proxy Pods are admitted under the restricted standard, scheduled and (kwok) Ready.
	kubectl(t, "rollout", "status", "-n", ns, "deployment/"+name, "--timeout=120s")
	got := kubectl(t, "get", "deployment", "-n", ns, name, "-o",
		"jsonpath={.status.readyReplicas} {.spec.template.spec.containers[0].image}")
	if want := strings.Join([]string{strconv.Itoa(replicas), image}, " "); got != want {
		t.Errorf("deployment readyReplicas and image = %q, want %q", got, want)
	}
	// Status follows the Deployment: Available, ready replicas, and the printer columns show them.
	kubectl(t, "wait", "-n", ns, "--for=condition=Available", "myproxy/"+name, "--timeout=60s")
	waitReady := func(want int) {
		harness.Eventually(t, 60*time.Second, "MyProxy readyReplicas", func(context.Context) (bool, string) {
			got := kubectl(t, "get", "myproxy", "-n", ns, name, "-o", "jsonpath={.status.readyReplicas}")
			return got == strconv.Itoa(want), "readyReplicas=" + got
		})
	}
	waitReady(replicas)
	columns := kubectl(t, "get", "myproxy", "-n", ns, name)
	for _, want := range []string{"REPLICAS", "READY", "IMAGE", "STATUS", image, "InstallSuccessful"} {
		if !strings.Contains(columns, want) {
			t.Errorf("kubectl get myproxy lacks %q:\n%s", want, columns)
		}
	}
	// kubectl scale goes through the scale subresource.
	kubectl(t, "scale", "-n", ns, "myproxy/"+name, "--replicas=3")
	waitReady(3)
	if got := kubectl(t, "get", "deployment", "-n", ns, name, "-o", "jsonpath={.status.readyReplicas}"); got != "3" {
		t.Errorf("deployment readyReplicas after kubectl scale = %q, want 3", got)
	}

	if events := kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name="+name,
		"-o", "jsonpath={.items[*].reason}"); !strings.Contains(events, "Installed") {
		t.Errorf("events on the MyProxy = %q, want an Installed event", events)
	}

	kubectl(t, "delete", "-n", ns, "-f", sample, "--timeout=120s")
	harness.Eventually(t, 120*time.Second, "every object of the release removed", func(ctx context.Context) (bool, string) {
		left := kubectl(t, "get", "deployments,replicasets,pods,services,configmaps,secrets", "-n", ns,
			"-l", "app.kubernetes.io/instance="+name, "-o", "name")
		releases := kubectl(t, "get", "secrets", "-n", ns, "-l", "owner=helm,name="+name, "-o", "name")
		return left == "" && releases == "", "left: " + left + releases
	})
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

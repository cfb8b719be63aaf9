package publish

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/test/harness"
)

const (
	systemNamespace = "myproxy-operator-system"
	managerSA       = "myproxy-operator-controller-manager"
	sample          = "config/samples/gateway_v1alpha1_myproxy.yaml"
)

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return strings.TrimSpace(harness.Run(t, nil, "kubectl", append([]string{"--kubeconfig", kubeconfig}, args...)...))
}

// makeIn runs a make target of the repository, its images written into images.
func makeIn(t *testing.T, images string, args ...string) string {
	t.Helper()
	return harness.Run(t, nil, "make", append([]string{"-s", "--no-print-directory", "IMAGES=" + images}, args...)...)
}

// pushOperator pushes the operator image of version to the cluster's registry with make
// image-push and returns the reference by digest it printed.
func pushOperator(t *testing.T, version string) string {
	t.Helper()
	ref := printed(makeIn(t, t.TempDir(), "image-push", "VERSION="+version, "IMG="+registry+"/myproxy-operator:v"+version))
	if !strings.HasPrefix(ref, registry+"/myproxy-operator@sha256:") {
		t.Fatalf("make image-push printed %q, want the image by digest", ref)
	}
	return ref
}

// The image pushed to a registry is what make deploy runs: the Deployment names its digest,
// and the binary taken out of that image, run as the container of the deployed Pod would run
// (the image's files, user and entrypoint, the Deployment's arguments and environment, the
// token of the ServiceAccount make deploy created), passes the readiness probe and serves a
// MyProxy to Available, with nothing it asks refused by RBAC (the audit log is the witness).
func TestDeployRunsThePushedImage(t *testing.T) {
	env := []string{"KUBECONFIG=" + kubeconfig}
	version := strings.TrimSpace(harness.Run(t, nil, "make", "-s", "--no-print-directory", "print-VERSION"))
	image := pushOperator(t, version)
	harness.Run(t, env, "make", "deploy", "IMG="+image)
	undeployed := false
	t.Cleanup(func() {
		if !undeployed {
			_, _ = harness.RunErr(env, "make", "undeploy")
		}
	})
	kube := harness.NewClient(t, harness.ConfigFromKubeconfig(t, kubeconfig))
	var d appsv1.Deployment
	must(t, kube.Get(context.Background(), client.ObjectKey{Namespace: systemNamespace, Name: "myproxy-operator-controller-manager"}, &d))
	spec := d.Spec.Template.Spec.Containers[0]
	if spec.Image != image {
		t.Fatalf("the Deployment runs %q, want the pushed %q", spec.Image, image)
	}
	kubectl(t, "wait", "-n", systemNamespace, "--for=condition=Available", "deployment/"+d.Name, "--timeout=120s")
	pod := podOf(t, kube, systemNamespace, d.Spec.Selector.MatchLabels, image)
	if pod.Spec.ServiceAccountName != managerSA {
		t.Fatalf("the Pod runs as %q, want %q", pod.Spec.ServiceAccountName, managerSA)
	}

	from := time.Now()
	op := container{pod: pod, spec: spec, image: image}.start(t, kube)
	op.waitReady(t, spec)
	ns := harness.Namespace(t, kube, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	servesSample(t, ns)
	op.Stop(t)
	refusedNothing(t, "system:serviceaccount:"+systemNamespace+":"+managerSA, from)

	harness.Run(t, env, "make", "undeploy")
	undeployed = true
}

// servesSample applies the sample MyProxy in ns, waits until the running operator made it
// Available, then deletes it (the operator uninstalls its release).
func servesSample(t *testing.T, ns string) {
	t.Helper()
	name := applySample(t, ns)
	kubectl(t, "delete", "-n", ns, "myproxy.v1alpha1.gateway.example.com/"+name, "--timeout=120s")
}

// applySample applies the sample MyProxy in ns and waits until it is Available.
func applySample(t *testing.T, ns string) string {
	t.Helper()
	name := sampleName(t)
	kubectl(t, "apply", "-n", ns, "-f", filepath.Join(harness.RepoRoot(), sample))
	// By the sample's own version: the one kubectl prefers may have changed since its discovery
	// was cached (TestDeployServesConversions serves another).
	kubectl(t, "wait", "-n", ns, "--for=condition=Available", "myproxy.v1alpha1.gateway.example.com/"+name, "--timeout=120s")
	return name
}

// sampleName is the name of the sample MyProxy.
func sampleName(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(), sample))
	must(t, err)
	var obj struct{ Metadata struct{ Name string } }
	must(t, yaml.Unmarshal(raw, &obj))
	return obj.Metadata.Name
}

// refusedNothing fails t for each request of user since from that the authorizer refused.
func refusedNothing(t *testing.T, user string, from time.Time) {
	t.Helper()
	used, refused := harness.AuditedPermissions(t, filepath.Join(clusterDir, "logs", "audit.log"), user, from)
	for _, p := range harness.SortedPermissions(refused) {
		t.Errorf("refused to %s: %s", user, p)
	}
	t.Logf("%s used %d permissions, none refused", user, len(used))
}

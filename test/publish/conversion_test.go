package publish

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/test/harness"
)

// versionedProject is a copy of the project whose MyProxy chart renamed replicas replicaCount and
// declared it as v1beta1, the version after v1alpha1 (make manifests run).
func versionedProject(t *testing.T) string {
	t.Helper()
	project := harness.CopyProject(t)
	harness.RenameReplicas(t, project)
	harness.DeclareReplicasRenamed(t, project)
	harness.Run(t, nil, "make", "-C", project, "manifests")
	return project
}

// readAt reads a field of every MyProxy of ns at version, by name (standard output alone: kubectl
// warns of a deprecated version on standard error).
func readAt(ns, version, field string) (string, error) {
	out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", "myproxies."+version+".gateway.example.com", "-n", ns,
		"-o", `jsonpath={range .items[*]}{.metadata.name}={.spec.`+field+`} {end}`).Output()
	return strings.TrimSpace(string(out)), err
}

// keptAtBothVersions waits until the CRD stores v1beta1 alone, and until the sample in ns
// (replicas 2) reads the same at both versions (the CRD converts through the webhook once
// whoever provides its certificate has given it to the CRD).
func keptAtBothVersions(t *testing.T, ns, name string) {
	t.Helper()
	waitJSONPath(t, "", "crd/myproxies.gateway.example.com", "{.status.storedVersions}", `["v1beta1"]`)
	harness.Eventually(t, 120*time.Second, name+" read at both versions", func(context.Context) (bool, string) {
		alpha, errA := readAt(ns, "v1alpha1", "replicas")
		beta, errB := readAt(ns, "v1beta1", "replicaCount")
		return alpha == name+"=2" && beta == name+"=2", fmt.Sprintf("v1alpha1 %s (%v), v1beta1 %s (%v)", alpha, errA, beta, errB)
	})
}

// make deploy serves the conversion of a kind whose chart declares a new version: the CRD points
// at the conversion webhook's Service, the manager's certificate is provisioned into a Secret and
// its CA into the CRD without a manual step, and renewed when due (here, at a restart with a
// certificate about to end). The apiserver converts through the Pod's address: a MyProxy created
// at v1alpha1 under the chart before keeps its value at both versions, is migrated to v1beta1,
// and the deployed RBAC refuses nothing.
func TestDeployServesConversions(t *testing.T) {
	env := []string{"KUBECONFIG=" + kubeconfig}
	kube := harness.NewClient(t, harness.ConfigFromKubeconfig(t, kubeconfig))
	ctx := context.Background()
	first := pushOperator(t, "0.1.0")
	harness.Run(t, env, "make", "deploy", "IMG="+first)
	project := harness.RepoRoot()
	t.Cleanup(func() { _, _ = harness.RunErr(env, "make", "-C", project, "undeploy") })
	manager := func(image string) running {
		var d appsv1.Deployment
		must(t, kube.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: "myproxy-operator-controller-manager"}, &d))
		kubectl(t, "rollout", "status", "-n", systemNamespace, "deployment/"+d.Name, "--timeout=120s")
		spec := d.Spec.Template.Spec.Containers[0]
		op := container{pod: podOf(t, kube, systemNamespace, d.Spec.Selector.MatchLabels, image), spec: spec, image: image}.start(t, kube)
		op.waitReady(t, spec)
		return op
	}
	op := manager(first)
	ns := harness.Namespace(t, kube, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	name := applySample(t, ns)
	op.Stop(t)

	project = versionedProject(t)
	image := printed(harness.Run(t, nil, "make", "-s", "--no-print-directory", "-C", project, "IMAGES="+t.TempDir(), "image-push",
		"VERSION=0.2.0", "IMG="+registry+"/myproxy-operator:v0.2.0"))
	from := time.Now()
	harness.Run(t, env, "make", "-C", project, "deploy", "IMG="+image)
	if got := kubectl(t, "get", "crd", "myproxies.gateway.example.com", "-o", "jsonpath={.spec.conversion.webhook.clientConfig.service.name}"); got != "myproxy-operator-controller-manager-service" {
		t.Fatalf("the CRD converts through %q, want the webhook's Service", got)
	}
	op = manager(image)
	keptAtBothVersions(t, ns, name)
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: systemNamespace, Name: "myproxy-operator-controller-manager-service-cert"}
	must(t, kube.Get(ctx, key, secret))

	// A certificate about to end is renewed: conversions go on through the new one.
	op.Stop(t)
	secret.Data = expiringCertificate(t, "myproxy-operator-controller-manager-service."+systemNamespace+".svc")
	must(t, kube.Update(ctx, secret))
	op = manager(image)
	harness.Eventually(t, 60*time.Second, "the certificate renewed", func(ctx context.Context) (bool, string) {
		if err := kube.Get(ctx, key, secret); err != nil {
			return false, err.Error()
		}
		b, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
		cert, err := x509.ParseCertificate(b.Bytes)
		return err == nil && cert.NotAfter.After(time.Now().Add(300*24*time.Hour)), "ends " + cert.NotAfter.String()
	})
	kubectl(t, "patch", "-n", ns, "myproxy.v1alpha1.gateway.example.com/"+name, "--type=merge", "-p", `{"spec":{"replicas":3}}`)
	waitJSONPath(t, ns, "deployment/"+name, "{.spec.replicas}", "3")
	kubectl(t, "delete", "-n", ns, "myproxy/"+name, "--timeout=120s")
	op.Stop(t)
	refusedNothing(t, "system:serviceaccount:"+systemNamespace+":"+managerSA, from)
}

// expiringCertificate is a webhook certificate for host that ends in a day, as its Secret holds it.
func expiringCertificate(t *testing.T, host string) map[string][]byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	must(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	must(t, err)
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		"ca.crt": cert}
}

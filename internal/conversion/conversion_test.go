package conversion

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
)

const crdName = "things.x.example.com"

// crd is a CRD of Thing serving v1 (stored) and v1alpha1, whose spec schemas hold replicaCount
// and extra (v1), and replicas and legacy (v1alpha1).
func crd(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: `+crdName+`}
spec:
  group: x.example.com
  conversion:
    strategy: Webhook
    webhook: {conversionReviewVersions: [v1], clientConfig: {url: "https://localhost:9443/convert"}}
  versions:
  - name: v1
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {replicaCount: {type: integer}, extra: {type: string}}}}}}
  - name: v1alpha1
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {replicas: {type: integer}, legacy: {type: string}}}}}}
`), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func webhookOf(t *testing.T) *Webhook {
	t.Helper()
	k, err := chartapi.Parse([]byte("versions:\n- name: v1\n- name: v1alpha1\n  changes:\n  - move: {from: replicas, to: replicaCount}\n" +
		"  - remove: {field: legacy, why: gone}\n"))
	if err != nil {
		t.Fatal(err)
	}
	v1alpha1 := crd(t).Object["spec"].(map[string]any)["versions"].([]any)[1].(map[string]any)
	k.Versions[1].Published = v1alpha1 // as the chart keeps it
	decl, err := chartapi.Compile(k)
	if err != nil {
		t.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Group: "x.example.com", Version: "v1", Kind: "Thing"}
	return &Webhook{Kinds: map[schema.GroupKind]Kind{gvk.GroupKind(): {CRD: crdName, Storage: gvk, Decl: decl}}}
}

func review(t *testing.T, url, apiVersion string, objects ...string) map[string]any {
	t.Helper()
	var raws []string
	raws = append(raws, objects...)
	body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"u1","desiredAPIVersion":"` + apiVersion +
		`","objects":[` + strings.Join(raws, ",") + `]}}`
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out["response"].(map[string]any)
}

// The webhook answers a ConversionReview as the apiserver sends it: every object converted to the
// version asked for; what the version has no place for travels in an annotation and comes back.
func TestTheWebhookConvertsBothWaysKeepingWhatAVersionCannotHold(t *testing.T) {
	srv := httptest.NewServer(webhookOf(t))
	defer srv.Close()
	old := `{"apiVersion":"x.example.com/v1alpha1","kind":"Thing","metadata":{"name":"a","namespace":"n"},"spec":{"replicas":3,"legacy":"x"}}`
	resp := review(t, srv.URL, "x.example.com/v1", old)
	if resp["uid"] != "u1" || resp["result"].(map[string]any)["status"] != "Success" {
		t.Fatalf("response %v", resp)
	}
	up := resp["convertedObjects"].([]any)[0].(map[string]any)
	if up["apiVersion"] != "x.example.com/v1" || showJSON(up["spec"]) != `{"replicaCount":3}` {
		t.Fatalf("converted up: %s", showJSON(up))
	}
	kept := up["metadata"].(map[string]any)["annotations"].(map[string]any)[names.ConversionAnnotation]
	if kept != `{"v1alpha1":{"legacy":"x"}}` {
		t.Errorf("kept %v", kept)
	}
	// Written at v1 with a field v1alpha1 has no place for, read back at v1alpha1, written
	// again there and read at v1: nothing is lost either way.
	up["spec"].(map[string]any)["extra"] = "new"
	raw, _ := json.Marshal(up)
	down := review(t, srv.URL, "x.example.com/v1alpha1", string(raw))["convertedObjects"].([]any)[0].(map[string]any)
	if showJSON(down["spec"]) != `{"legacy":"x","replicas":3}` {
		t.Errorf("converted down: %s", showJSON(down))
	}
	raw, _ = json.Marshal(down)
	again := review(t, srv.URL, "x.example.com/v1", string(raw))["convertedObjects"].([]any)[0].(map[string]any)
	if showJSON(again["spec"]) != `{"extra":"new","replicaCount":3}` {
		t.Errorf("round trip: %s", showJSON(again))
	}
	bad := `{"apiVersion":"x.example.com/v1alpha1","kind":"Other","metadata":{"name":"b"}}`
	if r := review(t, srv.URL, "x.example.com/v1", old, bad)["result"].(map[string]any); r["status"] != "Failure" ||
		!strings.Contains(r["message"].(string), "no conversion of Other.x.example.com") {
		t.Errorf("an undeclared kind: %v", r)
	}
}

func showJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// certified reads the certificate in dir and checks that the CA bundle trusts it for name.
func certified(t *testing.T, dir string, bundle []byte, name string) *x509.Certificate {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(raw)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: name}); err != nil {
		t.Errorf("the certificate in %s is not trusted for %s: %v", dir, name, err)
	}
	return cert
}

func injected(t *testing.T, c client.Client) (bundle []byte, config map[string]any) {
	t.Helper()
	u := crd(t)
	if err := c.Get(context.Background(), client.ObjectKey{Name: crdName}, u); err != nil {
		t.Fatal(err)
	}
	config, _, _ = unstructured.NestedMap(u.Object, "spec", "conversion", "webhook", "clientConfig")
	bundle, _ = base64.StdEncoding.DecodeString(config["caBundle"].(string))
	return bundle, config
}

// Behind a Service (make deploy), the certificate is made once into a Secret every replica
// shares, written where the webhook server reads it and trusted by the CRD; renewed before it
// ends, while the CRD trusts the old one too.
func TestTheCertificateIsProvisionedAndRenewed(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(crd(t)).Build()
	certs := &Certs{Dir: t.TempDir(), Service: "hook", Namespace: "ops", CRDs: []string{crdName}, Client: c}
	if _, renew, err := certs.Prepare(ctx); err != nil || renew == nil {
		t.Fatalf("Prepare: %v (renews: %v)", err, renew != nil)
	}
	bundle, config := injected(t, c)
	first := certified(t, certs.Dir, bundle, "hook.ops.svc")
	if config["url"] != "https://localhost:9443/convert" {
		t.Errorf("the clientConfig's reference changed: %v", config)
	}
	// Nothing is due: nothing changes.
	if err := certs.ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if again := certified(t, certs.Dir, bundle, "hook.ops.svc"); !again.Equal(first) {
		t.Error("a certificate that is not due was renewed")
	}
	// The certificate ends within a month: renewed, the old one trusted beside it until it ends.
	secret := &corev1.Secret{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "ops", Name: "hook-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	cert, key, err := issue(time.Now().Add(-certLifetime+24*time.Hour), certs.hosts()...)
	if err != nil {
		t.Fatal(err)
	}
	secret.Data = map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key, bundleKey: cert}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if err := certs.ensure(ctx); err != nil {
		t.Fatal(err)
	}
	bundle, _ = injected(t, c)
	if n := bytes.Count(bundle, []byte("BEGIN CERTIFICATE")); n != 2 {
		t.Errorf("the CRD trusts %d certificates, want the new one and the old one", n)
	}
	if renewed := certified(t, certs.Dir, bundle, "hook.ops.svc"); renewed.NotAfter.Before(time.Now().Add(certRenewal)) {
		t.Errorf("the certificate ends %s: not renewed", renewed.NotAfter)
	}
}

// A Secret write that fails names the Secret, never the private key it would have held.
func TestAFailedCertificateWriteNamesTheSecretNotTheKey(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(crd(t)).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return errors.New("refused")
		},
	}).Build()
	certs := &Certs{Dir: t.TempDir(), Service: "hook", Namespace: "ops", CRDs: []string{crdName}, Client: c}
	err := certs.ensure(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Secret ops/hook-cert") || strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Fatalf("ensure: %v, want an error naming the Secret ops/hook-cert and no key", err)
	}
}

// Out of a cluster (make run), the certificate is made at start for the webhook's host, and the
// CRD names the webhook by URL; a certificate already in the directory (OLM's) is used as it is.
func TestTheCertificateOutOfAClusterAndProvided(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithObjects(crd(t)).Build()
	certs := &Certs{Dir: t.TempDir(), URL: "https://127.0.0.1:19443" + Path, CRDs: []string{crdName}, Client: c}
	dir, renew, err := certs.Prepare(ctx)
	if err != nil || renew != nil || dir == certs.Dir {
		t.Fatalf("Prepare = %s, renews %v, %v; want a directory of its own, nothing renewed", dir, renew != nil, err)
	}
	bundle, config := injected(t, c)
	if config["url"] != certs.URL {
		t.Errorf("the CRD names %v", config["url"])
	}
	cert := certified(t, dir, bundle, "localhost")
	if len(cert.IPAddresses) != 1 || cert.IPAddresses[0].String() != "127.0.0.1" {
		t.Errorf("the certificate is for %v %v, want 127.0.0.1", cert.DNSNames, cert.IPAddresses)
	}
	provided := &Certs{Dir: dir, CRDs: []string{crdName}, Client: fake.NewClientBuilder().Build()}
	if got, renew, err := provided.Prepare(ctx); got != dir || renew != nil || err != nil {
		t.Errorf("a certificate provided in %s: Prepare = %s, %v", dir, got, err)
	}
}

package chartapi

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/example/myproxy-operator/test/certs"
)

func TestTranslate(t *testing.T) {
	secret := func(name string, typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}, Type: typ, Data: data}
	}
	data := func(p certs.Pair) map[string][]byte { return map[string][]byte{"tls.crt": p.Cert, "tls.key": p.Key} }
	valid := certs.Valid(t, "good")
	expired := certs.SelfSigned(t, "old", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	future := certs.SelfSigned(t, "new", time.Now().Add(24*time.Hour), time.Now().Add(48*time.Hour))
	other := certs.Valid(t, "other")
	reader := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(
		secret("good", corev1.SecretTypeTLS, data(valid)),
		secret("opaque", corev1.SecretTypeOpaque, data(valid)),
		secret("empty", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": valid.Cert}),
		secret("expired", corev1.SecretTypeTLS, data(expired)),
		secret("future", corev1.SecretTypeTLS, data(future)),
		secret("mismatched", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": valid.Cert, "tls.key": other.Key}),
		secret("not-pem", corev1.SecretTypeTLS, map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}),
	).Build()
	checks := myProxyChecks(t)
	cases := []struct {
		name   string
		spec   map[string]any
		errHas string
	}{
		{name: "no TLS", spec: map[string]any{"replicas": int64(2)}, errHas: ""},
		{name: "TLS off", spec: map[string]any{"tls": map[string]any{"secretName": ""}}, errHas: ""},
		{name: "existing TLS Secret", spec: map[string]any{"tls": map[string]any{"secretName": "good"}}, errHas: ""},
		{name: "missing Secret", spec: map[string]any{"tls": map[string]any{"secretName": "nope"}},
			errHas: `spec.tls.secretName: Secret "nope" not found in namespace "team"`},
		{name: "wrong type", spec: map[string]any{"tls": map[string]any{"secretName": "opaque"}}, errHas: `has type "Opaque", want "kubernetes.io/tls"`},
		{name: "incomplete pair", spec: map[string]any{"tls": map[string]any{"secretName": "empty"}}, errHas: `Secret "empty" lacks tls.key`},
		{name: "expired certificate", spec: map[string]any{"tls": map[string]any{"secretName": "expired"}}, errHas: `Secret "expired": the certificate in tls.crt expired at`},
		{name: "not yet valid", spec: map[string]any{"tls": map[string]any{"secretName": "future"}}, errHas: "is not valid before"},
		{name: "key of another certificate", spec: map[string]any{"tls": map[string]any{"secretName": "mismatched"}},
			errHas: "not a PEM certificate and its private key: tls: private key does not match public key"},
		{name: "not PEM", spec: map[string]any{"tls": map[string]any{"secretName": "not-pem"}}, errHas: "not a PEM certificate and its private key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recorder := record.NewFakeRecorder(1)
			obj := &unstructured.Unstructured{Object: map[string]any{"spec": c.spec}}
			obj.SetNamespace("team")
			vals, err := Translator{Reader: reader, Recorder: recorder, Checks: checks}.Translate(context.Background(), obj)
			if c.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(vals) != len(c.spec) {
					t.Errorf("values %v, want the spec %v", vals, c.spec)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Fatalf("error %v, want %q", err, c.errHas)
			}
			if ev := <-recorder.Events; !strings.HasPrefix(ev, "Warning InvalidSpec spec.tls.secretName") {
				t.Errorf("event %q", ev)
			}
		})
	}
}

// myProxyChecks are the checks the project's chart declares: these tests are the TLS Secret
// check as MyProxy users see it.
func myProxyChecks(t testing.TB) []Check {
	t.Helper()
	k, err := Load(filepath.Join("..", "..", "helm-charts", "myproxy"))
	if err != nil {
		t.Fatal(err)
	}
	if len(k.Checks) == 0 {
		t.Fatal("the myproxy chart declares no check")
	}
	return k.Checks
}

func TestSecretCheckOfAnyValue(t *testing.T) {
	reader := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "team"}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"username": []byte("u")},
	}).Build()
	checks := []Check{{Secret: &SecretCheck{Value: "auth.existingSecret", Keys: []string{"username", "password"}}}}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"auth": map[string]any{"existingSecret": "creds"}}}}
	obj.SetNamespace("team")
	_, err := Translator{Reader: reader, Recorder: record.NewFakeRecorder(1), Checks: checks}.Translate(context.Background(), obj)
	if err == nil || err.Error() != `spec.auth.existingSecret: Secret "creds" lacks password` {
		t.Fatalf("error %v", err)
	}
}

// A null in the spec reaches Helm as it is: it deletes that key from the chart's defaults, as a
// null in a values file does, at Helm's coalescing of the values.
func TestTranslateHandsNullsOn(t *testing.T) {
	spec := map[string]any{"tls": nil, "resources": map[string]any{"limits": map[string]any{"memory": nil, "cpu": "1"}},
		"routes": []any{map[string]any{"path": "/", "timeoutSeconds": nil}}}
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	vals, err := Translator{Recorder: record.NewFakeRecorder(1), Checks: myProxyChecks(t)}.Translate(context.Background(), obj)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(vals, spec) {
		t.Errorf("values %v, want the spec %v, nulls included", vals, spec)
	}
}

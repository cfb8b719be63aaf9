package chartapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/example/myproxy-operator/test/certs"
)

// FuzzTranslate feeds arbitrary MyProxy specs (as the apiserver could store them, before or
// without the CRD schema) to the value translation: it must never panic, and every refusal
// must name the field. The seed corpus runs in every `go test`; `go test -fuzz=FuzzTranslate
// ./internal/chartapi` explores further.
func FuzzTranslate(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"replicas": 2, "routes": [{"path": "/", "upstream": "http://a:80"}]}`,
		`{"tls": {"secretName": "good"}}`,
		`{"tls": {"secretName": "missing"}}`,
		`{"tls": {"secretName": 42}}`,
		`{"tls": "not an object"}`,
		`{"tls": null}`,
		`{"tls": {"secretName": ""}}`,
		`{"tls": {"secretName": "` + strings.Repeat("x", 300) + `"}}`,
		`{"tls": {"secretName": "ünïcødé"}}`,
		`{"defaultResponse": {"body": "` + strings.Repeat("€", 1000) + `"}}`,
	} {
		f.Add([]byte(seed))
	}
	pair := certs.Valid(f, "good")
	reader := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "good", Namespace: "team"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": pair.Cert, "tls.key": pair.Key},
	}).Build()
	tr := Translator{Reader: reader, Recorder: record.NewFakeRecorder(1 << 16), Checks: myProxyChecks(f)}

	f.Fuzz(func(t *testing.T, specJSON []byte) {
		var spec any
		if err := json.Unmarshal(specJSON, &spec); err != nil {
			t.Skip("not JSON: the apiserver would refuse it")
		}
		obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		obj.SetNamespace("team")
		obj.SetName("p")
		vals, err := tr.Translate(context.Background(), obj)
		if err != nil {
			if !strings.Contains(err.Error(), "spec") {
				t.Errorf("refusal %q does not name the field", err)
			}
			return
		}
		if m, ok := spec.(map[string]any); ok && len(m) != len(vals) {
			t.Errorf("accepted spec %s became values %v", specJSON, vals)
		}
	})
}

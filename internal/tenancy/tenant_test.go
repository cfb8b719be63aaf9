package tenancy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Helm's client acts as the ServiceAccount of the custom resource's own namespace, and the
// operator's config is left as it was (the caches keep the operator's identity).
func TestAsActsAsTheNamespacesServiceAccount(t *testing.T) {
	base := &rest.Config{Host: "https://apiserver", BearerToken: "operator"}
	cfg := As(base, "team", "deployer")
	if got, want := cfg.Impersonate.UserName, "system:serviceaccount:team:deployer"; got != want {
		t.Errorf("impersonates %q, want %q", got, want)
	}
	if len(cfg.Impersonate.Groups) != 0 {
		t.Errorf("impersonates groups %v: the apiserver derives a ServiceAccount's own", cfg.Impersonate.Groups)
	}
	if base.Impersonate.UserName != "" || cfg.BearerToken != "operator" {
		t.Errorf("the operator's config changed (%+v) or the copy lost its credentials", base.Impersonate)
	}
}

// A Secret read for a chart's check is one request as the ServiceAccount of the Secret's own
// namespace, whichever namespace came before.
func TestSecretReaderReadsAsTheNamespacesServiceAccount(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+" as "+r.Header.Get("Impersonate-User"))
		secret := corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: "tls"}, Type: corev1.SecretTypeTLS}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(secret)
	}))
	defer srv.Close()
	r, err := NewSecretReader(&rest.Config{Host: srv.URL}, "deployer")
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"team", "other"} {
		var secret corev1.Secret
		if err := r.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "tls"}, &secret); err != nil {
			t.Fatal(err)
		}
		if secret.Type != corev1.SecretTypeTLS {
			t.Errorf("read a Secret of type %q, want the served one", secret.Type)
		}
	}
	want := []string{"/api/v1/namespaces/team/secrets/tls as system:serviceaccount:team:deployer",
		"/api/v1/namespaces/other/secrets/tls as system:serviceaccount:other:deployer"}
	if strings.Join(asked, "\n") != strings.Join(want, "\n") {
		t.Errorf("asked %q, want %q", asked, want)
	}
	if err := r.Get(context.Background(), client.ObjectKey{Namespace: "team", Name: "x"}, &corev1.ConfigMap{}); err == nil {
		t.Error("read a ConfigMap: it reads Secrets only")
	}
}

func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{"deployer": true, "my-proxy.deployer": true, "": false,
		"system:serviceaccount:a:b": false, "Deployer": false, "a/b": false} {
		if err := CheckName(name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v", name, err, ok)
		}
	}
}

func TestMissingErrorNamesTheAccountAndTheSetting(t *testing.T) {
	msg := (&MissingError{Namespace: "team", Name: "deployer"}).Error()
	for _, want := range []string{"ServiceAccount team/deployer does not exist", ServiceAccountKey, "--" + DefaultServiceAccountFlag} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not name %q", msg, want)
		}
	}
}

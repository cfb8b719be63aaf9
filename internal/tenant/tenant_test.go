package tenant

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Helm's client acts as the ServiceAccount of the custom resource's own namespace, and the
// operator's config is left as it was (the caches keep the operator's identity).
func TestImpersonatingActsAsTheNamespacesServiceAccount(t *testing.T) {
	base := &rest.Config{Host: "https://apiserver", BearerToken: "operator"}
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "edge"}}
	cfg, err := Impersonating("deployer")(context.Background(), obj, base)
	if err != nil {
		t.Fatal(err)
	}
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
	for _, want := range []string{"ServiceAccount team/deployer does not exist", Key, "--" + Flag} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not name %q", msg, want)
		}
	}
}

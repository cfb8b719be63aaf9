// Translator translates a custom resource into its chart's values. The spec already is the
// values (the CRD schema comes from values.schema.json); what remains is what a schema cannot
// check because it depends on other objects: the checks the chart's kind.yaml declares, such as
// "the Secret that tls.secretName names exists and holds a valid certificate". The kinds of check
// are here; which value each applies to is the chart's.

package chartapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
)

// Translator turns a custom resource into chart values after running the declared checks.
// Its errors name the field; the Helm reconciler puts them in the Irreconcilable condition
// and retries with backoff.
type Translator struct {
	// Reader reads Secrets directly from the apiserver, so the operator caches no Secret data,
	// with the identity the kind's releases run as (package tenancy), so that a check reads no
	// more than the release's own lookup of the same Secret may.
	Reader   SecretReader
	Recorder record.EventRecorder
	Checks   []Check
}

// SecretReader reads the Secret a check names: a client.Reader, or tenancy.SecretReader.
type SecretReader interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// Translate returns the values of obj, its spec, once the checks pass.
func (t Translator) Translate(ctx context.Context, obj *unstructured.Unstructured) (map[string]any, error) {
	spec, _, err := unstructured.NestedMap(obj.Object, "spec")
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	for _, c := range t.Checks {
		if c.Secret == nil {
			continue
		}
		if err := t.checkSecret(ctx, obj.GetNamespace(), spec, *c.Secret); err != nil {
			t.Recorder.Event(obj, corev1.EventTypeWarning, names.ReasonInvalidSpec, err.Error())
			return nil, err
		}
	}
	return spec, nil
}

// ValueAt returns the string at a dotted path of the values ("" when absent or not a string).
func ValueAt(spec map[string]any, path string) string {
	name, _, _ := unstructured.NestedString(spec, strings.Split(path, ".")...)
	return name
}

func (t Translator) checkSecret(ctx context.Context, namespace string, spec map[string]any, c SecretCheck) error {
	name := ValueAt(spec, c.Value)
	if name == "" {
		return nil
	}
	field := "spec." + c.Value
	var secret corev1.Secret
	err := t.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &secret)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: Secret %q not found in namespace %q", field, name, namespace)
	case err != nil:
		return fmt.Errorf("%s: reading Secret %q: %w", field, name, err)
	case c.Type != "" && string(secret.Type) != c.Type:
		return fmt.Errorf("%s: Secret %q has type %q, want %q", field, name, secret.Type, c.Type)
	}
	missing := slices.DeleteFunc(slices.Clone(c.Keys), func(k string) bool { return len(secret.Data[k]) > 0 })
	if len(missing) > 0 {
		return fmt.Errorf("%s: Secret %q lacks %s", field, name, strings.Join(missing, " and "))
	}
	if c.TLSKeyPair {
		if err := checkPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey], time.Now()); err != nil {
			return fmt.Errorf("%s: Secret %q: %w", field, name, err)
		}
	}
	return nil
}

// checkPair reports a pair nginx would refuse to start with (not PEM, a key that does not match
// the certificate) or would serve to clients that refuse it (expired, not yet valid).
func checkPair(certPEM, keyPEM []byte, now time.Time) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("%s and %s are not a PEM certificate and its private key: %w",
			corev1.TLSCertKey, corev1.TLSPrivateKeyKey, err)
	}
	leaf := pair.Leaf // X509KeyPair parses it (since Go 1.23)
	switch {
	case now.After(leaf.NotAfter):
		return fmt.Errorf("the certificate in %s expired at %s", corev1.TLSCertKey, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("the certificate in %s is not valid before %s", corev1.TLSCertKey, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

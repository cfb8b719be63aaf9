// Package values translates a MyProxy into the chart's values. The spec already is the values
// (the CRD schema comes from values.schema.json); what remains is what a schema cannot check
// because it depends on other objects: the TLS Secret that spec.tls.secretName names.
package values

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReasonInvalidSpec is the Event reason for a spec that passed the schema but cannot be used.
const ReasonInvalidSpec = "InvalidSpec"

// Translator turns a MyProxy into chart values after checking the objects it refers to.
// Its errors name the field; the Helm reconciler puts them in the Irreconcilable condition
// and retries with backoff.
type Translator struct {
	// Reader reads Secrets directly from the apiserver, so the operator caches no Secret data.
	Reader   client.Reader
	Recorder record.EventRecorder
}

// Translate implements helm-operator-plugins' values.Translator.
func (t Translator) Translate(ctx context.Context, obj *unstructured.Unstructured) (chartutil.Values, error) {
	spec, _, err := unstructured.NestedMap(obj.Object, "spec")
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if err := t.checkTLSSecret(ctx, obj.GetNamespace(), spec); err != nil {
		t.Recorder.Event(obj, corev1.EventTypeWarning, ReasonInvalidSpec, err.Error())
		return nil, err
	}
	return spec, nil
}

// TLSSecretName returns spec.tls.secretName ("" when TLS is off).
func TLSSecretName(spec map[string]any) string {
	name, _, _ := unstructured.NestedString(spec, "tls", "secretName")
	return name
}

func (t Translator) checkTLSSecret(ctx context.Context, namespace string, spec map[string]any) error {
	name := TLSSecretName(spec)
	if name == "" {
		return nil
	}
	var secret corev1.Secret
	err := t.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &secret)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("spec.tls.secretName: Secret %q not found in namespace %q", name, namespace)
	case err != nil:
		return fmt.Errorf("spec.tls.secretName: reading Secret %q: %w", name, err)
	case secret.Type != corev1.SecretTypeTLS:
		return fmt.Errorf("spec.tls.secretName: Secret %q has type %q, want %q", name, secret.Type, corev1.SecretTypeTLS)
	case len(secret.Data[corev1.TLSCertKey]) == 0 || len(secret.Data[corev1.TLSPrivateKeyKey]) == 0:
		return fmt.Errorf("spec.tls.secretName: Secret %q lacks %s or %s", name, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	if err := checkPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey], time.Now()); err != nil {
		return fmt.Errorf("spec.tls.secretName: Secret %q: %w", name, err)
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
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return fmt.Errorf("%s: %w", corev1.TLSCertKey, err)
		}
	}
	switch {
	case now.After(leaf.NotAfter):
		return fmt.Errorf("the certificate in %s expired at %s", corev1.TLSCertKey, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("the certificate in %s is not valid before %s", corev1.TLSCertKey, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

package conversion

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Certificate lifetimes: a certificate is renewed a month before it ends, its CA a year before;
// while a renewed CA's predecessor is valid, the CRDs trust both, so that a replica still
// serving the old certificate is trusted until it reads the new one.
const (
	caLifetime     = 10 * 365 * 24 * time.Hour
	certLifetime   = 365 * 24 * time.Hour
	caRenewal      = 365 * 24 * time.Hour
	certRenewal    = 30 * 24 * time.Hour
	renewalChecked = time.Hour
)

// Certs gives the conversion webhook its serving certificate, and the CRDs that convert through
// it the CA that trusts it, in one of three ways:
//   - Service set (make deploy): a CA and a certificate for the Service, kept in the Secret
//     "<Service>-cert" of Namespace, shared by every replica, renewed before either ends, written
//     into Dir and the CA into each CRD's clientConfig;
//   - else, a certificate already in Dir (OLM mounts one, and sets the CRDs' clientConfig): used;
//   - else (make run, tests): a CA and a certificate for URL's host, made at start and held for the
//     process's life, written into a directory of its own; each CRD names URL and that CA.
type Certs struct {
	Dir, Service, Namespace, URL string
	CRDs                         []string
	// Client reads and writes the Secret and the CRDs directly, and is not fenced: every
	// replica serves, leader or not.
	Client client.Client
}

// Prepare makes the certificate ready before the webhook server starts, and returns the
// directory it is in and, when the certificate is to be renewed, the function that renews it
// until ctx ends.
func (c *Certs) Prepare(ctx context.Context) (dir string, renew func(context.Context) error, err error) {
	if c.Service != "" {
		if err := c.ensure(ctx); err != nil {
			return "", nil, err
		}
		return c.Dir, func(ctx context.Context) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(renewalChecked):
					if err := c.ensure(ctx); err != nil {
						logf.FromContext(ctx).Error(err, "cannot renew the conversion webhook's certificate; retrying")
					}
				}
			}
		}, nil
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "tls.crt")); err == nil {
		return c.Dir, nil, nil
	}
	if dir, err = os.MkdirTemp("", "conversion-webhook-"); err != nil {
		return "", nil, err
	}
	host := "localhost"
	if u, err := url.Parse(c.URL); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	ca, err := issue(nil, nil, time.Now())
	if err == nil {
		var cert keyPair
		if cert, err = issue(&ca, []string{host, "localhost"}, time.Now()); err == nil {
			err = errors.Join(writeFiles(dir, cert), c.inject(ctx, ca.certPEM))
		}
	}
	return dir, nil, err
}

// ensure renews what is due in the Secret (making it if absent), writes the certificate into
// Dir and the CA bundle into the CRDs.
func (c *Certs) ensure(ctx context.Context) error {
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Service + "-cert"}
	s := &corev1.Secret{}
	err := c.Client.Get(ctx, key, s)
	if apierrors.IsNotFound(err) {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Type: corev1.SecretTypeTLS}
	} else if err != nil {
		return fmt.Errorf("reading the webhook certificate's Secret %s: %w", key, err)
	}
	now := time.Now()
	dns := []string{c.Service, c.Service + "." + c.Namespace, c.Service + "." + c.Namespace + ".svc",
		c.Service + "." + c.Namespace + ".svc.cluster.local"}
	ca, caOK := parsePair(s.Data["ca.crt"], s.Data["ca.key"])
	cert, certOK := parsePair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	changed := false
	if !caOK || now.Add(caRenewal).After(ca.cert.NotAfter) {
		if ca, err = issue(nil, nil, now); err != nil {
			return err
		}
		certOK, changed = false, true
	}
	if !certOK || now.Add(certRenewal).After(cert.cert.NotAfter) || !slices.Equal(cert.cert.DNSNames, dns) ||
		cert.cert.CheckSignatureFrom(ca.cert) != nil {
		if cert, err = issue(&ca, dns, now); err != nil {
			return err
		}
		changed = true
	}
	bundle := trusted(append(slices.Clone(ca.certPEM), s.Data["ca.crt"]...), now)
	if changed || !bytes.Equal(bundle, s.Data["ca.crt"]) {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data["ca.crt"], s.Data["ca.key"] = bundle, ca.keyPEM
		s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey] = cert.certPEM, cert.keyPEM
		if s.ResourceVersion == "" {
			err = c.Client.Create(ctx, s)
		} else {
			err = c.Client.Update(ctx, s) // of two replicas renewing at once, one fails, and reads the other's next
		}
		if err != nil {
			return fmt.Errorf("writing the webhook certificate's Secret %s: %w", key, err)
		}
	}
	return errors.Join(writeFiles(c.Dir, cert), c.inject(ctx, bundle))
}

// inject writes the CA bundle, and URL when set, into the conversion clientConfig of each CRD
// that converts through the webhook, where they differ.
func (c *Certs) inject(ctx context.Context, bundle []byte) error {
	var errs []error
	for _, name := range c.CRDs {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			errs = append(errs, err)
			continue
		}
		config, _, _ := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig")
		if strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy"); strategy != "Webhook" {
			logf.FromContext(ctx).Info("the CRD does not convert through the webhook (make install of this chart's CRD?)", "crd", name)
			continue
		}
		want := map[string]any{"caBundle": base64.StdEncoding.EncodeToString(bundle)}
		if c.URL != "" {
			want["url"], want["service"] = c.URL, nil
		}
		if config["caBundle"] == want["caBundle"] && (c.URL == "" || config["url"] == c.URL && config["service"] == nil) {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{"webhook": map[string]any{"clientConfig": want}}}})
		if err := c.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch)); err != nil {
			errs = append(errs, fmt.Errorf("injecting the webhook's CA into CRD %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// keyPair is a certificate and its key, parsed and as PEM.
type keyPair struct {
	cert            *x509.Certificate
	key             crypto.Signer
	certPEM, keyPEM []byte
}

// issue makes a CA (ca nil) or a serving certificate for dns that ca signs.
func issue(ca *keyPair, dns []string, now time.Time) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return keyPair{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caLifetime),
		Subject: pkix.Name{CommonName: "myproxy-operator conversion webhook CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	parent, signer := tmpl, crypto.Signer(key)
	if ca != nil {
		tmpl.IsCA, tmpl.NotAfter, tmpl.KeyUsage = false, now.Add(certLifetime), x509.KeyUsageDigitalSignature
		tmpl.Subject.CommonName, tmpl.ExtKeyUsage = dns[0], []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, name := range dns {
			if ip := net.ParseIP(name); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, name)
			}
		}
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return keyPair{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	cert, err := x509.ParseCertificate(der)
	return keyPair{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}, err
}

// parsePair parses the first certificate of certPEM and its key.
func parsePair(certPEM, keyPEM []byte) (keyPair, bool) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return keyPair{}, false
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return keyPair{}, false
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	signer, ok := key.(crypto.Signer)
	if err != nil || !ok {
		return keyPair{}, false
	}
	return keyPair{cert: cert, key: signer, certPEM: pem.EncodeToMemory(cb), keyPEM: keyPEM}, true
}

// trusted is the bundle of the distinct certificates of pemBundle still valid at now.
func trusted(pemBundle []byte, now time.Time) []byte {
	var out []byte
	for rest := pemBundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if p := pem.EncodeToMemory(b); err == nil && now.Before(c.NotAfter) && !bytes.Contains(out, p) {
			out = append(out, p...)
		}
	}
}

// writeFiles writes a certificate where the webhook server reads it (and reloads it when it
// changes), each file replaced at once.
func writeFiles(dir string, kp keyPair) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, content := range map[string][]byte{"tls.crt": kp.certPEM, "tls.key": kp.keyPEM} {
		path := filepath.Join(dir, name)
		if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, content) {
			continue
		}
		if err := os.WriteFile(path+".new", content, 0o600); err != nil {
			return err
		}
		if err := os.Rename(path+".new", path); err != nil {
			return err
		}
	}
	return nil
}

package conversion

import (
	"bytes"
	"context"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// The webhook's certificate is self-signed, and the CRDs trust it as it is. It lasts a year and
// is renewed a month before it ends; the CRDs then trust the old one and the new one until the
// old one ends, so that a replica still serving the old one stays trusted until it reads the new.
const (
	// bundleKey holds, in the Secret, the certificates the CRDs trust.
	bundleKey    = "ca.crt"
	certLifetime = 365 * 24 * time.Hour
	certRenewal  = 30 * 24 * time.Hour
	renewalCheck = time.Hour
)

// Certs gives the conversion webhook its certificate, and the CRDs that convert through it the
// bundle that trusts it, in one of three ways:
//   - Service set (make deploy): the certificate of the Service, in the Secret "<Service>-cert" of
//     Namespace that every replica shares, made when absent and renewed when due, written into Dir
//     and trusted by each CRD;
//   - else, a certificate already in Dir (OLM mounts one, and points the CRDs at it): used;
//   - else (make run, tests): a certificate of URL's host, made at start for the process's life,
//     written into a directory of its own, and each CRD pointed at URL and trusting it.
type Certs struct {
	Dir, Service, Namespace, URL string
	CRDs                         []string
	// Client reads and writes the Secret and the CRDs directly, and is not fenced: every
	// replica serves, leader or not.
	Client client.Client
}

// Prepare makes the certificate ready before the webhook server starts; it returns the
// directory the server reads it from and, when it is to be renewed, what renews it.
func (c *Certs) Prepare(ctx context.Context) (dir string, renew func(context.Context) error, err error) {
	switch _, statErr := os.Stat(filepath.Join(c.Dir, corev1.TLSCertKey)); {
	case c.Service != "":
		return c.Dir, c.renew, c.ensure(ctx)
	case statErr == nil:
		return c.Dir, nil, nil
	}
	if dir, err = os.MkdirTemp("", "conversion-webhook-"); err != nil {
		return "", nil, err
	}
	cert, key, err := issue(time.Now(), c.hosts()...)
	if err == nil {
		err = errors.Join(writeFiles(dir, cert, key), c.inject(ctx, cert))
	}
	return dir, nil, err
}

// hosts are the names the certificate is for.
func (c *Certs) hosts() []string {
	if c.Service == "" {
		return []string{hostOf(c.URL), "localhost"}
	}
	svc, ns := c.Service, c.Service+"."+c.Namespace
	return []string{ns + ".svc", svc, ns, ns + ".svc.cluster.local"}
}

// renew renews the certificate when it is due until ctx ends, and takes a renewal another
// replica made.
func (c *Certs) renew(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(renewalCheck):
			if err := c.ensure(ctx); err != nil {
				logf.FromContext(ctx).Error(err, "cannot renew the conversion webhook's certificate; retrying")
			}
		}
	}
}

// ensure renews the certificate in the Secret when due (making the Secret when absent), writes
// it into Dir and the bundle of the certificates still valid into the CRDs.
func (c *Certs) ensure(ctx context.Context) error {
	s := &corev1.Secret{}
	secret := types.NamespacedName{Namespace: c.Namespace, Name: c.Service + "-cert"}
	if err := c.Client.Get(ctx, secret, s); apierrors.IsNotFound(err) {
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secret.Namespace, Name: secret.Name}, Type: corev1.SecretTypeTLS}
	} else if err != nil {
		return fmt.Errorf("reading the webhook certificate's Secret %s: %w", secret, err)
	}
	now := time.Now()
	current, err := x509.ParseCertificate(der(s.Data[corev1.TLSCertKey]))
	if err != nil || now.Add(certRenewal).After(current.NotAfter) || !slices.Equal(current.DNSNames, c.hosts()) {
		cert, key, err := issue(now, c.hosts()...)
		if err != nil {
			return err
		}
		bundle := trusted(append(slices.Clone(cert), s.Data[bundleKey]...), now)
		s.Data = map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key, bundleKey: bundle}
		if s.ResourceVersion == "" {
			err = c.Client.Create(ctx, s)
		} else {
			err = c.Client.Update(ctx, s) // of two replicas renewing at once, one fails and takes the other's next
		}
		if err != nil {
			return fmt.Errorf("writing the webhook certificate's Secret %s: %w", secret, err)
		}
	}
	return errors.Join(writeFiles(c.Dir, s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]),
		c.inject(ctx, trusted(s.Data[bundleKey], now)))
}

// inject writes the bundle, and URL when no Service is set, into the conversion clientConfig of
// each CRD that converts through the webhook, where they differ.
func (c *Certs) inject(ctx context.Context, bundle []byte) error {
	want := map[string]any{"caBundle": base64.StdEncoding.EncodeToString(bundle)}
	if c.Service == "" {
		want["url"], want["service"] = c.URL, nil
	}
	var errs []error
	for _, name := range c.CRDs {
		crd := crdObject(name)
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			errs = append(errs, err)
			continue
		}
		config, _, _ := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig")
		if config == nil {
			logf.FromContext(ctx).Info("the CRD installed does not convert through the webhook", "crd", name)
			continue
		}
		if config["caBundle"] == want["caBundle"] && (c.Service != "" || config["url"] == c.URL && config["service"] == nil) {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"conversion": map[string]any{"webhook": map[string]any{"clientConfig": want}}}})
		if err := c.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch)); err != nil {
			errs = append(errs, fmt.Errorf("giving CRD %s the webhook's certificate: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// issue makes a self-signed certificate for hosts (names or IP addresses), valid from now, and
// its key, as PEM.
func issue(now time.Time, hosts ...string) (cert, key []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLifetime), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), err
}

// trusted is the bundle of the distinct certificates of pemBundle still valid at now.
func trusted(pemBundle []byte, now time.Time) []byte {
	var out []byte
	for b, rest := pem.Decode(pemBundle); b != nil; b, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(b.Bytes)
		if p := pem.EncodeToMemory(b); err == nil && now.Before(c.NotAfter) && !bytes.Contains(out, p) {
			out = append(out, p...)
		}
	}
	return out
}

// hostOf is the host a URL names; localhost when it names none.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "localhost"
}

// der is the first PEM block of raw.
func der(raw []byte) []byte {
	if b, _ := pem.Decode(raw); b != nil {
		return b.Bytes
	}
	return nil
}

// writeFiles writes the certificate where the webhook server reads it (and reloads it when it
// changes), each file replaced at once.
func writeFiles(dir string, cert, key []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, content := range map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key} {
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

// Package certs makes certificates and keys for tests, in the PEM form a kubernetes.io/tls
// Secret holds.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// Pair is a certificate and its private key, PEM-encoded.
type Pair struct {
	Cert, Key []byte
	Leaf      *x509.Certificate
}

// Pool returns a pool that trusts the (self-signed) certificate.
func (p Pair) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.Leaf)
	return pool
}

// SelfSigned makes a self-signed server certificate for 127.0.0.1 named commonName, valid from
// notBefore to notAfter.
func SelfSigned(t testing.TB, commonName string, notBefore, notAfter time.Time) Pair {
	t.Helper()
	p, err := New(commonName, notBefore, notAfter)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// New is SelfSigned for programs that are not tests (the benchmark).
func New(commonName string, notBefore, notAfter time.Time) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: commonName},
		NotBefore: notBefore, NotAfter: notAfter,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Pair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		Leaf: leaf,
	}, nil
}

// Valid makes a pair valid for the next hour.
func Valid(t testing.TB, commonName string) Pair {
	return SelfSigned(t, commonName, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

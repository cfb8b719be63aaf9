package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// cluster is a local control plane started by hack/cluster/cluster.sh with an audit log, so
// that every request of every subject can be counted, and without a garbage collector, so that
// what is left after deleting every MyProxy is the subject's own uninstall, not owner references.
type cluster struct {
	root     string // repository root
	dir      string // CLUSTER_DIR
	portBase int
}

func (c *cluster) env() []string {
	return append(os.Environ(), "CLUSTER_DIR="+c.dir, fmt.Sprintf("CLUSTER_PORT_BASE=%d", c.portBase),
		"CLUSTER_AUDIT=1", "CLUSTER_NO_GC=1", "CLUSTER_BIN="+filepath.Join(c.root, "bin", "cluster"))
}

func (c *cluster) script(arg string) error {
	cmd := exec.Command(filepath.Join(c.root, "hack", "cluster", "cluster.sh"), arg)
	cmd.Env = c.env()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// fresh stops any previous cluster of this directory, drops its data and audit log, and starts
// a new one: each subject runs on an empty etcd, so none pays for another's leftovers.
func (c *cluster) fresh() error {
	if err := c.script("down"); err != nil {
		return err
	}
	for _, d := range []string{"etcd", "logs"} {
		if err := os.RemoveAll(filepath.Join(c.dir, d)); err != nil {
			return err
		}
	}
	return c.script("up")
}

func (c *cluster) down() error { return c.script("down") }

func (c *cluster) kubeconfig() string { return filepath.Join(c.dir, "kubeconfig") }
func (c *cluster) auditLog() string   { return filepath.Join(c.dir, "logs", "audit.log") }

// kubectl runs kubectl against the cluster as its admin.
func (c *cluster) kubectl(args ...string) error {
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", c.kubeconfig()}, args...)...)
	cmd.Dir = c.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %v: %v: %s", args, err, out)
	}
	return nil
}

// adminConfig is the REST config of the cluster's admin, used by the benchmark itself.
func (c *cluster) adminConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig())
	if err != nil {
		return nil, err
	}
	// The benchmark's own watches and creations must not be the bottleneck.
	cfg.QPS, cfg.Burst = -1, 0
	return cfg, nil
}

// userKubeconfig writes a kubeconfig for a user of its own, with a client certificate signed by
// the cluster's CA: the audit log then tells that user's requests apart. The user is in
// system:masters, so every subject runs with the same (unrestricted) rights.
func (c *cluster) userKubeconfig(user string) (string, error) {
	pki := filepath.Join(c.dir, "pki")
	ca, err := tls.LoadX509KeyPair(filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))
	if err != nil {
		return "", err
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return "", err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: user, Organization: []string{"system:masters"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(48 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		return "", err
	}
	base, err := clientcmd.LoadFromFile(c.kubeconfig())
	if err != nil {
		return "", err
	}
	for _, a := range base.AuthInfos {
		a.ClientCertificateData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		a.ClientKeyData = pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	}
	path := filepath.Join(c.dir, user+".kubeconfig")
	return path, clientcmd.WriteToFile(*base, path)
}

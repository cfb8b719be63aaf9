package main

import (
	"archive/tar"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// remoteOptions reach a registry with the user's credentials (docker's config, as crane does)
// over TLS checked against the system's roots and REGISTRY_CA.
func remoteOptions() ([]remote.Option, error) {
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if ca := os.Getenv("REGISTRY_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("REGISTRY_CA: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("REGISTRY_CA: no certificate in %s", ca)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return []remote.Option{remote.WithTransport(tr), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, nil
}

// open reads the image of an OCI layout directory (its one image) or of a registry reference.
func open(src string) (v1.Image, error) {
	if info, err := os.Stat(src); err == nil && info.IsDir() {
		return layoutImage(src)
	}
	ref, err := name.ParseReference(src)
	if err != nil {
		return nil, err
	}
	opts, err := remoteOptions()
	if err != nil {
		return nil, err
	}
	return remote.Image(ref, opts...)
}

func layoutImage(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d images, want 1", dir, len(m.Manifests))
	}
	return idx.Image(m.Manifests[0].Digest)
}

// push writes the layout's image to dst and returns the reference by digest.
func push(src, dst string) (string, error) {
	img, err := layoutImage(src)
	if err != nil {
		return "", err
	}
	ref, err := name.ParseReference(dst)
	if err != nil {
		return "", err
	}
	opts, err := remoteOptions()
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, opts...); err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	return ref.Context().Digest(digest.String()).String(), nil
}

type report struct {
	Digest string        `json:"digest"`
	Config v1.ConfigFile `json:"config"`
	Layers []layerReport `json:"layers"`
}

type layerReport struct {
	Digest    string       `json:"digest"`
	MediaType string       `json:"mediaType"`
	Files     []fileReport `json:"files"`
}

type fileReport struct {
	Path string `json:"path"`
	Mode string `json:"mode"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	Size int64  `json:"size"`
	Link string `json:"link,omitempty"`
}

// inspect reports what `crane config` and `crane export | tar tv` per layer would.
func inspect(img v1.Image) (*report, error) {
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	r := &report{Digest: digest.String(), Config: *cf}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		mt, err := l.MediaType()
		if err != nil {
			return nil, err
		}
		lr := layerReport{Digest: d.String(), MediaType: string(mt)}
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, err
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rc.Close()
				return nil, err
			}
			lr.Files = append(lr.Files, fileReport{Path: "/" + strings.TrimSuffix(hdr.Name, "/"), Mode: hdr.FileInfo().Mode().String(),
				UID: hdr.Uid, GID: hdr.Gid, Size: hdr.Size, Link: hdr.Linkname})
		}
		rc.Close()
		r.Layers = append(r.Layers, lr)
	}
	return r, nil
}

// export writes the image's filesystem (its layers applied in order, whiteouts honoured) into
// dir, which must not exist yet, with the modes the layers record.
func export(img v1.Image, dir string) error {
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("%s exists", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		rel := filepath.Clean(filepath.FromSlash(hdr.Name))
		if rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
			return fmt.Errorf("layer entry %q leaves the filesystem", hdr.Name)
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		mode := hdr.FileInfo().Mode()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			err = os.Chmod(dst, mode.Perm())
		case tar.TypeSymlink:
			err = os.Symlink(hdr.Linkname, dst)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm()); err == nil {
				_, err = io.Copy(f, tr)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		default:
			err = fmt.Errorf("layer entry %q: type %c is not exported", hdr.Name, hdr.Typeflag)
		}
		if err != nil {
			return err
		}
	}
}

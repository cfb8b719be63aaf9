package releasestore

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/example/myproxy-operator/internal/names"
)

// pooledSecrets is Helm's Secrets driver with its writes replaced by ones that encode the
// record with a gzip compressor from a pool.
//
// Helm allocates a new compressor at gzip.BestCompression for every record it writes, hundreds
// of KiB of tables, twice per install: a large share of what the operator allocates while a
// fleet converges, and of its garbage collection. A pooled compressor at the default level
// encodes a record faster, at nearly the same size.
//
// The record is the one Helm writes, byte for byte but for the compression level: a Secret of
// type helm.sh/release.v1 holding the base64 of the gzipped JSON release, with the same labels.
// Helm reads it back (the decoder does not care for the level), so do the helm CLI and the
// reads here, which stay Helm's own.
type pooledSecrets struct {
	*driver.Secrets
	impl corev1client.SecretInterface
}

func newPooledSecrets(impl corev1client.SecretInterface) *pooledSecrets {
	return &pooledSecrets{Secrets: driver.NewSecrets(impl), impl: impl}
}

// Create implements driver.Creator as driver.Secrets does.
func (s *pooledSecrets) Create(key string, rls *release.Release) error {
	obj, err := recordSecret(key, rls, "createdAt")
	if err != nil {
		return fmt.Errorf("create: failed to encode release %q: %w", rls.Name, err)
	}
	if _, err := s.impl.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return driver.ErrReleaseExists
		}
		return fmt.Errorf("create: failed to create: %w", err)
	}
	return nil
}

// Update implements driver.Updator as driver.Secrets does.
func (s *pooledSecrets) Update(key string, rls *release.Release) error {
	obj, err := recordSecret(key, rls, "modifiedAt")
	if err != nil {
		return fmt.Errorf("update: failed to encode release %q: %w", rls.Name, err)
	}
	if _, err := s.impl.Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update: failed to update: %w", err)
	}
	return nil
}

// recordSecret is the Secret driver.Secrets writes for rls; stamp is the label that takes the
// time (createdAt or modifiedAt).
func recordSecret(key string, rls *release.Release, stamp string) (*corev1.Secret, error) {
	if rls.Info == nil {
		return nil, errors.New("the release has no info")
	}
	data, err := encodeRelease(rls)
	if err != nil {
		return nil, err
	}
	lbs := maps.Clone(rls.Labels)
	if lbs == nil {
		lbs = map[string]string{}
	}
	lbs[stamp] = strconv.FormatInt(time.Now().Unix(), 10)
	lbs[names.RecordNameLabel] = rls.Name
	lbs[names.RecordOwnerLabel] = names.RecordOwnerHelm
	lbs["status"] = rls.Info.Status.String()
	lbs["version"] = strconv.Itoa(rls.Version)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: lbs},
		Type:       "helm.sh/release.v1",
		Data:       map[string][]byte{"release": data},
	}, nil
}

var compressors = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression) // a valid level: cannot fail
	return w
}}

// encodeRelease returns base64(gzip(JSON of rls)), as Helm encodes a record.
func encodeRelease(rls *release.Release) ([]byte, error) {
	b, err := json.Marshal(rls)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w := compressors.Get().(*gzip.Writer)
	defer compressors.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(buf.Len()))
	base64.StdEncoding.Encode(out, buf.Bytes())
	return out, nil
}

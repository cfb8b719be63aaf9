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

// pooledSecrets is Helm's Secrets driver whose writes encode the record with a gzip compressor
// from a pool (fast path record-encoding).
//
// Helm allocates a new compressor at gzip.BestCompression for every record it writes (twice per
// install or upgrade), and a compressor's tables are large: garbage, and collection, for every
// action. A pooled compressor at the default level is allocated once per concurrent writer and
// searches less, for a record of nearly the same size (what it earns: docs/performance.md).
//
// The record is the one Helm writes but for the compression level: a Secret of type
// helm.sh/release.v1 holding the base64 of the gzipped JSON release, with the same labels.
// Helm's decoder does not care for the level, so Helm, the helm CLI and the reads here (Helm's
// own) read it back.
type pooledSecrets struct {
	*driver.Secrets
	impl corev1client.SecretInterface
}

// Create implements driver.Creator as driver.Secrets does.
func (s *pooledSecrets) Create(key string, rls *release.Release) error {
	return s.write("create", "createdAt", key, rls, func(obj *corev1.Secret) error {
		_, err := s.impl.Create(context.Background(), obj, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return driver.ErrReleaseExists // Helm's storage tells a taken name by it
		}
		return err
	})
}

// Update implements driver.Updator as driver.Secrets does.
func (s *pooledSecrets) Update(key string, rls *release.Release) error {
	return s.write("update", "modifiedAt", key, rls, func(obj *corev1.Secret) error {
		_, err := s.impl.Update(context.Background(), obj, metav1.UpdateOptions{})
		return err
	})
}

// write sends the record of rls as Helm's driver builds it; stamp is the label that takes the
// time of the write.
func (s *pooledSecrets) write(verb, stamp, key string, rls *release.Release, send func(*corev1.Secret) error) error {
	data, err := encodeRelease(rls)
	if err != nil {
		return fmt.Errorf("%s: failed to encode release %q: %w", verb, rls.Name, err)
	}
	lbs := maps.Clone(rls.Labels)
	if lbs == nil {
		lbs = map[string]string{}
	}
	lbs[stamp] = strconv.FormatInt(time.Now().Unix(), 10)
	lbs[names.RecordNameLabel], lbs[names.RecordOwnerLabel] = rls.Name, names.RecordOwnerHelm
	lbs["status"], lbs["version"] = rls.Info.Status.String(), strconv.Itoa(rls.Version)
	err = send(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key, Labels: lbs},
		Type: "helm.sh/release.v1", Data: map[string][]byte{"release": data}})
	if err != nil && !errors.Is(err, driver.ErrReleaseExists) {
		return fmt.Errorf("%s: failed to %s: %w", verb, verb, err)
	}
	return err
}

var compressors = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

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
	return base64.StdEncoding.AppendEncode(nil, buf.Bytes()), nil
}

package releasestore

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"errors"
	"io"
	"maps"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/example/myproxy-operator/test/harness"
)

func chartRelease(t *testing.T, status release.Status) *release.Release {
	t.Helper()
	ch, err := loader.Load(harness.RepoRoot() + "/helm-charts/myproxy")
	if err != nil {
		t.Fatal(err)
	}
	return &release.Release{Name: "edge", Namespace: "team", Version: 3, Chart: ch,
		Config: map[string]any{"replicas": 2}, Manifest: "apiVersion: v1\nkind: ConfigMap\n",
		Labels: map[string]string{"myproxy-operator.gateway.example.com/digest": "abc"},
		Info:   &release.Info{Status: status, Description: "Install complete"}}
}

func pooled(impl *apiserver) driver.Driver {
	return &pooledSecrets{Secrets: driver.NewSecrets(impl), impl: impl}
}

// The records of the fast path are the records Helm writes but for the compression level: the
// same Secret type, labels and JSON, and Helm's own driver reads them back.
func TestRecordsAreHelmRecords(t *testing.T) {
	const key = "sh.helm.release.v1.edge.v3"
	ours, helms := &apiserver{objs: map[string]*corev1.Secret{}}, &apiserver{objs: map[string]*corev1.Secret{}}
	for _, write := range []func(d driver.Driver, r *release.Release) error{
		func(d driver.Driver, r *release.Release) error { return d.Create(key, r) },
		func(d driver.Driver, r *release.Release) error { return d.Update(key, r) },
	} {
		rel := chartRelease(t, release.StatusDeployed)
		if err := write(pooled(ours), rel); err != nil {
			t.Fatal(err)
		}
		if err := write(driver.NewSecrets(helms), rel); err != nil {
			t.Fatal(err)
		}
		got, want := ours.objs[key], helms.objs[key]
		if got.Type != want.Type {
			t.Errorf("type %q, Helm writes %q", got.Type, want.Type)
		}
		if !maps.Equal(withoutTime(got.Labels), withoutTime(want.Labels)) || len(got.Labels) != len(want.Labels) {
			t.Errorf("labels %v, Helm writes %v", got.Labels, want.Labels)
		}
		if !bytes.Equal(mustGunzip(t, got.Data["release"]), mustGunzip(t, want.Data["release"])) {
			t.Error("the JSON of the release differs from Helm's")
		}
		if n, m := len(got.Data["release"]), len(want.Data["release"]); n > m*105/100 {
			t.Errorf("record of %d bytes, Helm's %d: more than 5%% larger", n, m)
		}
		back, err := driver.NewSecrets(ours).Get(key)
		if err != nil {
			t.Fatalf("Helm cannot read the record: %v", err)
		}
		if back.Name != rel.Name || back.Version != rel.Version || back.Info.Status != rel.Info.Status ||
			back.Chart.Metadata.Version != rel.Chart.Metadata.Version || back.Labels["myproxy-operator.gateway.example.com/digest"] != "abc" {
			t.Errorf("Helm read back %s v%d %s chart %s labels %v", back.Name, back.Version, back.Info.Status,
				back.Chart.Metadata.Version, back.Labels)
		}
	}
}

// Errors are Helm's: a taken name is driver.ErrReleaseExists (Helm's storage tells by it), others
// wrap the apiserver's.
func TestWriteErrorsAreHelms(t *testing.T) {
	for name, d := range map[string]driver.Driver{
		"pooled": pooled(&apiserver{objs: map[string]*corev1.Secret{}}),
		"Helm's": driver.NewSecrets(&apiserver{objs: map[string]*corev1.Secret{}}),
	} {
		rel := chartRelease(t, release.StatusPendingInstall)
		if err := d.Create("k", rel); err != nil {
			t.Fatal(err)
		}
		if err := d.Create("k", rel); !errors.Is(err, driver.ErrReleaseExists) {
			t.Errorf("%s: second create: %v, want driver.ErrReleaseExists", name, err)
		}
		if err := d.Update("missing", rel); !apierrors.IsNotFound(err) {
			t.Errorf("%s: update of a missing record: %v, want NotFound wrapped", name, err)
		}
	}
}

// withoutTime drops the labels that hold the second of the write.
func withoutTime(l map[string]string) map[string]string {
	l = maps.Clone(l)
	delete(l, "createdAt")
	delete(l, "modifiedAt")
	return l
}

func gunzip(record []byte) ([]byte, error) {
	gz, err := base64.StdEncoding.DecodeString(string(record))
	if err != nil {
		return nil, err
	}
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

func mustGunzip(t *testing.T, record []byte) []byte {
	t.Helper()
	b, err := gunzip(record)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Concurrent writers share the pool without mixing their records.
func TestConcurrentEncodes(t *testing.T) {
	rels := []*release.Release{chartRelease(t, release.StatusDeployed), chartRelease(t, release.StatusFailed)}
	rels[1].Manifest = "something else"
	want := [][]byte{}
	for _, r := range rels {
		b, err := encodeRelease(r)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, mustGunzip(t, b))
	}
	errs := make(chan error, 64)
	for i := range 64 {
		go func() {
			b, err := encodeRelease(rels[i%2])
			if err == nil {
				b, err = gunzip(b)
			}
			if err == nil && !bytes.Equal(b, want[i%2]) {
				err = errors.New("a record was mixed up with another")
			}
			errs <- err
		}()
	}
	for range 64 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

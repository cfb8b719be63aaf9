package main

import (
	"bytes"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestFluxTunedRunsWithThisOperatorsWorkersAndClientLimits(t *testing.T) {
	defaults := flux(settings{}).args("127.0.0.1:1", "127.0.0.1:2")
	tuned := fluxTuned(settings{}).args("127.0.0.1:1", "127.0.0.1:2")
	for _, want := range []string{"--metrics-addr=127.0.0.1:1", "--health-addr=127.0.0.1:2", "--enable-leader-election=false", "--events-addr="} {
		if !slices.Contains(defaults, want) || !slices.Contains(tuned, want) {
			t.Errorf("%s missing: defaults %v, tuned %v", want, defaults, tuned)
		}
	}
	for _, want := range []string{"--concurrent=16", "--kube-api-qps=200", "--kube-api-burst=400"} {
		if !slices.Contains(tuned, want) {
			t.Errorf("tuned: %s missing from %v", want, tuned)
		}
		if slices.ContainsFunc(defaults, func(a string) bool { return strings.HasPrefix(a, strings.Split(want, "=")[0]+"=") }) {
			t.Errorf("defaults set %s: %v", strings.Split(want, "=")[0], defaults)
		}
	}
}

func TestAHelmReleaseCarriesTheMyProxySpecAsValues(t *testing.T) {
	for _, tt := range []struct {
		op       operator
		interval string
		wait     bool
	}{
		{op: flux(settings{}), interval: "1m", wait: true},
		{op: fluxTuned(settings{}), interval: "24h", wait: false},
	} {
		k := tt.op.fleetKind()
		if k.gvr != helmReleaseGVR || k.condition != "Ready" {
			t.Fatalf("%s: kind %v, condition %q", tt.op.name, k.gvr, k.condition)
		}
		hr := k.object("fleet", "fleet-0001", spec())
		if hr.GetAPIVersion() != "helm.toolkit.fluxcd.io/v2" || hr.GetKind() != "HelmRelease" || hr.GetName() != "fleet-0001" || hr.GetNamespace() != "fleet" {
			t.Errorf("%s: %s %s %s/%s", tt.op.name, hr.GetAPIVersion(), hr.GetKind(), hr.GetNamespace(), hr.GetName())
		}
		str := func(path ...string) string {
			v, _, _ := unstructured.NestedString(hr.Object, append([]string{"spec"}, path...)...)
			return v
		}
		if str("releaseName") != "fleet-0001" || str("interval") != tt.interval || str("chartRef", "kind") != "HelmChart" || str("chartRef", "name") != fluxChartName {
			t.Errorf("%s: spec %v", tt.op.name, hr.Object["spec"])
		}
		if values, _, _ := unstructured.NestedMap(hr.Object, "spec", "values"); !reflect.DeepEqual(values, spec()) {
			t.Errorf("%s: values %v, want the MyProxy spec %v", tt.op.name, values, spec())
		}
		for _, action := range []string{"install", "upgrade", "uninstall"} {
			noWait, _, _ := unstructured.NestedBool(hr.Object, "spec", action, "disableWait")
			if noWait == tt.wait {
				t.Errorf("%s: %s.disableWait = %v", tt.op.name, action, noWait)
			}
		}
	}
	if k := ours(settings{}).fleetKind(); k.gvr != myProxyGVR || k.condition != "Deployed" {
		t.Errorf("this operator's fleet: %v, %q", k.gvr, k.condition)
	}
}

func TestTheHelmChartStatusIsWhatHelmControllerTakesAsReady(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	status := helmChartStatus(3, "http://127.0.0.1:1/c.tgz", "0.1.0", nil, now)
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	if g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); g != 3 {
		t.Errorf("observedGeneration = %d, want the generation", g)
	}
	if !conditionTrue(u, "Ready") {
		t.Errorf("not Ready: %v", status["conditions"])
	}
	artifact, _, _ := unstructured.NestedMap(u.Object, "status", "artifact")
	// the SHA-256 of nothing
	if artifact["digest"] != "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("digest = %v", artifact["digest"])
	}
	for _, field := range []string{"path", "url", "revision", "digest", "lastUpdateTime"} { // the CRD's required fields
		if s, _ := artifact[field].(string); s == "" {
			t.Errorf("artifact.%s missing: %v", field, artifact)
		}
	}
	if artifact["revision"] != "0.1.0" || artifact["lastUpdateTime"] != "2026-01-02T03:04:05Z" {
		t.Errorf("artifact = %v", artifact)
	}
}

func TestThePackagedChartIsServedAsItsDigestSays(t *testing.T) {
	archive, version, err := packageChart("../helm-charts/myproxy", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	url, stop, err := serveArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	served, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	if artifactDigest(served) != artifactDigest(archive) {
		t.Error("the served archive is not the one its digest names")
	}
	chrt, err := loader.LoadArchive(bytes.NewReader(served))
	if err != nil {
		t.Fatal(err)
	}
	if chrt.Name() != "myproxy" || chrt.Metadata.Version != version || len(chrt.Templates) == 0 {
		t.Errorf("served chart %s %s with %d templates", chrt.Name(), chrt.Metadata.Version, len(chrt.Templates))
	}
	if resp, err := http.Get(strings.TrimSuffix(url, "chart.tgz") + "other.tgz"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("another path: %v, %v", resp, err)
	}
}

func TestTheReportSaysWhatAFluxRowCounts(t *testing.T) {
	r := &report{}
	r.addRun(fleetResult{Subject: subjectOurs, DeployedSeconds: 10})
	r.addRun(fleetResult{Subject: subjectFluxTuned, DeployedSeconds: 20})
	var md strings.Builder
	r.markdown(&md)
	if !strings.Contains(md.String(), "- "+subjectFluxTuned+": the same HelmReleases") {
		t.Errorf("no note of %s in\n%s", subjectFluxTuned, md.String())
	}
	if strings.Contains(md.String(), subjectNotes[subjectFlux]) {
		t.Errorf("the note of a subject that did not run:\n%s", md.String())
	}
}

func TestTheIdleWindowOpensAtTheSettleLimitOnAFleetWrittenAtRest(t *testing.T) {
	tr := &tracker{proxies: map[string]bool{}, available: map[string]bool{}, changed: make(chan struct{})}
	quiet, err := tr.waitQuietWithin(t.Context(), 20*time.Millisecond, time.Second)
	if err != nil || !quiet {
		t.Fatalf("a fleet that does not change: quiet %v, %v", quiet, err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() { // a write every 5 ms, as periodic reconciles that patch status
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				tr.mu.Lock()
				tr.notify()
				tr.mu.Unlock()
			}
		}
	}()
	start := time.Now()
	quiet, err = tr.waitQuietWithin(t.Context(), 50*time.Millisecond, 200*time.Millisecond)
	if err != nil || quiet {
		t.Fatalf("a fleet written at rest: quiet %v, %v", quiet, err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond || waited > 2*time.Second {
		t.Errorf("returned after %s, want the limit", waited)
	}
}

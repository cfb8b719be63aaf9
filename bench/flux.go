package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/myproxy-operator/internal/options"
)

// Flux's helm-controller runs as a peer without source-controller: the bench plays
// source-controller's part for the one chart of the fleet. It packages helm-charts/myproxy,
// serves the archive over HTTP from this process, and writes a HelmChart whose status carries the
// artifact (URL, digest, revision) and says it is Ready, as source-controller would once it had
// fetched the chart. Every HelmRelease of the fleet takes its chart from that HelmChart
// (spec.chartRef); helm-controller downloads the archive and checks its digest at every reconcile.
// What source-controller would cost (and the archive server) is no part of the figures.

// The names SUBJECTS gives Flux's helm-controller, at its defaults and tuned.
const (
	keyFlux      = "helm-controller"
	keyFluxTuned = "helm-controller-tuned"
)

const (
	subjectFlux = "Flux helm-controller"
	// subjectFluxTuned runs with this operator's workers and client limits, Helm's wait off and
	// no periodic reconcile within a run (fluxTuned).
	subjectFluxTuned = "Flux helm-controller, tuned"
)

var (
	helmReleaseGVR = schema.GroupVersionResource{Group: "helm.toolkit.fluxcd.io", Version: "v2", Resource: "helmreleases"}
	helmChartGVR   = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "helmcharts"}
)

// fluxCRDNames are the CRDs of the file the Makefile writes beside bin/helm-controller: the
// HelmRelease it reconciles, and the two sources it watches (it does not start without them).
var fluxCRDNames = []string{"helmreleases.helm.toolkit.fluxcd.io", "helmcharts.source.toolkit.fluxcd.io",
	"ocirepositories.source.toolkit.fluxcd.io"}

// fluxChartName names the HelmChart every HelmRelease of the fleet refers to.
const fluxChartName = "myproxy"

// The HelmReleases' spec.interval, which helm-controller requires: after every reconcile it
// requeues the release for a full reconcile after that long.
const (
	// fluxDefaultInterval is a full reconcile of every release each minute: the period of the
	// stock helm-operator at its defaults.
	fluxDefaultInterval = "1m"
	// fluxTunedInterval stands for this operator's reconcile-period=0: a day is longer than any
	// run of the bench, so within a run a release is reconciled only when something changes.
	fluxTunedInterval = "24h"
)

// fluxSettleLimit is how long after all Available the idle window waits, at most, for the fleet
// to go quiet. helm-controller patches a HelmRelease's status at every reconcile, so a fleet
// reconciled each minute never does; by then the writes of its convergence have landed, and
// what it writes is its periodic reconciles, which are its cost at rest.
const fluxSettleLimit = 2 * time.Minute

// flux is helm-controller at its defaults (4 workers, Flux's client limits), on HelmReleases as
// Flux documents them: Helm waits for the release's objects to be ready before the release is
// Ready, and every release is reconciled each fluxDefaultInterval.
func flux(s settings) operator {
	return operator{name: subjectFlux, user: "bench-helm-controller", bin: s.fluxBin, samples: s.samples,
		kind: helmReleases(s, fluxDefaultInterval, false), settleLimit: fluxSettleLimit,
		args: func(m, h string) []string {
			// No leader election, and no events address: Events go to the apiserver only, as
			// every subject's do.
			return []string{"--metrics-addr=" + m, "--health-addr=" + h, "--enable-leader-election=false", "--events-addr="}
		}}
}

// fluxTuned is helm-controller tuned as this operator runs: as many workers, the same client
// limits, and HelmReleases with Helm's wait off (Ready once the action is done, as Deployed is)
// and fluxTunedInterval.
func fluxTuned(s settings) operator {
	op := flux(s)
	op.name, op.user, op.kind = subjectFluxTuned, "bench-helm-controller-tuned", helmReleases(s, fluxTunedInterval, true)
	args := op.args
	op.args = func(m, h string) []string { return append(args(m, h), fluxTunedFlags()...) }
	return op
}

// fluxTunedFlags are helm-controller's flags for what this operator runs with by default: its
// workers and its client limits (the flags have the same names in both).
func fluxTunedFlags() []string {
	var o options.Options
	fs := flag.NewFlagSet("myproxy-operator", flag.ContinueOnError)
	o.BindFlags(fs)
	return []string{fmt.Sprintf("--concurrent=%d", options.DefaultMaxConcurrentReconciles),
		"--kube-api-qps=" + fs.Lookup("kube-api-qps").DefValue, "--kube-api-burst=" + fs.Lookup("kube-api-burst").DefValue}
}

// helmReleases is the fleet kind of helm-controller: HelmReleases whose Ready condition says the
// release is installed.
func helmReleases(s settings, interval string, noWait bool) kind {
	return kind{gvr: helmReleaseGVR, condition: "Ready",
		object: func(namespace, name string, values map[string]any) *unstructured.Unstructured {
			return helmRelease(namespace, name, values, interval, noWait)
		},
		install: func(ctx context.Context, e *env) (func(), error) { return installFlux(ctx, s, e) }}
}

// helmRelease is the HelmRelease of that name: the release of the same name, of the chart of
// fluxChartName, with values. noWait turns Helm's wait off for every action.
func helmRelease(namespace, name string, values map[string]any, interval string, noWait bool) *unstructured.Unstructured {
	spec := map[string]any{
		"interval":    interval,
		"releaseName": name,
		"chartRef":    map[string]any{"kind": "HelmChart", "name": fluxChartName},
		"values":      values,
	}
	if noWait {
		for _, action := range []string{"install", "upgrade", "uninstall"} {
			spec[action] = map[string]any{"disableWait": true}
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(helmReleaseGVR.GroupVersion().String())
	u.SetKind("HelmRelease")
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// installFlux installs the CRDs helm-controller needs, serves the packaged chart, and writes the
// HelmChart that points at it, Ready. stop ends the chart's server.
func installFlux(ctx context.Context, s settings, e *env) (stop func(), err error) {
	if _, err := os.Stat(s.fluxCRDs); err != nil {
		return nil, fmt.Errorf("%w (make helm-controller writes it)", err)
	}
	if err := e.c.kubectl("apply", "--server-side", "-f", s.fluxCRDs); err != nil {
		return nil, err
	}
	wait := []string{"wait", "--for=condition=Established"}
	for _, name := range fluxCRDNames {
		wait = append(wait, "crd/"+name)
	}
	if err := e.c.kubectl(wait...); err != nil {
		return nil, err
	}
	archive, version, err := packageChart(filepath.Join(s.root, "helm-charts", "myproxy"), s.dir)
	if err != nil {
		return nil, err
	}
	url, stop, err := serveArchive(archive)
	if err != nil {
		return nil, err
	}
	if err := writeHelmChart(ctx, e, url, version, archive); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// packageChart packages the chart of dir, as helm package does, into a directory under benchDir,
// and returns the archive and the chart's version.
func packageChart(dir, benchDir string) (archive []byte, version string, err error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return nil, "", err
	}
	out := filepath.Join(benchDir, "flux-chart")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, "", err
	}
	path, err := chartutil.Save(chrt, out)
	if err != nil {
		return nil, "", err
	}
	archive, err = os.ReadFile(path)
	return archive, chrt.Metadata.Version, err
}

// serveArchive serves archive over HTTP on the loopback interface, at the URL it returns, as
// source-controller serves its artifacts.
func serveArchive(archive []byte) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	const path = "/helmchart/" + fleetNamespace + "/" + fluxChartName + "/chart.tgz"
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/gzip")
		http.ServeContent(w, r, "chart.tgz", time.Time{}, bytes.NewReader(archive))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			progress("chart server: %v", err)
		}
	}()
	return "http://" + ln.Addr().String() + path, func() { _ = srv.Close() }, nil
}

// artifactDigest is the digest of an artifact as source-controller writes it.
func artifactDigest(archive []byte) string {
	sum := sha256.Sum256(archive)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeHelmChart creates the HelmChart of the fleet and writes its status as source-controller
// would once it had the chart: helm-controller takes a HelmChart as ready when its status has
// observed its generation, is not stalled, and carries an artifact.
func writeHelmChart(ctx context.Context, e *env, url, version string, archive []byte) error {
	hc := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"chart":     "myproxy",
		"version":   version,
		"interval":  "24h", // source-controller's, which does not run
		"sourceRef": map[string]any{"kind": "HelmRepository", "name": fluxChartName},
	}}}
	hc.SetAPIVersion(helmChartGVR.GroupVersion().String())
	hc.SetKind("HelmChart")
	hc.SetName(fluxChartName)
	client := e.dyn.Resource(helmChartGVR).Namespace(fleetNamespace)
	created, err := client.Create(ctx, hc, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	created.Object["status"] = helmChartStatus(created.GetGeneration(), url, version, archive, time.Now())
	_, err = client.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}

// helmChartStatus is the status of a HelmChart of that generation whose artifact is archive,
// served at url.
func helmChartStatus(generation int64, url, version string, archive []byte, now time.Time) map[string]any {
	at := now.UTC().Format(time.RFC3339)
	return map[string]any{
		"observedGeneration": generation,
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "reason": "ChartPullSucceeded", "observedGeneration": generation,
			"message": "pulled '" + fluxChartName + "' chart with version '" + version + "'", "lastTransitionTime": at,
		}},
		"artifact": map[string]any{
			"path":           "helmchart/" + fleetNamespace + "/" + fluxChartName + "/" + fluxChartName + "-" + version + ".tgz",
			"url":            url,
			"revision":       version,
			"digest":         artifactDigest(archive),
			"lastUpdateTime": at,
			"size":           int64(len(archive)),
		},
	}
}

// subjectNotes say what the figures of a subject count where its fleet is not made of MyProxies.
var subjectNotes = map[string]string{
	subjectFlux: "HelmReleases (helm.toolkit.fluxcd.io/v2) with the MyProxies' values, not MyProxies: Deployed is a " +
		"HelmRelease's Ready condition, which at Flux's defaults waits for the release's objects to be ready (Helm's wait), " +
		"so that its time to all Deployed holds the Deployments' rollout; every release is reconciled each " + fluxDefaultInterval +
		"; KiB per stored CR is a HelmRelease's",
	subjectFluxTuned: "the same HelmReleases with Helm's wait off (Ready once the action is done) and an interval of " +
		fluxTunedInterval + " (no periodic reconcile within a run)",
}

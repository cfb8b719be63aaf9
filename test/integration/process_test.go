package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/myproxy-operator/test/harness"
)

// The probes answer while the operator runs, and SIGTERM ends it cleanly (exit status 0).
func TestProbesAndGracefulShutdown(t *testing.T) {
	probes := harness.FreeAddr(t)
	op := startOperatorWith(t, "--health-probe-bind-address="+probes)
	for _, path := range []string{"/healthz", "/readyz"} {
		harness.Eventually(t, 30*time.Second, "probe "+path, func(ctx context.Context) (bool, string) {
			resp, err := http.Get("http://" + probes + path)
			if err != nil {
				return false, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, fmt.Sprintf("status %d", resp.StatusCode)
		})
	}
	start := time.Now()
	op.Stop(t)
	exited, err := op.Exited()
	if !exited || err != nil {
		t.Errorf("after SIGTERM: exited=%v err=%v, want a clean exit", exited, err)
	}
	t.Logf("stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}

// hookTemplate makes every install wait for a Job, as a chart's database migration would:
// Helm runs the hook and waits until the Job completes (envtest runs no Job controller, so the
// test completes it).
const hookTemplate = `apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-migrate
  annotations:
    helm.sh/hook: post-install
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: example.com/migrate:1
`

// A reconcile in flight when SIGTERM arrives finishes before the process exits: the install
// waiting on its hook Job is still waiting when the signal is sent; the Job completes after
// the signal; the release ends deployed (not pending) and the process exits cleanly.
func TestSIGTERMLetsAnInstallInFlightFinish(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	chart := copiedChart(t)
	if err := os.WriteFile(filepath.Join(chart, "templates", "migrate-hook.yaml"), []byte(hookTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	// Its own namespace only: a custom resource another test left uninstalled would wait on the
	// hook Job too, and past the shutdown's grace period.
	ns := newNamespace(t, c, nil)
	op := startOperator(t, harness.Watch{Chart: chart}, "WATCH_NAMESPACE="+ns)
	if err := c.Create(ctx, harness.MyProxy(ns, "slow", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{}
	harness.Eventually(t, timeout, "the install runs its hook", func(ctx context.Context) (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "slow-migrate"}, job)
		return err == nil, fmt.Sprint(err)
	})
	if records := releaseRecords(ctx, t, c, ns, "slow"); len(records) != 1 || records[0].Labels["status"] != "pending-install" {
		t.Fatalf("the install is not in flight: records %v", records)
	}

	op.Signal(t, syscall.SIGTERM)
	now := metav1.Now()
	job.Status = batchv1.JobStatus{StartTime: &now, CompletionTime: &now, Succeeded: 1, Conditions: []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	if err := c.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, timeout, "the operator exits", func(context.Context) (bool, string) {
		exited, _ := op.Exited()
		return exited, "still running"
	})
	if _, err := op.Exited(); err != nil {
		t.Errorf("exit after SIGTERM: %v, want a clean exit", err)
	}
	if records := releaseRecords(ctx, t, c, ns, "slow"); len(records) != 1 || records[0].Labels["status"] != "deployed" {
		var states []string
		for _, r := range records {
			states = append(states, r.Labels["status"])
		}
		t.Errorf("release records after the shutdown: %v, want one deployed", states)
	}
}

// copiedChart copies the project's chart into a temporary directory to change.
func copiedChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "myproxy")
	harness.CopyDir(t, filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"), dir)
	return dir
}

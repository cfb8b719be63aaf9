package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/myproxy-operator/test/harness"
)

// exporterTemplate is a second Deployment in the release, a metrics exporter next to the proxy.
const exporterTemplate = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "myproxy.fullname" . }}-exporter
  labels:
    app.kubernetes.io/name: myproxy-exporter
    app.kubernetes.io/instance: {{ .Release.Name }}
    app.kubernetes.io/component: exporter
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: myproxy-exporter
      app.kubernetes.io/instance: {{ .Release.Name }}
  template:
    metadata:
      labels:
        app.kubernetes.io/name: myproxy-exporter
        app.kubernetes.io/instance: {{ .Release.Name }}
    spec:
      containers:
        - name: exporter
          image: example.com/nginx-exporter:1.0
`

// reshapedChart is the project's chart with its proxy Deployment renamed <name>-proxy and a
// second Deployment added; kind.yaml is unchanged.
func reshapedChart(t *testing.T) string {
	t.Helper()
	dir := copiedChart(t)
	path := filepath.Join(dir, "templates", "deployment.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	renamed := strings.Replace(string(raw), `name: {{ include "myproxy.fullname" . }}`, `name: {{ include "myproxy.fullname" . }}-proxy`, 1)
	if renamed == string(raw) {
		t.Fatal("the proxy Deployment's name template changed: update this test")
	}
	if err := os.WriteFile(path, []byte(renamed), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "templates", "exporter.yaml"), []byte(exporterTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rolledOut writes the status the Deployment controller would write once ready of the
// Deployment's replicas are available (envtest runs no controllers).
func rolledOut(t *testing.T, d *appsv1.Deployment, ready int32) {
	t.Helper()
	available := corev1.ConditionFalse
	if ready >= *d.Spec.Replicas {
		available = corev1.ConditionTrue
	}
	now := metav1.Now()
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: *d.Spec.Replicas, UpdatedReplicas: *d.Spec.Replicas,
		ReadyReplicas: ready, AvailableReplicas: ready,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: available, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
		}}
	if err := harness.NewClient(t, cfg).Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// The status is the chart's declaration, not Go's idea of the chart: with the proxy Deployment
// renamed and an exporter Deployment beside it, replicas, image, selector and Available follow
// the proxy (found by its component label), while Ready waits for every object of the release.
func TestStatusFollowsTheDeclarationWhenTheChartChangesShape(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{Chart: reshapedChart(t)})
	ns := newNamespace(t, c, nil)
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{"replicas": 2})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", timeout)
	proxy := waitDeployment(t, c, ns, "edge-proxy", "renamed", func(*appsv1.Deployment) bool { return true })
	exporter := waitDeployment(t, c, ns, "edge-exporter", "added", func(*appsv1.Deployment) bool { return true })

	rolledOut(t, proxy, 2)
	rolledOut(t, exporter, 0)
	wantSelector := metav1.FormatLabelSelector(proxy.Spec.Selector)
	status := func(ctx context.Context) (map[string]any, string) {
		mp, err := harness.GetMyProxy(ctx, c, ns, "edge")
		if err != nil {
			return nil, err.Error()
		}
		st, _, _ := unstructured.NestedMap(mp.Object, "status")
		return st, fmt.Sprintf("status %v", st)
	}
	harness.Eventually(t, timeout, "status follows the proxy, Ready waits for the exporter", func(ctx context.Context) (bool, string) {
		st, msg := status(ctx)
		mp := &unstructured.Unstructured{Object: map[string]any{"status": st}}
		available, _, _ := harness.Condition(mp, "Available")
		ready, reason, readyMsg := harness.Condition(mp, "Ready")
		ok := st["replicas"] == int64(2) && st["readyReplicas"] == int64(2) && st["selector"] == wantSelector &&
			st["image"] == proxy.Spec.Template.Spec.Containers[0].Image && available == "True" &&
			ready == "False" && reason == "ObjectsInProgress" && strings.Contains(readyMsg, "Deployment/edge-exporter")
		return ok, msg
	})

	rolledOut(t, exporter, 1)
	harness.WaitForCondition(t, c, ns, "edge", "Ready", "True", timeout)
	st, _ := status(ctx)
	if st["replicas"] != int64(2) {
		t.Errorf("replicas %v counts the exporter's Pod, want the proxy's 2", st["replicas"])
	}
}

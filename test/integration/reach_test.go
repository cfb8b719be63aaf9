package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/test/harness"
)

// reachTemplate adds to the MyProxy chart, by release name, what a release must not do
// unless its watch allows it. OTHER is replaced by a namespace other than the release's.
const reachTemplate = `{{- if eq .Release.Name "elsewhere" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: planted
  namespace: OTHER
{{- else if eq .Release.Name "clusterwide" }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: reach-test-{{ .Release.Namespace }}
rules: []
{{- else if eq .Release.Name "peek" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: peeked
data:
  stolen: {{ (lookup "v1" "Secret" "OTHER" "secret").data | toJson | quote }}
{{- else if eq .Release.Name "peekall" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: peeked
data:
  count: {{ (lookup "v1" "Secret" "" "").items | len | quote }}
{{- else if eq .Release.Name "hooked" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: first-hook
  annotations: {"helm.sh/hook": pre-install, "helm.sh/hook-weight": "-1"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: second-hook
  namespace: OTHER
  annotations: {"helm.sh/hook": pre-install}
{{- end }}
`

func reachChart(t *testing.T, other string) string {
	t.Helper()
	chart := filepath.Join(t.TempDir(), "myproxy")
	harness.Run(t, nil, "cp", "-r", filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"), chart)
	tpl := strings.ReplaceAll(reachTemplate, "OTHER", other)
	if err := os.WriteFile(filepath.Join(chart, "templates", "reach.yaml"), []byte(tpl), 0o600); err != nil {
		t.Fatal(err)
	}
	return chart
}

// A release touches nothing outside its custom resource's namespace: an object rendered into
// another namespace, a cluster-scoped object, a lookup in another namespace or across all of
// them, and a hook in another namespace each fail the release with a condition and an Event
// naming the object, and nothing of the release is written (not even the hook before it). The
// same cluster-scoped object is installed once the watch allows its kind.
func TestReleasesStayInTheirNamespace(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	other := newNamespace(t, c, nil)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "secret"}, StringData: map[string]string{"k": "v"}}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	chart := reachChart(t, other)
	op := startOperator(t, harness.Watch{Chart: chart})

	refused := map[string]string{
		"elsewhere":   "refused to write ConfigMap " + other + "/planted",
		"clusterwide": "refused to write ClusterRole.rbac.authorization.k8s.io reach-test-" + ns + " (cluster-scoped)",
		"peek":        "refused to look up Secret " + other + "/secret",
		"peekall":     "refused to look up Secret (list) in every namespace",
		"hooked":      "refused to write ConfigMap " + other + "/second-hook",
	}
	for name := range refused {
		if err := c.Create(ctx, harness.MyProxy(ns, name, map[string]any{})); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range refused {
		mp := harness.WaitForCondition(t, c, ns, name, "ReleaseFailed", "True", timeout)
		if _, _, msg := harness.Condition(mp, "ReleaseFailed"); !strings.Contains(msg, want) {
			t.Errorf("%s: ReleaseFailed says %q, want it to name %q", name, msg, want)
		}
		if ev := harness.WaitForEvent(t, c, ns, name, "InstallFailed", timeout); !strings.Contains(ev, want) {
			t.Errorf("%s: InstallFailed Event %q does not name %q", name, ev, want)
		}
	}

	// Nothing of any of them was written: no object of the chart, no hook, no release record.
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "planted"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "second-hook"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first-hook"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "peeked"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reach-test-" + ns}},
	} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s: %v, want not found", obj, client.ObjectKeyFromObject(obj), err)
		}
	}
	for name := range refused {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: Deployment: %v, want not found", name, err)
		}
		if recs := releaseRecords(ctx, t, c, ns, name); len(recs) != 0 {
			t.Errorf("%s: %d release records left", name, len(recs))
		}
	}
	op.Stop(t)

	// An administrator allows the kind by name: the same release installs.
	startOperator(t, harness.Watch{Chart: chart, Extra: "reach:\n  clusterScoped: [ClusterRole.rbac.authorization.k8s.io]"})
	harness.WaitForCondition(t, c, ns, "clusterwide", "Deployed", "True", timeout)
	role := &rbacv1.ClusterRole{}
	if err := c.Get(ctx, types.NamespacedName{Name: "reach-test-" + ns}, role); err != nil {
		t.Errorf("the allowed ClusterRole: %v", err)
	}
	if err := c.Delete(ctx, harness.MyProxy(ns, "clusterwide", nil)); err != nil {
		t.Fatal(err)
	}
	harness.WaitForGone(t, c, role, timeout)
}

// A release record is a Secret, which a tenant who may edit their namespace can write. A
// forged revision naming an object of another namespace makes the next upgrade fail instead of
// deleting that object (Helm deletes what the current revision has and the new one lacks).
func TestAForgedReleaseRecordReachesNothingOutside(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	other := newNamespace(t, c, nil)
	victim := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "victim"}}
	if err := c.Create(ctx, victim); err != nil {
		t.Fatal(err)
	}
	startOperator(t, harness.Watch{})
	if err := c.Create(ctx, harness.MyProxy(ns, "forged", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "forged", "Deployed", "True", timeout)

	secrets := driver.NewSecrets(kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets(ns))
	deployed, err := secrets.Get(releaseKey("forged", 1))
	if err != nil {
		t.Fatal(err)
	}
	forged := *deployed
	info := *deployed.Info
	forged.Info, forged.Version = &info, 2
	forged.Manifest += fmt.Sprintf("\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: victim\n  namespace: %s\n", other)
	deployed.Info.Status = release.StatusSuperseded
	if err := secrets.Update(releaseKey("forged", 1), deployed); err != nil {
		t.Fatal(err)
	}
	if err := secrets.Create(releaseKey("forged", 2), &forged); err != nil {
		t.Fatal(err)
	}
	patchSpec(t, c, ns, "forged", `{"replicas":2}`)
	// The upgrade (its dry-run check first) builds the current revision, and is refused; so is
	// the rollback that follows a failed upgrade, for the same reason.
	refusal := "refused to write ConfigMap " + other + "/victim"
	harness.Eventually(t, timeout, "an Event naming the forged object", func(ctx context.Context) (bool, string) {
		events, err := harness.Events(ctx, c, ns, "forged")
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(strings.Join(events, "\n"), refusal), strings.Join(events, "\n")
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(victim), victim); err != nil {
		t.Errorf("the object a forged record named: %v, want it untouched", err)
	}
}

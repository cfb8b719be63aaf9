package status

import (
	"strings"
	"testing"
	"time"

	release "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
)

func conditionOf(t *testing.T, status map[string]any, conditionType string) map[string]any {
	t.Helper()
	for _, c := range status["conditions"].([]any) {
		if m := c.(map[string]any); m["type"] == conditionType {
			return m
		}
	}
	t.Fatalf("no %s condition in %v", conditionType, status["conditions"])
	return nil
}

var declaredReplicasAndURL = map[string]chartapi.Field{"replicas": {}, "url": {}}

func TestApplyReplacesOnlyItsOwnPart(t *testing.T) {
	current := map[string]any{
		"conditions":      []any{map[string]any{"type": "Deployed", "status": "True", "reason": "InstallSuccessful"}},
		"deployedRelease": map[string]any{"name": "edge"},
		"url":             "http://old",
		"foreign":         "kept",
	}
	gen := int64(4)
	got := Apply(current, declaredReplicasAndURL, Computed{
		Fields:             map[string]any{"replicas": int64(3)},
		Conditions:         []chartapi.ConditionValue{{Type: "Ready", Status: "True", Reason: "ObjectsReady"}},
		ObservedGeneration: &gen,
	}, metav1.Now())
	if got["replicas"] != int64(3) || got["observedGeneration"] != int64(4) {
		t.Errorf("computed fields not set: %v", got)
	}
	if _, ok := got["url"]; ok {
		t.Error("a declared field without a value must be removed")
	}
	if got["foreign"] != "kept" || got["deployedRelease"] == nil {
		t.Error("fields that are not declared must be kept")
	}
	if d := conditionOf(t, got, "Deployed"); d["reason"] != "InstallSuccessful" || len(got["conditions"].([]any)) != 2 {
		t.Error("the Helm reconciler's conditions must be kept")
	}
	if conditionOf(t, got, "Ready")["status"] != "True" {
		t.Error("Ready not set")
	}
	if current["replicas"] != nil || current["url"] != "http://old" {
		t.Error("Apply must not modify its input")
	}
}

func TestConditionKeepsTransitionTimeWhileUnchanged(t *testing.T) {
	deployed := map[string]any{"conditions": []any{map[string]any{"type": "Deployed", "status": "True"}}}
	ready := func(status string) Computed {
		return Computed{Conditions: []chartapi.ConditionValue{{Type: "Ready", Status: status, Reason: "R"}}}
	}
	first := Apply(deployed, declaredReplicasAndURL, ready("True"), metav1.NewTime(time.Unix(100, 0)))
	later := Apply(first, declaredReplicasAndURL, ready("True"), metav1.NewTime(time.Unix(200, 0)))
	if a, b := conditionOf(t, first, "Ready")["lastTransitionTime"], conditionOf(t, later, "Ready")["lastTransitionTime"]; a != b {
		t.Errorf("lastTransitionTime moved from %v to %v without a status change", a, b)
	}
	if _, ok := later["observedGeneration"]; ok {
		t.Error("observedGeneration must stay unset while unknown")
	}
	flipped := Apply(later, declaredReplicasAndURL, ready("False"), metav1.NewTime(time.Unix(300, 0)))
	if c := conditionOf(t, flipped, "Ready"); c["lastTransitionTime"] == conditionOf(t, later, "Ready")["lastTransitionTime"] {
		t.Error("lastTransitionTime must move when the status changes")
	}
}

// deploymentObject is a Deployment of 2 replicas, available of them available, whose
// controller observed generation 3.
func deploymentObject(available int64, generation int64) ReleaseObject {
	const replicas, observed = int64(2), int64(3)
	return ReleaseObject{
		Ref: Ref{GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "n", Name: "web"},
		Live: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "n", "generation": generation},
			"spec":     map[string]any{"replicas": replicas},
			"status": map[string]any{"observedGeneration": observed, "replicas": replicas, "updatedReplicas": replicas,
				"readyReplicas": available, "availableReplicas": available,
				"conditions": []any{map[string]any{"type": "Available", "status": "True"}}},
		},
	}
}

func TestReadyFollowsTheKstatusRules(t *testing.T) {
	configMap := ReleaseObject{Ref: Ref{GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Name: "c"},
		Live: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "generation": int64(1)}}}
	secret := ReleaseObject{Ref: Ref{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Name: "s"}}
	missing := ReleaseObject{Ref: Ref{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Service"}, Name: "gone"}}
	failedJob := ReleaseObject{Ref: Ref{GVK: schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, Name: "j"},
		Live: map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "j", "generation": int64(1)},
			"spec":   map[string]any{},
			"status": map[string]any{"conditions": []any{map[string]any{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}}}}}
	elsewhere := ReleaseObject{Ref: Ref{GVK: schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
		Namespace: "kube-system", Name: "reader"}, Unfollowed: true}
	cases := []struct {
		name     string
		deployed bool
		objects  []ReleaseObject
		status   string
		reason   string
		message  string // a part of it
	}{
		{name: "an object outside the watched namespaces is named, not waited for", deployed: true,
			objects: []ReleaseObject{configMap, elsewhere}, status: "True", reason: names.ReasonObjectsReady,
			message: "1 of 2 objects ready; not followed, outside the namespaces the operator watches (WATCH_NAMESPACE): RoleBinding kube-system/reader"},
		{name: "not deployed", deployed: false, objects: []ReleaseObject{configMap}, status: "False", reason: names.ReasonNotDeployed},
		{name: "all current", deployed: true, objects: []ReleaseObject{configMap, secret, deploymentObject(2, 3)}, status: "True", reason: names.ReasonObjectsReady},
		{name: "rolling out", deployed: true, objects: []ReleaseObject{configMap, deploymentObject(1, 3)}, status: "False", reason: names.ReasonObjectsInProgress},
		{name: "generation not observed", deployed: true, objects: []ReleaseObject{deploymentObject(2, 4)}, status: "False", reason: names.ReasonObjectsInProgress},
		{name: "missing object", deployed: true, objects: []ReleaseObject{configMap, missing}, status: "False", reason: names.ReasonObjectsInProgress},
		{name: "failed job", deployed: true, objects: []ReleaseObject{failedJob, deploymentObject(1, 3)}, status: "False", reason: names.ReasonObjectsFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Ready(tc.deployed, tc.objects)
			if got.Status != tc.status || got.Reason != tc.reason || !strings.Contains(got.Message, tc.message) {
				t.Errorf("Ready = %+v, want %s/%s with %q", got, tc.status, tc.reason, tc.message)
			}
		})
	}
}

func TestParseManifest(t *testing.T) {
	manifest := "---\n# Source: c/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n" +
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n---\n" +
		"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: other\n---\n" +
		"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata:\n    name: s\n" +
		"- apiVersion: v1\n  kind: List\n  items:\n  - apiVersion: v1\n    kind: Secret\n    metadata:\n      name: t\n---\n" +
		"apiVersion: v1\nkind: List\nitems: []\n"
	clusterScoped := func(gvk schema.GroupVersionKind) bool { return gvk.Kind != "ClusterRole" }
	refs, err := ParseManifest(manifest, "ns", clusterScoped)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"ConfigMap/a": "ns", "ClusterRole/r": "", "Deployment/d": "other", "Service/s": "ns", "Secret/t": "ns"}
	if len(refs) != len(want) {
		t.Fatalf("refs %v", refs)
	}
	for _, r := range refs {
		if ns, ok := want[r.String()]; !ok || ns != r.Namespace {
			t.Errorf("ref %v in namespace %q", r, r.Namespace)
		}
	}
}

// A release's objects are remembered with its generation, parsed again only when its manifest
// changes, and forgotten with it.
func TestAppliedRemembersTheReleaseObjects(t *testing.T) {
	a := NewAppliedGenerations(nil, myProxyGVK, func(schema.GroupVersionKind) bool { return true })
	cr := &unstructured.Unstructured{}
	cr.SetNamespace("ns")
	cr.SetName("cr")
	cr.SetUID("u1")
	cr.SetGeneration(2)
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
	if err := a.Applied(cr, &release.Release{Manifest: manifest}); err != nil {
		t.Fatal(err)
	}
	key := keyOf("ns", "cr")
	last, known := a.last(key)
	if refs := last.refs; !known || len(refs) != 1 || refs[0].String() != "ConfigMap/a" || refs[0].Namespace != "ns" {
		t.Errorf("objects %v (known %v), want ConfigMap/a in ns", refs, known)
	}
	if last.uid != "u1" || last.generation != 2 {
		t.Errorf("generation %d of %s, want 2 of u1", last.generation, last.uid)
	}
	if err := a.Applied(cr, &release.Release{Manifest: manifest + "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: b\n"}); err != nil {
		t.Fatal(err)
	}
	if last, _ := a.last(key); len(last.refs) != 2 {
		t.Errorf("objects %v after the manifest changed, want two", last.refs)
	}
	if a.Len() != 1 {
		t.Error("not remembered")
	}
	a.Forget(key)
	if _, known := a.last(key); known || a.Len() != 0 {
		t.Error("not forgotten")
	}
}

func keyOf(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

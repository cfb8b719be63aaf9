package status

import (
	"context"
	"strings"
	"testing"

	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/example/myproxy-operator/internal/names"
)

func availableDeployment(labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "edge", Labels: labels, Generation: 1},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
	}
}

// A rollout reads a release's health from the live objects: Ready by kstatus, and every
// condition the chart declares to gate rollouts (MyProxy's Available needs the proxy's label).
func TestReadyLiveIsReadyAndTheGatingConditions(t *testing.T) {
	key := types.NamespacedName{Namespace: "team", Name: "edge"}
	service := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "edge"}}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		ready  bool
		why    string
	}{
		{name: "available proxy", labels: map[string]string{"app.kubernetes.io/component": "proxy"}, ready: true},
		{name: "no proxy Deployment", labels: map[string]string{"app.kubernetes.io/component": "other"},
			why: "condition Available is False (NoDeployment)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := myProxy(condition(names.ConditionDeployed))
			r, c, _ := statusReconciler(t, cr, availableDeployment(tc.labels), service)
			if why, err := r.ReadyLive(context.Background(), c, key); err != nil || why == "" {
				t.Fatalf("before the release's objects are known: %q, %v; want not ready", why, err)
			}
			if err := r.Applied.Applied(cr, &release.Release{Manifest: proxyManifest}); err != nil {
				t.Fatal(err)
			}
			why, err := r.ReadyLive(context.Background(), c, key)
			if err != nil || (why == "") != tc.ready || !strings.Contains(why, tc.why) {
				t.Errorf("ReadyLive = %q, %v; want ready %v, %q", why, err, tc.ready, tc.why)
			}
		})
	}
}

// A resource a halted rollout holds carries RolloutHeld, and loses it when the hold ends.
func TestRolloutHeldComesAndGoesWithTheHold(t *testing.T) {
	key := types.NamespacedName{Namespace: "team", Name: "edge"}
	cr := myProxy(condition(names.ConditionDeployed))
	r, c, _ := statusReconciler(t, cr, availableDeployment(map[string]string{"app.kubernetes.io/component": "proxy"}))
	if err := r.Applied.Applied(cr, &release.Release{Manifest: proxyManifest}); err != nil {
		t.Fatal(err)
	}
	held := true
	r.Held = func(types.NamespacedName) (string, bool) { return "the rollout halted: team/other failed", held }
	heldCondition := func() (string, string) {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		list, _, _ := unstructured.NestedSlice(getMyProxy(t, c, key).Object, "status", "conditions")
		for _, item := range list {
			if m := item.(map[string]any); m["type"] == names.ConditionRolloutHeld {
				return m["status"].(string), m["message"].(string)
			}
		}
		return "", ""
	}
	if st, msg := heldCondition(); st != "True" || !strings.Contains(msg, "team/other failed") {
		t.Errorf("held: RolloutHeld %q %q", st, msg)
	}
	held = false
	if st, _ := heldCondition(); st != "" {
		t.Errorf("the hold ended, RolloutHeld is still %q", st)
	}
}

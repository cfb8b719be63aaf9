package status

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func deployment(name string, want, ready int32, available corev1.ConditionStatus) appsv1.Deployment {
	return appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 2},
		Spec: appsv1.DeploymentSpec{
			Replicas: &want,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/instance": name}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Image: "nginx:1"}}}},
		},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 2, Replicas: want, ReadyReplicas: ready,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: available, Message: "m"}},
		},
	}
}

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

func TestCompute(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "team"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	helmConditions := []any{map[string]any{"type": "Deployed", "status": "True", "reason": "InstallSuccessful"}}

	cases := []struct {
		name       string
		helm       []any
		owned      Owned
		wantStatus string
		wantReason string
		wantReady  int64
		wantURL    string
		wantSel    string
	}{
		{"nothing deployed yet", helmConditions, Owned{}, "False", "NoDeployment", 0, "", ""},
		{"objects of a release that is not deployed do not count",
			[]any{map[string]any{"type": "Deployed", "status": "False", "reason": "InstallSuccessful"}},
			Owned{Deployments: []appsv1.Deployment{deployment("edge", 3, 3, corev1.ConditionTrue)}, Services: []corev1.Service{svc}},
			"False", "NoDeployment", 0, "", ""},
		{"rolling out", helmConditions, Owned{Deployments: []appsv1.Deployment{deployment("edge", 3, 1, corev1.ConditionFalse)}, Services: []corev1.Service{svc}},
			"False", "DeploymentUnavailable", 1, "http://edge.team.svc:80", "app.kubernetes.io/instance=edge"},
		{"available", helmConditions, Owned{Deployments: []appsv1.Deployment{deployment("edge", 3, 3, corev1.ConditionTrue)}, Services: []corev1.Service{svc}},
			"True", "DeploymentAvailable", 3, "http://edge.team.svc:80", "app.kubernetes.io/instance=edge"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			current := map[string]any{"conditions": c.helm, "deployedRelease": map[string]any{"name": "edge"}}
			got := Compute(current, c.owned, 4, true, now)
			if got["readyReplicas"] != c.wantReady {
				t.Errorf("readyReplicas = %v, want %d", got["readyReplicas"], c.wantReady)
			}
			if u, _ := got["url"].(string); u != c.wantURL {
				t.Errorf("url = %q, want %q", u, c.wantURL)
			}
			if s, _ := got["selector"].(string); s != c.wantSel {
				t.Errorf("selector = %q, want %q", s, c.wantSel)
			}
			if got["observedGeneration"] != int64(4) {
				t.Errorf("observedGeneration = %v", got["observedGeneration"])
			}
			a := conditionOf(t, got, ConditionAvailable)
			if a["status"] != c.wantStatus || a["reason"] != c.wantReason {
				t.Errorf("Available = %v/%v, want %s/%s (%v)", a["status"], a["reason"], c.wantStatus, c.wantReason, a["message"])
			}
			if d := conditionOf(t, got, "Deployed"); d["reason"] != "InstallSuccessful" || len(got["conditions"].([]any)) != 2 {
				t.Error("the Helm reconciler's conditions must be kept")
			}
			if got["deployedRelease"] == nil {
				t.Error("deployedRelease must be kept")
			}
			if current["replicas"] != nil {
				t.Error("Compute must not modify its input")
			}
		})
	}
}

func TestAvailableKeepsTransitionTimeWhileUnchanged(t *testing.T) {
	owned := Owned{Deployments: []appsv1.Deployment{deployment("edge", 1, 1, corev1.ConditionTrue)}}
	deployed := map[string]any{"conditions": []any{map[string]any{"type": "Deployed", "status": "True"}}}
	first := Compute(deployed, owned, 0, false, metav1.NewTime(time.Unix(100, 0)))
	later := Compute(first, owned, 0, false, metav1.NewTime(time.Unix(200, 0)))
	if a, b := conditionOf(t, first, ConditionAvailable)["lastTransitionTime"], conditionOf(t, later, ConditionAvailable)["lastTransitionTime"]; a != b {
		t.Errorf("lastTransitionTime moved from %v to %v without a status change", a, b)
	}
	if _, ok := later["observedGeneration"]; ok {
		t.Error("observedGeneration must stay unset while unknown")
	}
	owned.Deployments[0].Status.Conditions[0].Status = corev1.ConditionFalse
	flipped := Compute(later, owned, 0, false, metav1.NewTime(time.Unix(300, 0)))
	if c := conditionOf(t, flipped, ConditionAvailable); c["lastTransitionTime"] == conditionOf(t, later, ConditionAvailable)["lastTransitionTime"] {
		t.Error("lastTransitionTime must move when the status changes")
	}
}

func TestHTTPSURL(t *testing.T) {
	svc := corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 8443}}}}
	if got := urlOf([]corev1.Service{svc}); got != "https://s.n.svc:8443" {
		t.Errorf("url = %q", got)
	}
}

// What Compute reads of a Deployment survives deploymentView.
func TestDeploymentView(t *testing.T) {
	d := deployment("edge", 3, 2, corev1.ConditionTrue)
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "b"}}
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "conf"}}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
	if err != nil {
		t.Fatal(err)
	}
	var got appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(deploymentView(u), &got); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	deployed := map[string]any{"conditions": []any{map[string]any{"type": "Deployed", "status": "True"}}}
	want := Compute(deployed, Owned{Deployments: []appsv1.Deployment{d}}, 1, true, now)
	if want["image"] == nil || want["replicas"] != int64(3) {
		t.Fatalf("the test Deployment does not count: %v", want)
	}
	if have := Compute(deployed, Owned{Deployments: []appsv1.Deployment{got}}, 1, true, now); !reflect.DeepEqual(have, want) {
		t.Errorf("status from the view:\n%v\nfrom the Deployment:\n%v", have, want)
	}
	if got.Name != "edge" || *got.Spec.Replicas != *d.Spec.Replicas || got.Spec.Selector == nil ||
		got.Spec.Template.Spec.Containers[0].Image != d.Spec.Template.Spec.Containers[0].Image {
		t.Errorf("view lost what Compute reads: %+v", got)
	}
}

package status

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Owned are the objects of a release that the status is read from.
type Owned struct {
	Deployments []appsv1.Deployment
	Services    []corev1.Service
}

// Compute returns the status with this package's fields set from the owned objects; every other
// field (the Helm reconciler's conditions, deployedRelease) is kept as it is in current.
// generation is the metadata.generation the Helm reconciler last applied, if known.
//
// Objects count only while the release is deployed (the Helm reconciler's Deployed condition):
// a failing install creates objects and removes them again on rollback, and mirroring that
// churn would only race the reconciler's own status writes.
func Compute(current map[string]any, owned Owned, generation int64, known bool, now metav1.Time) map[string]any {
	out := runtime.DeepCopyJSON(current)
	if out == nil {
		out = map[string]any{}
	}
	if !deployed(out) {
		owned = Owned{}
	}
	sort.Slice(owned.Deployments, func(i, j int) bool { return owned.Deployments[i].Name < owned.Deployments[j].Name })
	sort.Slice(owned.Services, func(i, j int) bool { return owned.Services[i].Name < owned.Services[j].Name })

	var replicas, ready int64
	for _, d := range owned.Deployments {
		replicas += int64(d.Status.Replicas)
		ready += int64(d.Status.ReadyReplicas)
	}
	out["replicas"] = replicas
	out["readyReplicas"] = ready
	setOrDelete(out, "selector", selectorOf(owned.Deployments))
	setOrDelete(out, "image", imageOf(owned.Deployments))
	setOrDelete(out, "url", urlOf(owned.Services))
	if known {
		out["observedGeneration"] = generation
	}
	out["conditions"] = withCondition(out["conditions"], available(owned.Deployments), now)
	return out
}

func deployed(status map[string]any) bool {
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Deployed" {
			return m["status"] == "True"
		}
	}
	return false
}

func setOrDelete(m map[string]any, key, value string) {
	if value == "" {
		delete(m, key)
		return
	}
	m[key] = value
}

// selectorOf is the label selector of the proxy Pods, for the scale subresource (and HPAs).
func selectorOf(deployments []appsv1.Deployment) string {
	if len(deployments) != 1 || deployments[0].Spec.Selector == nil {
		return ""
	}
	s, err := metav1.LabelSelectorAsSelector(deployments[0].Spec.Selector)
	if err != nil {
		return ""
	}
	return s.String()
}

func imageOf(deployments []appsv1.Deployment) string {
	if len(deployments) == 0 || len(deployments[0].Spec.Template.Spec.Containers) == 0 {
		return ""
	}
	return deployments[0].Spec.Template.Spec.Containers[0].Image
}

// urlOf is the in-cluster URL of the release's first Service port (https when the port is named so).
func urlOf(services []corev1.Service) string {
	if len(services) == 0 || len(services[0].Spec.Ports) == 0 {
		return ""
	}
	svc := services[0]
	port := svc.Spec.Ports[0]
	scheme := "http"
	if port.Name == "https" || port.Port == 443 {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s.%s.svc:%d", scheme, svc.Name, svc.Namespace, port.Port)
}

type condition struct {
	status, reason, message string
}

// available summarises the Deployments' Available conditions.
func available(deployments []appsv1.Deployment) condition {
	if len(deployments) == 0 {
		return condition{"False", "NoDeployment", "no Deployment of a deployed release"}
	}
	var waiting []string
	for _, d := range deployments {
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if c := deploymentCondition(d, appsv1.DeploymentAvailable); c == nil || c.Status != corev1.ConditionTrue ||
			d.Status.ObservedGeneration < d.Generation {
			msg := fmt.Sprintf("Deployment %s: %d/%d replicas ready", d.Name, d.Status.ReadyReplicas, want)
			if c != nil && c.Message != "" {
				msg += ": " + c.Message
			}
			waiting = append(waiting, msg)
		}
	}
	if len(waiting) > 0 {
		return condition{"False", "DeploymentUnavailable", strings.Join(waiting, "; ")}
	}
	d := deployments[0]
	return condition{"True", "DeploymentAvailable",
		fmt.Sprintf("Deployment %s: %d/%d replicas ready", d.Name, d.Status.ReadyReplicas, d.Status.Replicas)}
}

func deploymentCondition(d appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// withCondition sets the Available condition in a status.conditions list, keeping the others
// and the transition time when the status did not change.
func withCondition(list any, c condition, now metav1.Time) []any {
	items, _ := list.([]any)
	out := make([]any, 0, len(items)+1)
	next := map[string]any{
		"type": ConditionAvailable, "status": c.status, "reason": c.reason, "message": c.message,
		"lastTransitionTime": now.UTC().Format("2006-01-02T15:04:05Z"),
	}
	replaced := false
	for _, item := range items {
		m, ok := item.(map[string]any)
		if !ok || m["type"] != ConditionAvailable {
			out = append(out, item)
			continue
		}
		if m["status"] == c.status && m["lastTransitionTime"] != nil {
			next["lastTransitionTime"] = m["lastTransitionTime"]
		}
		out = append(out, next)
		replaced = true
	}
	if !replaced {
		out = append(out, next)
	}
	return out
}

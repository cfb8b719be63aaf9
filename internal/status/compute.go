package status

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
)

// Computed is what this package writes into a status: the declared fields that have a value,
// the conditions (declared ones and Ready), and the applied generation when it is known.
type Computed struct {
	Fields     map[string]any
	Conditions []chartapi.ConditionValue
	// Absent are condition types removed from the status.
	Absent             []string
	ObservedGeneration *int64
}

// Apply returns current with this package's part replaced by computed: own names the declared
// fields (those without a value are removed); every other field and condition (the Helm
// reconciler's conditions, deployedRelease) is kept. A condition keeps its transition time while
// its status does not change.
func Apply(current map[string]any, own Own, computed Computed, now metav1.Time) map[string]any {
	out := runtime.DeepCopyJSON(current)
	if out == nil {
		out = map[string]any{}
	}
	for _, name := range own.Fields {
		if v, ok := computed.Fields[name]; ok {
			out[name] = v
		} else {
			delete(out, name)
		}
	}
	if computed.ObservedGeneration != nil {
		out[names.StatusObservedGeneration] = *computed.ObservedGeneration
	}
	conditions, _ := out[names.StatusConditions].([]any)
	for _, c := range computed.Conditions {
		conditions = withCondition(conditions, c, now)
	}
	for _, t := range computed.Absent {
		conditions = withoutConditions(conditions, []string{t})
	}
	out[names.StatusConditions] = conditions
	return out
}

// Deployed reports whether the Helm reconciler's Deployed condition is True.
func Deployed(status map[string]any) bool {
	conds, _ := status[names.StatusConditions].([]any)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == names.ConditionDeployed {
			return m["status"] == "True"
		}
	}
	return false
}

// withCondition sets one condition in a status.conditions list, keeping the others and the
// transition time when the status did not change.
func withCondition(items []any, c chartapi.ConditionValue, now metav1.Time) []any {
	out := make([]any, 0, len(items)+1)
	next := map[string]any{
		"type": c.Type, "status": c.Status, "reason": c.Reason, "message": c.Message,
		"lastTransitionTime": now.UTC().Format("2006-01-02T15:04:05Z"),
	}
	replaced := false
	for _, item := range items {
		m, ok := item.(map[string]any)
		if !ok || m["type"] != c.Type {
			out = append(out, item)
			continue
		}
		if m["status"] == c.Status && m["lastTransitionTime"] != nil {
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

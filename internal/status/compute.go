package status

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

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

// Apply returns current with this package's part replaced by computed: fields are the declared
// fields (those without a value are removed); every other field and condition (the Helm
// reconciler's conditions, deployedRelease) is kept. A condition keeps its transition time while
// its status does not change. current is a status the Helm reconciler wrote: never nil.
func Apply(current map[string]any, fields map[string]chartapi.Field, computed Computed, now metav1.Time) map[string]any {
	out := runtime.DeepCopyJSON(current)
	for name := range fields {
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
	out[names.StatusConditions] = withoutConditions(conditions, computed.Absent)
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

// withCondition sets one condition in a status.conditions list (Apply's copy, changed in place),
// keeping the others and the transition time when the status did not change.
func withCondition(items []any, c chartapi.ConditionValue, now metav1.Time) []any {
	next := map[string]any{
		"type": c.Type, "status": c.Status, "reason": c.Reason, "message": c.Message,
		"lastTransitionTime": now.UTC().Format("2006-01-02T15:04:05Z"),
	}
	replaced := false
	for i, item := range items {
		if m, ok := item.(map[string]any); ok && m["type"] == c.Type {
			if m["status"] == c.Status && m["lastTransitionTime"] != nil {
				next["lastTransitionTime"] = m["lastTransitionTime"]
			}
			items[i], replaced = next, true
		}
	}
	if !replaced {
		items = append(items, next)
	}
	return items
}

// maxListed bounds how many objects the Ready message names.
const maxListed = 5

// Ready is the condition every kind gets, chart declaration or not: the release is deployed and
// every one of its objects is Current by the kstatus rules (sigs.k8s.io/cli-utils, the rules
// Flux and kpt use): Deployments rolled out with their replicas available, StatefulSets and
// DaemonSets updated and ready, Jobs complete, PVCs bound, LoadBalancer Services with an
// address, and any kind with a Ready condition or an observedGeneration behind its generation
// judged by them. An object of the release that is missing from the cluster is not ready. An
// object outside the namespaces the operator watches cannot be read: it is named as not
// followed, and does not hold Ready back.
func Ready(isDeployed bool, objects []ReleaseObject) chartapi.ConditionValue {
	c := chartapi.ConditionValue{Type: names.ConditionReady}
	if !isDeployed {
		c.Status, c.Reason, c.Message = "False", names.ReasonNotDeployed, "the release is not deployed (see the Deployed condition)"
		return c
	}
	var failed, waiting, unfollowed []string
	for _, o := range objects {
		status, message := objectStatus(o)
		switch {
		case o.Unfollowed:
			unfollowed = append(unfollowed, o.Ref.GVK.Kind+" "+o.Ref.Namespace+"/"+o.Ref.Name)
		case status == kstatus.CurrentStatus: // ready
		case status == kstatus.FailedStatus:
			failed = append(failed, o.Ref.String()+": "+message)
		default:
			waiting = append(waiting, o.Ref.String()+": "+message)
		}
	}
	switch {
	case len(failed) > 0:
		c.Status, c.Reason, c.Message = "False", names.ReasonObjectsFailed, listed(append(failed, waiting...))
	case len(waiting) > 0:
		c.Status, c.Reason, c.Message = "False", names.ReasonObjectsInProgress, listed(waiting)
	default:
		c.Status, c.Reason, c.Message = "True", names.ReasonObjectsReady, fmt.Sprintf("%d of %d objects ready", len(objects)-len(unfollowed), len(objects))
	}
	if len(unfollowed) > 0 {
		c.Message += "; not followed, outside the namespaces the operator watches (WATCH_NAMESPACE): " + listed(unfollowed)
	}
	return c
}

func objectStatus(o ReleaseObject) (kstatus.Status, string) {
	if o.Live == nil {
		if o.Ref.Opaque() {
			return kstatus.CurrentStatus, ""
		}
		return kstatus.NotFoundStatus, "not found"
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: o.Live})
	if err != nil {
		return kstatus.UnknownStatus, err.Error()
	}
	return res.Status, res.Message
}

func listed(items []string) string {
	if len(items) > maxListed {
		items = append(items[:maxListed:maxListed], fmt.Sprintf("and %d more", len(items)-maxListed))
	}
	return strings.Join(items, "; ")
}

// withoutConditions is a copy of a status's conditions without those of the given types (never
// nil, so that two lists compare by their conditions alone).
func withoutConditions(conditions any, types []string) []any {
	list, _ := conditions.([]any)
	return slices.DeleteFunc(append([]any{}, list...), func(c any) bool {
		m, ok := c.(map[string]any)
		return ok && slices.Contains(types, fmt.Sprint(m["type"]))
	})
}

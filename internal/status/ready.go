package status

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
)

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
		if o.Unfollowed {
			unfollowed = append(unfollowed, o.Ref.GVK.Kind+" "+o.Ref.Namespace+"/"+o.Ref.Name)
			continue
		}
		status, message := objectStatus(o)
		switch status {
		case kstatus.CurrentStatus:
			continue
		case kstatus.FailedStatus:
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

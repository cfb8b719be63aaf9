package manifestgen

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/myproxy-operator/hack/manifests/chartrender"
	"github.com/example/myproxy-operator/internal/tenancy"
)

// clusterScoped are the cluster-scoped kinds of Kubernetes' own APIs. An offline rendering has
// no cluster to ask; a kind of a CRD that is missing here is caught by the operator at its
// first action (package helmconfig), which asks the cluster.
var clusterScoped = map[schema.GroupKind]bool{}

func init() {
	for group, kinds := range map[string][]string{
		"":                             {"Namespace", "Node", "PersistentVolume", "ComponentStatus"},
		"rbac.authorization.k8s.io":    {"ClusterRole", "ClusterRoleBinding"},
		"apiextensions.k8s.io":         {"CustomResourceDefinition"},
		"apiregistration.k8s.io":       {"APIService"},
		"admissionregistration.k8s.io": {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"},
		"storage.k8s.io":               {"StorageClass", "CSIDriver", "CSINode", "VolumeAttachment", "VolumeAttributesClass"},
		"scheduling.k8s.io":            {"PriorityClass"},
		"node.k8s.io":                  {"RuntimeClass"},
		"networking.k8s.io":            {"IngressClass", "IPAddress", "ServiceCIDR"},
		"certificates.k8s.io":          {"CertificateSigningRequest", "ClusterTrustBundle"},
		"flowcontrol.apiserver.k8s.io": {"FlowSchema", "PriorityLevelConfiguration"},
		"resource.k8s.io":              {"DeviceClass", "ResourceSlice"},
		"storagemigration.k8s.io":      {"StorageVersionMigration"},
		"internal.apiserver.k8s.io":    {"StorageVersion"},
	} {
		for _, k := range kinds {
			clusterScoped[schema.GroupKind{Group: group, Kind: k}] = true
		}
	}
}

// checkReach refuses a chart whose renderings write what its watch does not allow: a built-in
// cluster-scoped kind that reach.clusterScoped does not name, or an object placed in a
// namespace other than the release's that reach.namespaces does not name. Such a release
// would fail at its first action; make manifests says so first, and grants no right for it.
// It names every such object of every rendering at once, each with the reach entry that would
// allow it, and the watch's whole reach that would allow them all, so that an administrator
// decides in one pass.
func checkReach(gk schema.GroupKind, chartPath string, p tenancy.Policy, renderings []chartrender.Rendering) error {
	var lines []string
	seen := map[string]int{} // line index by object
	allowed := p
	for _, r := range renderings {
		values := "the default values"
		if r.ValuesFile != "" {
			values = r.ValuesFile
		}
		for _, o := range r.Objects {
			err := reachOf(p, o)
			if err == nil {
				continue
			}
			var refused *tenancy.ReachError
			if !errors.As(err, &refused) {
				return fmt.Errorf("%s, rendered with %s: %w", chartPath, values, err)
			}
			if i, ok := seen[refused.Object.String()]; ok {
				lines[i] += ", " + values
				continue
			}
			seen[refused.Object.String()] = len(lines)
			lines = append(lines, fmt.Sprintf("  %s (%s), rendered with %s", refused.Object, allowedBy(refused), values))
			if refused.Object.Namespaced {
				allowed.Namespaces = appendNew(allowed.Namespaces, refused.Object.Namespace)
			} else {
				allowed.ClusterScoped = appendNew(allowed.ClusterScoped, refused.Object.GroupKind.String())
			}
		}
	}
	if len(lines) == 0 {
		return nil
	}
	entry := "  reach:\n"
	if len(allowed.ClusterScoped) > 0 {
		entry += "    clusterScoped: [" + strings.Join(allowed.ClusterScoped, ", ") + "]\n"
	}
	if len(allowed.Namespaces) > 0 {
		entry += "    namespaces: [" + strings.Join(allowed.Namespaces, ", ") + "]\n"
	}
	return fmt.Errorf("%s: %s writes %d object(s) outside the custom resource's namespace that its watches.yaml entry's %s "+
		"does not allow; a release would be refused at its first action:\n%s\nTo allow them all, give the entry of %s this %s "+
		"(it keeps what the entry allows already), or change the chart:\n%s",
		gk, chartPath, len(lines), tenancy.ReachKey, strings.Join(lines, "\n"), gk, tenancy.ReachKey, strings.TrimSuffix(entry, "\n"))
}

// allowedBy names the reach entry that would allow what err refuses.
func allowedBy(err error) string {
	var refused *tenancy.ReachError
	if !errors.As(err, &refused) {
		return "no reach entry allows it"
	}
	if refused.Object.Namespaced {
		return fmt.Sprintf("%s.namespaces: [%s] would allow it", tenancy.ReachKey, refused.Object.Namespace)
	}
	return fmt.Sprintf("%s.clusterScoped: [%s] would allow it", tenancy.ReachKey, refused.Object.GroupKind)
}

// appendNew appends s to list unless it holds it, keeping the list sorted.
func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	out := append(slices.Clone(list), s)
	slices.Sort(out)
	return out
}

// withinReach returns r with only the objects the watch allows, and an error per object left
// out: no right is granted for what a release would be refused.
func withinReach(p tenancy.Policy, r chartrender.Rendering) (chartrender.Rendering, []error) {
	var kept []map[string]any
	var refused []error
	for _, o := range r.Objects {
		if err := reachOf(p, o); err != nil {
			refused = append(refused, err)
			continue
		}
		kept = append(kept, o)
	}
	r.Objects = kept
	return r, refused
}

// identityOf is a rendered object's group and kind, name and namespace ("" when it names none).
func identityOf(o map[string]any) (gk schema.GroupKind, name, ns string) {
	apiVersion, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	meta, _ := o["metadata"].(map[string]any)
	name, _ = meta["name"].(string)
	ns, _ = meta["namespace"].(string)
	return schema.FromAPIVersionAndKind(apiVersion, kind).GroupKind(), name, ns
}

// reachOf says whether the watch allows a release to write the rendered object o.
func reachOf(p tenancy.Policy, o map[string]any) error {
	gk, name, ns := identityOf(o)
	obj := tenancy.Object{GroupKind: gk, Namespaced: !clusterScoped[gk], Namespace: ns, Name: name}
	if obj.Namespaced && ns == "" {
		obj.Namespace = chartrender.SampleNamespace // Helm puts it in the release's namespace
	}
	if !obj.Namespaced {
		obj.Namespace = ""
	}
	return p.Write(chartrender.SampleNamespace, obj)
}

package manifestgen

import (
	"fmt"

	"github.com/example/myproxy-operator/internal/tenancy"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/myproxy-operator/hack/manifests/chartrender"
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
func checkReach(chartPath string, p tenancy.Policy, renderings []chartrender.Rendering) error {
	for _, r := range renderings {
		for _, o := range r.Objects {
			if err := reachOf(p, o); err != nil {
				values := "the default values"
				if r.ValuesFile != "" {
					values = r.ValuesFile
				}
				return fmt.Errorf("%s, rendered with %s: %w", chartPath, values, err)
			}
		}
	}
	return nil
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

// reachOf says whether the watch allows a release to write the rendered object o.
func reachOf(p tenancy.Policy, o map[string]any) error {
	apiVersion, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	gk := schema.FromAPIVersionAndKind(apiVersion, kind).GroupKind()
	meta, _ := o["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	obj := tenancy.Object{GroupKind: gk, Namespaced: !clusterScoped[gk], Namespace: ns, Name: name}
	if obj.Namespaced && ns == "" {
		obj.Namespace = chartrender.SampleNamespace // Helm puts it in the release's namespace
	}
	if !obj.Namespaced {
		obj.Namespace = ""
	}
	return p.Write(chartrender.SampleNamespace, obj)
}

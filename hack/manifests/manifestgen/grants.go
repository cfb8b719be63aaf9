package manifestgen

import (
	"fmt"
	"slices"

	"github.com/example/myproxy-operator/hack/manifests/chartrender"
)

// refusedVerbs are never passed on from a chart's Role or ClusterRole to the operator's own
// role: creating an RBAC object requires holding what it grants, but the rights to grant more
// than one holds (escalate, bind) or to act as another (impersonate) never come from a chart.
var refusedVerbs = []string{"escalate", "bind", "impersonate"}

// chartGrants returns the rules the Roles and ClusterRoles of the renderings hold, as rules the
// operator (or the tenant's ServiceAccount) must hold to create them, and a note for each rule
// or verb left out: wildcards, non-resource URLs and the refused verbs.
func chartGrants(renderings []chartrender.Rendering) (rules []rule, notes []string) {
	for _, r := range renderings {
		for _, o := range r.Objects {
			apiVersion, _ := o["apiVersion"].(string)
			kind, _ := o["kind"].(string)
			if apiVersion != "rbac.authorization.k8s.io/v1" || (kind != "Role" && kind != "ClusterRole") {
				continue
			}
			meta, _ := o["metadata"].(map[string]any)
			name := fmt.Sprintf("%s %v", kind, meta["name"])
			items, _ := o["rules"].([]any)
			for _, item := range items {
				pr, _ := item.(map[string]any)
				if _, ok := pr["nonResourceURLs"]; ok {
					notes = append(notes, fmt.Sprintf("%s: a rule on non-resource URLs is not granted to the operator", name))
					continue
				}
				groups, resources, verbs := stringList(pr["apiGroups"]), stringList(pr["resources"]), stringList(pr["verbs"])
				if slices.Contains(groups, "*") || slices.Contains(resources, "*") || slices.Contains(verbs, "*") {
					notes = append(notes, fmt.Sprintf("%s: a rule with a wildcard is not granted to the operator (name what it needs)", name))
					continue
				}
				kept := slices.DeleteFunc(slices.Clone(verbs), func(v string) bool { return slices.Contains(refusedVerbs, v) })
				if len(kept) < len(verbs) {
					notes = append(notes, fmt.Sprintf("%s: escalate, bind and impersonate are never granted to the operator", name))
				}
				if len(kept) == 0 {
					continue
				}
				for _, g := range groups {
					for _, res := range resources {
						rules = append(rules, rule{group: g, resource: res, verbs: kept})
					}
				}
			}
		}
	}
	return rules, notes
}

func stringList(v any) []string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, item := range items {
		if s, ok := item.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

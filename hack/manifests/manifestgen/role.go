package manifestgen

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/myproxy-operator/internal/tenancy"
)

// Verbs, once each: what the operator's requests use (an e2e test compares them with the
// apiserver's audit log). list stays beside every watch: informers list first unless client-go's
// watch-list protocol is on and served.
var (
	// What Helm does to the objects a chart renders: get, create, patch, update (a forced
	// upgrade replaces), delete, and the informers of drift correction and status.
	manage = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	// What templates read with lookup: a get or a list, and the watch that follows what a
	// rendering read (actionclient.Lookups). Also what the operator keeps of the objects of a
	// kind whose releases run as a tenant's ServiceAccount (package tenant), which writes them.
	lookupVerbs = []string{"get", "list", "watch"}
	// Helm sets blockOwnerDeletion on the owner references to the custom resource, which
	// clusters with the OwnerReferencesPermissionEnforcement admission plugin allow only to
	// whoever may update the custom resource's finalizers.
	ownerVerbs = []string{"update"}
	// Release records: Helm reads, creates, updates and deletes them (never patches), lookups
	// and Secret checks get them, and two metadata caches watch them.
	releaseRecords = []string{"get", "list", "watch", "create", "update", "delete"}
	// The custom resources are read from the cache; the reconciler updates them (finalizer).
	customResource = []string{"list", "watch", "update"}
	statusVerbs    = []string{"patch", "update"}
	finalizerVerbs = []string{"update"}
	eventVerbs     = []string{"create", "patch"}
	metadataWatch  = []string{"list", "watch"}
	crdVerbs       = []string{"get", "patch"}
)

type rule struct {
	comment       string
	group         string
	resource      string
	resourceNames []string
	verbs         []string
}

// merge adds the verbs of o to rules[o.key()], in the order of manage, then any others.
func merge(rules map[string]rule, o rule) {
	r, ok := rules[o.key()]
	if !ok {
		rules[o.key()] = o
		return
	}
	var verbs []string
	for _, v := range manage {
		if slices.Contains(r.verbs, v) || slices.Contains(o.verbs, v) {
			verbs = append(verbs, v)
		}
	}
	for _, v := range append(slices.Clone(r.verbs), o.verbs...) { // verbs a chart's Role grants (use, deletecollection...)
		if !slices.Contains(verbs, v) {
			verbs = append(verbs, v)
		}
	}
	r.verbs = verbs
	rules[o.key()] = r
}

// Role is the manager's ClusterRole: the custom resources with their status and finalizers, every
// kind the charts render (to install, upgrade, correct drift and uninstall; only to read and
// follow for a kind whose releases run as a tenant's ServiceAccount) or look up (to read and
// follow), the Helm release records (Secrets, which also serve lookups and the Secret checks),
// the ServiceAccounts it acts as, Events, and the APIService metadata watch. Nothing else and
// no wildcards.
func Role(kinds []Kind) []byte {
	rules := []rule{}
	rendered := map[string]rule{}
	var accounts []string
	for _, k := range kinds {
		rules = append(rules,
			rule{comment: k.GVK.Kind + ": the reconciler reads them, adds its finalizer and writes status.",
				group: k.GVK.Group, resource: k.Plural, verbs: customResource},
			rule{group: k.GVK.Group, resource: k.Plural + "/status", verbs: statusVerbs},
			rule{group: k.GVK.Group, resource: k.Plural + "/finalizers", verbs: finalizerVerbs},
		)
		verbs := manage
		if k.ServiceAccount != "" {
			verbs = lookupVerbs
			if !slices.Contains(accounts, k.ServiceAccount) {
				accounts = append(accounts, k.ServiceAccount)
			}
		}
		for _, gvk := range k.Rendered {
			merge(rendered, resourceRule(gvk, verbs))
		}
		for _, gvk := range k.LookedUp {
			merge(rendered, resourceRule(gvk, lookupVerbs))
		}
		if k.ServiceAccount == "" { // the tenant's ServiceAccount creates them (DeployerRole)
			for _, g := range k.Grants {
				merge(rendered, g)
			}
		}
	}
	// Secrets: Helm's release storage, whatever the charts render (patched only when rendered).
	merge(rendered, rule{group: "", resource: "secrets", verbs: releaseRecords})
	for i, k := range slices.Sorted(maps.Keys(rendered)) {
		r := rendered[k]
		if i == 0 {
			r.comment = "What the charts render or look up, and the Helm release records (Secrets labelled owner=helm)."
		}
		rules = append(rules, r)
	}
	if len(accounts) > 0 {
		slices.Sort(accounts)
		rules = append(rules, rule{comment: "The ServiceAccounts, by name, whose identity the releases of some kinds take (watches.yaml " + tenancy.ServiceAccountKey + ").",
			group: "", resource: "serviceaccounts", resourceNames: accounts, verbs: tenancy.Verbs})
	}
	var converting []string
	for _, k := range kinds {
		if k.Converts {
			converting = append(converting, k.Plural+"."+k.GVK.Group)
		}
	}
	if len(converting) > 0 {
		rules = append(rules,
			rule{comment: "The CRDs of the kinds that declare versions: the conversion webhook reads their schemas and takes its CA into\n" +
				"# them; the storage migration trims their stored versions (package conversion).",
				group: "apiextensions.k8s.io", resource: "customresourcedefinitions", resourceNames: converting, verbs: crdVerbs},
			rule{group: "apiextensions.k8s.io", resource: "customresourcedefinitions/status", resourceNames: converting, verbs: finalizerVerbs})
	}
	rules = append(rules,
		rule{comment: "Events on the custom resources.", group: "", resource: "events", verbs: eventVerbs},
		rule{comment: "The cluster's API, by metadata only: a new CRD or aggregated API reaches the charts that test\n# for it in .Capabilities without a restart.",
			group: "apiregistration.k8s.io", resource: "apiservices", verbs: metadataWatch},
	)
	var b strings.Builder
	b.WriteString(`# Generated by ` + "`make manifests`" + ` from watches.yaml and the charts it names. Do not edit.
# The manager's rights: every watched kind, what every chart renders or looks up (with its default
# values, each ci/*-values.yaml and every boolean value true) and what its Roles grant, the Helm
# release Secrets, Events and APIService metadata. No wildcards.
`)
	b.WriteString(clusterRoleHeader("manager-role"))
	b.WriteString("rules:\n")
	for _, r := range rules {
		r.write(&b)
	}
	return []byte(b.String())
}

// resourceRule grants verbs on the resource of gvk.
func resourceRule(gvk schema.GroupVersionKind, verbs []string) rule {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return rule{group: plural.Group, resource: plural.Resource, verbs: verbs}
}

// key is the group and resource a rule grants on.
func (r rule) key() string { return r.group + "/" + r.resource }

// write writes r as a ClusterRole rule, after its comment.
func (r rule) write(b *strings.Builder) {
	if r.comment != "" {
		fmt.Fprintf(b, "# %s\n", r.comment)
	}
	group := r.group
	if group == "" {
		group = `""`
	}
	fmt.Fprintf(b, "- apiGroups: [%s]\n  resources: [%s]\n", group, r.resource)
	if len(r.resourceNames) > 0 {
		fmt.Fprintf(b, "  resourceNames: [%s]\n", strings.Join(r.resourceNames, ", "))
	}
	fmt.Fprintf(b, "  verbs: [%s]\n", strings.Join(r.verbs, ", "))
}

// clusterRoleHeader starts a ClusterRole named name with the project's labels and extra label
// lines (indented as labels), up to its rules.
func clusterRoleHeader(name string, extraLabels ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: %s
  labels:
    app.kubernetes.io/name: myproxy-operator
    app.kubernetes.io/managed-by: kustomize
`, name)
	for _, l := range extraLabels {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	return b.String()
}

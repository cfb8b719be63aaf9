// Package tenancy keeps each custom resource's release to what its tenant may touch.
//
// A Policy (reach.go) confines what a release may touch: every object Helm builds
// (to create, update, patch, delete or run as a hook) and every object a template looks up must
// be namespaced and in the custom resource's namespace, unless the kind's watches.yaml entry
// allows more by name (the reach key). A custom resource's spec is a tenant's input, and the
// operator's own rights span the cluster: without this, whoever may create a custom resource
// in one namespace could make the operator write, or read Secrets, in any other.
package tenancy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ReachKey is the watches.yaml key of a Policy.
const ReachKey = "reach"

// Policy is what one kind's releases may touch beyond their own namespace, as an administrator
// allowed it in watches.yaml. The zero Policy allows nothing beyond the release namespace.
type Policy struct {
	// ClusterScoped are the cluster-scoped kinds its charts may render, as Kind.group, the
	// String of their schema.GroupKind (ClusterRole.rbac.authorization.k8s.io; a core kind is
	// its bare Kind, Namespace).
	ClusterScoped []string `json:"clusterScoped,omitempty"`
	// Namespaces are the namespaces besides the custom resource's own that its charts may
	// render into and look up in.
	Namespaces []string `json:"namespaces,omitempty"`
}

// Check reports what is wrong with p itself: a kind or a namespace that cannot be one.
func (p Policy) Check() error {
	for _, k := range p.ClusterScoped {
		if k == "" || strings.ContainsAny(k, " /*") || strings.HasPrefix(k, ".") {
			return fmt.Errorf("%s.clusterScoped: %q is not a Kind.group (ClusterRole.rbac.authorization.k8s.io, or Namespace for a core kind); wildcards are not allowed", ReachKey, k)
		}
	}
	for _, ns := range p.Namespaces {
		if ns == "" || strings.ContainsAny(ns, " /*.") {
			return fmt.Errorf("%s.namespaces: %q is not a namespace name; wildcards are not allowed", ReachKey, ns)
		}
	}
	return nil
}

// allowsNamespace tells whether a release in releaseNS may touch namespaced objects in ns ("":
// across namespaces, never).
func (p Policy) allowsNamespace(releaseNS, ns string) bool {
	return ns != "" && (ns == releaseNS || slices.Contains(p.Namespaces, ns))
}

// Object is one object a release would touch or read.
type Object struct {
	GroupKind  schema.GroupKind
	Namespaced bool
	Namespace  string // "" for a cluster-scoped object, or for a list across namespaces
	Name       string // "" for a list
}

func (o Object) String() string {
	name := cmp.Or(o.Name, "(list)")
	switch {
	case !o.Namespaced:
		return fmt.Sprintf("%s %s (cluster-scoped)", o.GroupKind, name)
	case o.Namespace == "":
		return fmt.Sprintf("%s %s in every namespace", o.GroupKind, name)
	default:
		return fmt.Sprintf("%s %s/%s", o.GroupKind, o.Namespace, name)
	}
}

// ReachError is an object outside a release's reach. Its message names the object, the release
// namespace and the watches.yaml key that would allow it.
type ReachError struct {
	// Verb is what the release would do: "write" or "look up".
	Verb             string
	Object           Object
	ReleaseNamespace string
}

func (e *ReachError) Error() string {
	allow := fmt.Sprintf("watches.yaml %s.namespaces", ReachKey)
	if !e.Object.Namespaced {
		allow = fmt.Sprintf("watches.yaml %s.clusterScoped", ReachKey)
	}
	return fmt.Sprintf("refused to %s %s: outside namespace %s of the custom resource, and %s does not allow it",
		e.Verb, e.Object, e.ReleaseNamespace, allow)
}

// Write checks an object a release in releaseNS would create, update, patch, delete or run as
// a hook.
func (p Policy) Write(releaseNS string, o Object) error {
	if o.Namespaced && p.allowsNamespace(releaseNS, o.Namespace) ||
		!o.Namespaced && slices.Contains(p.ClusterScoped, o.GroupKind.String()) {
		return nil
	}
	return &ReachError{Verb: "write", Object: o, ReleaseNamespace: releaseNS}
}

// Read checks what a template of a release in releaseNS looks up. Cluster-scoped kinds may be
// read (they hold no tenant's data, and lookups of Nodes or Namespaces are common); namespaced
// objects only in the namespaces a Write may reach, and never as a list across namespaces.
func (p Policy) Read(releaseNS string, o Object) error {
	if !o.Namespaced || p.allowsNamespace(releaseNS, o.Namespace) {
		return nil
	}
	return &ReachError{Verb: "look up", Object: o, ReleaseNamespace: releaseNS}
}

// Package manifests checks what `make deploy` installs, rendered with the real kustomize, and
// the image recipe: least-privilege RBAC that matches the chart, and a Dockerfile that ships
// what the binary reads.
package manifests

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/example/myproxy-operator/test/harness"
)

// decodeAll splits a multi-document YAML stream into objects.
func decodeAll(t *testing.T, stream string) []unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(stream), 4096)
	var out []unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatal(err)
		}
		if obj != nil {
			out = append(out, unstructured.Unstructured{Object: obj})
		}
	}
}

func kustomizeBuild(t *testing.T, dir string) []unstructured.Unstructured {
	t.Helper()
	out := harness.Run(t, nil, harness.Tool(t, "KUSTOMIZE", "kustomize"), "build", filepath.Join(harness.RepoRoot(), dir))
	return decodeAll(t, out)
}

// rendered returns what the chart renders with every optional template switched on.
func rendered(t *testing.T) []unstructured.Unstructured {
	t.Helper()
	out := harness.Run(t, nil, harness.Tool(t, "HELM", "helm"), "template", "x",
		filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"),
		"--set", "tls.secretName=x", "--set", "routes[0].path=/", "--set", "routes[0].upstream=http://a")
	return decodeAll(t, out)
}

func rulesOf(t *testing.T, objs []unstructured.Unstructured, kind, name string) []rbacv1.PolicyRule {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			var role rbacv1.ClusterRole // Role and ClusterRole share the rules field
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
				t.Fatal(err)
			}
			return role.Rules
		}
	}
	t.Fatalf("no %s %s in config/default", kind, name)
	return nil
}

// allows reports whether the rules grant every verb on group/resource.
func allows(rules []rbacv1.PolicyRule, group, resource string, verbs ...string) []string {
	var missing []string
	for _, v := range verbs {
		granted := false
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, v) {
				granted = true
			}
		}
		if !granted {
			missing = append(missing, v)
		}
	}
	return missing
}

var manage = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

func TestNoWildcardsNoClusterAdmin(t *testing.T) {
	for _, o := range kustomizeBuild(t, "config/default") {
		switch o.GetKind() {
		case "Role", "ClusterRole":
			rules := rulesOf(t, []unstructured.Unstructured{o}, o.GetKind(), o.GetName())
			for i, r := range rules {
				for _, field := range [][]string{r.Verbs, r.APIGroups, r.Resources, r.ResourceNames} {
					if slices.Contains(field, "*") {
						t.Errorf("%s %s rule %d has a wildcard: %+v", o.GetKind(), o.GetName(), i, r)
					}
				}
			}
		case "RoleBinding", "ClusterRoleBinding":
			if name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); name == "cluster-admin" || name == "admin" || name == "edit" {
				t.Errorf("%s %s binds the built-in %s role", o.GetKind(), o.GetName(), name)
			}
		}
	}
}

// The manager's ClusterRole grants the chart's every kind, rendered with every optional
// template on (an independent derivation from `make manifests`'s), and the leader election Role
// its Lease. That nothing is granted beyond what the operator uses, and nothing used is missing,
// is checked from the apiserver's audit log (TestRBACIsWhatTheOperatorUses, test/e2e).
func TestManagerRoleCoversTheChart(t *testing.T) {
	objs := kustomizeBuild(t, "config/default")
	rules := rulesOf(t, objs, "ClusterRole", "myproxy-operator-manager-role")
	for _, o := range rendered(t) {
		plural, _ := meta.UnsafeGuessKindToResource(o.GroupVersionKind())
		if missing := allows(rules, plural.Group, plural.Resource, manage...); len(missing) > 0 {
			t.Errorf("config/rbac/role.yaml lacks %v on %s (group %q): run make manifests", missing, plural.Resource, plural.Group)
		}
	}
	leader := rulesOf(t, objs, "Role", "myproxy-operator-leader-election-role")
	if missing := allows(leader, "coordination.k8s.io", "leases", "get", "create", "update"); len(missing) > 0 {
		t.Errorf("leader election role lacks %v on leases", missing)
	}
}

func TestOperatorNamespaceEnforcesRestricted(t *testing.T) {
	for _, o := range kustomizeBuild(t, "config/default") {
		if o.GetKind() == "Namespace" {
			if got := o.GetLabels()["pod-security.kubernetes.io/enforce"]; got != "restricted" {
				t.Errorf("namespace %s enforces %q, want restricted", o.GetName(), got)
			}
			if o.GetName() != "myproxy-operator-system" {
				t.Errorf("namespace %s, want myproxy-operator-system", o.GetName())
			}
			return
		}
	}
	t.Error("config/default creates no namespace")
}

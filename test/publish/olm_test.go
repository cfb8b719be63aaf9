package publish

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/test/harness"
)

const (
	olmNamespace = "olm"
	catalogName  = "myproxy-operator-catalog"
	packageName  = "myproxy-operator"
	channel      = "alpha"
	// operatorManager begins the field manager of each of the operator's own writes (its
	// binary's name, or that name and the part of the operator that writes).
	operatorManager = "myproxy-operator"
)

// release is one published version: its operator image, and its bundle as pushed (the
// image, and its content exported from the registry).
type release struct {
	version, operator, bundle, bundleDir string
}

// publish does what a publisher does for a version of the project (a copy; "": the repository
// itself): make image-push, make render-bundle for that image, make bundle-push.
func publish(t *testing.T, project, version string) release {
	t.Helper()
	images := t.TempDir()
	in := []string{"-C", cmpOr(project, harness.RepoRoot())}
	operator := printed(makeIn(t, images, append(in, "image-push", "VERSION="+version, "IMG="+registry+"/myproxy-operator:v"+version)...))
	staged := t.TempDir()
	makeIn(t, images, append(in, "render-bundle", "BUNDLE_CONTEXT="+staged, "VERSION="+version, "IMG="+operator)...)
	bundle := printed(makeIn(t, images, append(in, "bundle-push", "BUNDLE_CONTEXT="+staged, "BUNDLE_IMG="+registry+"/myproxy-operator-bundle:v"+version)...))
	if !strings.Contains(bundle, "@sha256:") {
		t.Fatalf("make bundle-push printed %q", bundle)
	}
	return release{version: version, operator: operator, bundle: bundle, bundleDir: export(t, bundle)}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// pushCatalog renders a catalog of the releases (oldest first, each upgrading the one before)
// with make catalog, from the bundles' content as pushed, and pushes it with make catalog-push
// under one tag, as a publisher updates a catalog. The bundles' objects are carried inline: no
// Pod runs here to unpack a bundle image.
func pushCatalog(t *testing.T, releases ...release) string {
	t.Helper()
	var bundles []string
	for _, r := range releases {
		bundles = append(bundles, r.bundleDir+"=")
	}
	staged := t.TempDir()
	makeIn(t, t.TempDir(), "catalog", "CATALOG_CONTEXT="+staged, "CATALOG_BUNDLES="+strings.Join(bundles, " "))
	return printed(makeIn(t, t.TempDir(), "catalog-push", "CATALOG_CONTEXT="+staged, "CATALOG_IMG="+registry+"/"+catalogName+":latest"))
}

// serveCatalog runs the catalog's registry as its Pod would: opm serving the catalog image's
// /configs (exported from the registry) on addr.
func serveCatalog(t *testing.T, image, addr string) *harness.Operator {
	t.Helper()
	root := export(t, image)
	_, port, _ := strings.Cut(addr, ":")
	return harness.StartProcess(t, harness.Tool(t, "OPM", "opm"), []string{"serve", filepath.Join(root, "configs"), "-p", port})
}

// startOLM installs OLM as its chart does (make olm renders it): the CRDs, namespaces, RBAC,
// operator groups and configuration applied, and the olm and catalog operators run as the
// containers of their Deployments would, as OLM's ServiceAccount. Left out: the packageserver
// (an aggregated API that lists what catalogs hold, for consoles), the default catalog (an
// image of the public catalog), and network policies (nothing here enforces them).
func startOLM(t *testing.T, kube client.Client) {
	t.Helper()
	dir := os.Getenv("OLM_BIN")
	if dir == "" {
		dir = filepath.Join(harness.RepoRoot(), "bin", "olm")
	}
	kubectl(t, "apply", "--server-side", "-f", filepath.Join(dir, "crds.yaml"))
	for _, kind := range []string{"subscriptions", "clusterserviceversions", "operatorgroups", "catalogsources", "installplans"} {
		waitJSONPath(t, "", "crd/"+kind+".operators.coreos.com", `{.status.conditions[?(@.type=="Established")].status}`, "True")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "olm.yaml"))
	must(t, err)
	var apply []string
	var deployments []appsv1.Deployment
	for _, doc := range strings.Split(string(raw), "\n---") {
		var meta struct{ Kind string }
		must(t, yaml.Unmarshal([]byte(doc), &meta))
		switch meta.Kind {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "OperatorGroup", "OLMConfig":
			apply = append(apply, doc)
		case "Deployment":
			var d appsv1.Deployment
			must(t, yaml.Unmarshal([]byte(doc), &d))
			deployments = append(deployments, d)
		}
	}
	kubectl(t, "apply", "-f", harness.WriteTemp(t, "olm-*.yaml", []byte(strings.Join(apply, "\n---\n"))))
	for _, d := range deployments {
		spec := d.Spec.Template.Spec
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name}, Spec: spec}
		ctr := spec.Containers[0]
		container{pod: pod, spec: ctr, binary: filepath.Join(dir, filepath.Base(ctr.Command[0])), uid: 65532}.start(t, kube)
	}
}

// OLM installs the bundle from the catalog as a publisher's users get it (a Subscription to the
// package's channel); what it creates is what the bundle declares; the operator, run from the
// image OLM's Deployment names as the identity OLM gave it, serves a MyProxy with nothing
// refused; a second version published to the catalog's channel is upgraded to; and removing
// the Subscription and the CSV leaves what OLM promises to leave (the CRD, with the resources
// of its kind) and nothing else but what the operator itself wrote.
func TestOLMInstallsUpgradesAndRemovesTheBundle(t *testing.T) {
	kube := harness.NewClient(t, harness.ConfigFromKubeconfig(t, kubeconfig))
	ctx := context.Background()
	startOLM(t, kube)

	first := publish(t, "", "0.1.0")
	catalogAddr := harness.FreeAddr(t)
	catalog := serveCatalog(t, pushCatalog(t, first), catalogAddr)
	kubectl(t, "apply", "-f", harness.WriteTemp(t, "source-*.yaml", []byte(`apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata: {name: `+catalogName+`, namespace: `+olmNamespace+`}
spec: {sourceType: grpc, address: "`+catalogAddr+`", displayName: MyProxy Operator}
---
apiVersion: v1
kind: Namespace
metadata:
  name: `+systemNamespace+`
  labels: {pod-security.kubernetes.io/enforce: restricted}
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata: {name: myproxy-operator, namespace: `+systemNamespace+`}
`)))
	waitJSONPath(t, olmNamespace, "catalogsource/"+catalogName, "{.status.connectionState.lastObservedState}", "READY")
	before := snapshot(t)

	kubectl(t, "apply", "-f", harness.WriteTemp(t, "subscription-*.yaml", []byte(`apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata: {name: `+packageName+`, namespace: `+systemNamespace+`}
spec: {channel: `+channel+`, name: `+packageName+`, source: `+catalogName+`, sourceNamespace: `+olmNamespace+`, installPlanApproval: Automatic}
`)))
	waitJSONPath(t, systemNamespace, "csv/myproxy-operator.v"+first.version, "{.status.phase}", "Succeeded")
	installedIsTheBundle(t, kube, first)

	from := time.Now()
	op := runManager(t, kube, first)
	ns := harness.Namespace(t, kube, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	name := applySample(t, ns)

	// The second version reaches the catalog's channel as a publisher ships it: a new catalog
	// image under the same tag, which the catalog's registry Pod is rolled to. Its chart renamed
	// a value, declared as a new version of MyProxy: OLM's checks of the CRD upgrade pass, and OLM
	// provides the conversion webhook's certificate and points the CRD at it.
	second := publish(t, versionedProject(t), "0.2.0")
	next := pushCatalog(t, first, second)
	catalog.Stop(t)
	serveCatalog(t, next, catalogAddr)
	waitJSONPath(t, systemNamespace, "subscription/"+packageName, "{.status.installedCSV}", "myproxy-operator.v"+second.version)
	waitJSONPath(t, systemNamespace, "csv/myproxy-operator.v"+second.version, "{.status.phase}", "Succeeded")
	harness.Eventually(t, 120*time.Second, "the CSV of "+first.version+" replaced", func(context.Context) (bool, string) {
		out, _ := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "get", "csv", "-n", systemNamespace, "-o", "name")
		return !strings.Contains(out, "v"+first.version), out
	})
	installedIsTheBundle(t, kube, second)
	op.Stop(t)
	op = runManager(t, kube, second)
	keptAtBothVersions(t, ns, name)
	// A write at v1alpha1, converted through OLM's Service: an InstallPlan that applies the bundle's
	// CRD again takes OLM's certificate from it, until OLM gives it back.
	harness.Eventually(t, 120*time.Second, "a write at v1alpha1", func(context.Context) (bool, string) {
		out, err := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "patch", "-n", ns, "myproxy.v1alpha1.gateway.example.com/"+name,
			"--type=merge", "-p", `{"spec":{"replicas":1}}`)
		return err == nil, out
	})
	waitJSONPath(t, ns, "deployment/"+name, "{.spec.replicas}", "1")
	kubectl(t, "wait", "-n", ns, "--for=condition=Available", "myproxy/"+name, "--timeout=120s")

	// Removal, as OLM documents it: the resources first (while their operator runs to uninstall
	// their releases), then the Subscription and the CSV.
	kubectl(t, "delete", "-n", ns, "myproxy/"+name, "--timeout=120s")
	op.Stop(t)
	refusedNothing(t, "system:serviceaccount:"+systemNamespace+":"+managerSA, from)
	kubectl(t, "delete", "namespace", ns, "--timeout=120s")
	kubectl(t, "delete", "-n", systemNamespace, "subscription/"+packageName, "csv/myproxy-operator.v"+second.version, "--timeout=120s")
	bundled := map[string]bool{}
	for _, o := range bundleObjects(t, second) {
		if o.GetKind() == "ClusterRole" {
			bundled["clusterroles.rbac.authorization.k8s.io//"+o.GetName()] = true
		}
	}
	var left []string
	harness.Eventually(t, 180*time.Second, "only what OLM leaves", func(context.Context) (bool, string) {
		left = nil
		for obj, managers := range snapshot(t) {
			if _, ok := before[obj]; !ok && !leftByPromise(obj, managers, bundled) {
				left = append(left, obj+" (written by "+strings.Join(managers, ", ")+")")
			}
		}
		sort.Strings(left)
		return len(left) == 0, strings.Join(left, "\n")
	})
	if got := kubectl(t, "get", "crd", "myproxies.gateway.example.com", "-o", "name"); got == "" {
		t.Error("the CRD is gone: OLM leaves CRDs (and the resources of their kinds) when an operator is removed")
	}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: managerSA}, &corev1.ServiceAccount{}); err == nil {
		t.Error("the operator's ServiceAccount is left")
	}
}

// leftByPromise tells whether an object new since the install may stay after the removal of
// release r, by what OLM v0 does: it leaves the CRD (and the resources of its kind), with what
// comes of it (the aggregator's APIService for each version, the admin, edit, view and crdview
// ClusterRoles OLM made for it), the RoleBinding in kube-system it made for the conversion
// webhook, and the cluster-scoped objects the bundle holds beside its CSV (no owner reference
// can tie them to the CSV, and OLM removes only the RBAC it derived from it); and whatever the
// operator wrote itself in its namespace (its leader Lease, its rollout state).
func leftByPromise(obj string, managers []string, bundled map[string]bool) bool {
	const crd = "myproxies.gateway.example.com"
	switch {
	case obj == "customresourcedefinitions.apiextensions.k8s.io//"+crd,
		obj == "apiservices.apiregistration.k8s.io//v1alpha1.gateway.example.com",
		obj == "apiservices.apiregistration.k8s.io//v1beta1.gateway.example.com",
		// What OLM made in kube-system for the conversion webhook's Service (the
		// extension-apiserver-authentication reader): no owner reference reaches it there.
		obj == "rolebindings.rbac.authorization.k8s.io/kube-system/myproxy-operator-controller-manager-service-auth-reader",
		strings.HasPrefix(obj, "clusterroles.rbac.authorization.k8s.io//"+crd+"-"),
		obj == "operators.operators.coreos.com//"+packageName+"."+systemNamespace:
		return true
	case strings.Contains(obj, "/"+systemNamespace+"/"):
		for _, m := range managers {
			if m != operatorManager && !strings.HasPrefix(m, operatorManager+"-") {
				return false
			}
		}
		return len(managers) > 0
	}
	return bundled[obj]
}

// snapshot lists every object of the cluster (resource/namespace/name) with the field managers
// that wrote it, but Events and the control plane's own Leases, which come and go by themselves.
func snapshot(t *testing.T) map[string][]string {
	t.Helper()
	resources := strings.Fields(kubectl(t, "api-resources", "--verbs=list", "-o", "name"))
	var wanted []string
	for _, r := range resources {
		if r != "events" && r != "events.events.k8s.io" && r != "componentstatuses" {
			wanted = append(wanted, r)
		}
	}
	// Standard output alone: kubectl warns on standard error of deprecated kinds it lists.
	cmd := exec.Command("kubectl", "--kubeconfig", kubeconfig, "get", strings.Join(wanted, ","), "-A", "-o", "json", "--show-managed-fields")
	cmd.Stderr = io.Discard
	raw, err := cmd.Output()
	must(t, err)
	var list struct {
		Items []unstructured.Unstructured
	}
	must(t, json.Unmarshal(raw, &list))
	out := map[string][]string{}
	for _, o := range list.Items {
		gvk := o.GroupVersionKind()
		if gvk.Kind == "Lease" && (o.GetNamespace() == "kube-system" || o.GetNamespace() == "kube-node-lease") {
			continue
		}
		key := strings.ToLower(gvk.Kind) + "s." + gvk.Group + "/" + o.GetNamespace() + "/" + o.GetName()
		key = strings.Replace(key, "s./", "s/", 1)
		var managers []string
		for _, f := range o.GetManagedFields() {
			managers = append(managers, f.Manager)
		}
		out[key] = managers
	}
	return out
}

// bundleObjects reads the manifests of r's bundle as pushed.
func bundleObjects(t *testing.T, r release) []unstructured.Unstructured {
	t.Helper()
	manifests := filepath.Join(r.bundleDir, "manifests")
	entries, err := os.ReadDir(manifests)
	must(t, err)
	var out []unstructured.Unstructured
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(manifests, e.Name()))
		must(t, err)
		var obj unstructured.Unstructured
		must(t, yaml.Unmarshal(raw, &obj.Object))
		out = append(out, obj)
	}
	return out
}

// installedIsTheBundle checks what OLM created against the bundle as pushed: the CRD's schema,
// the Deployment's image and arguments, the rules bound to the operator's ServiceAccount in the
// cluster and in its namespace, and the bundle's other objects.
func installedIsTheBundle(t *testing.T, kube client.Client, r release) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range bundleObjects(t, r) {
		switch obj.GetKind() {
		case "ClusterServiceVersion":
			csvMatches(t, kube, r, obj)
		case "CustomResourceDefinition":
			var got unstructured.Unstructured
			got.SetGroupVersionKind(obj.GroupVersionKind())
			must(t, kube.Get(ctx, client.ObjectKey{Name: obj.GetName()}, &got))
			want, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
			have, _, _ := unstructured.NestedSlice(got.Object, "spec", "versions")
			if mustJSON(t, schemas(want)) != mustJSON(t, schemas(have)) {
				t.Errorf("CRD %s: the cluster's schema is not the bundle's", obj.GetName())
			}
		default:
			var got unstructured.Unstructured
			got.SetGroupVersionKind(obj.GroupVersionKind())
			key := client.ObjectKey{Name: obj.GetName()}
			if obj.GetKind() == "Service" {
				key.Namespace = systemNamespace
			}
			if err := kube.Get(ctx, key, &got); err != nil {
				t.Errorf("%s %s of the bundle: %v", obj.GetKind(), obj.GetName(), err)
			} else if obj.GetKind() == "ClusterRole" && mustJSON(t, obj.Object["rules"]) != mustJSON(t, got.Object["rules"]) {
				t.Errorf("ClusterRole %s: rules %v, the bundle's %v", obj.GetName(), got.Object["rules"], obj.Object["rules"])
			}
		}
	}
}

func schemas(versions []any) map[string]any {
	out := map[string]any{}
	for _, v := range versions {
		m := v.(map[string]any)
		out[m["name"].(string)] = m["schema"]
	}
	return out
}

// csvMatches compares the cluster with the CSV's install strategy.
func csvMatches(t *testing.T, kube client.Client, r release, csv unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	var strategy struct {
		ClusterPermissions []struct {
			ServiceAccountName string
			Rules              []rbacv1.PolicyRule
		}
		Permissions []struct {
			ServiceAccountName string
			Rules              []rbacv1.PolicyRule
		}
		Deployments []struct {
			Name string
			Spec appsv1.DeploymentSpec
		}
	}
	spec, _, _ := unstructured.NestedMap(csv.Object, "spec", "install", "spec")
	raw, err := json.Marshal(spec)
	must(t, err)
	must(t, json.Unmarshal(raw, &strategy))

	for _, d := range strategy.Deployments {
		var got appsv1.Deployment
		must(t, kube.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: d.Name}, &got))
		want, have := d.Spec.Template.Spec.Containers[0], got.Spec.Template.Spec.Containers[0]
		if have.Image != r.operator || want.Image != r.operator {
			t.Errorf("Deployment %s runs %s; the bundle names %s, the pushed image is %s", d.Name, have.Image, want.Image, r.operator)
		}
		if !reflect.DeepEqual(have.Args, want.Args) || !reflect.DeepEqual(have.SecurityContext, want.SecurityContext) ||
			got.Spec.Template.Spec.ServiceAccountName != d.Spec.Template.Spec.ServiceAccountName {
			t.Errorf("Deployment %s: args %v, security %v, ServiceAccount %s; the bundle's %v, %v, %s", d.Name, have.Args, have.SecurityContext,
				got.Spec.Template.Spec.ServiceAccountName, want.Args, want.SecurityContext, d.Spec.Template.Spec.ServiceAccountName)
		}
	}
	for _, p := range strategy.ClusterPermissions {
		want := expand(p.Rules, map[harness.Permission]bool{})
		// The OperatorGroup targets all namespaces: OLM grants the CSV's namespaced permissions
		// in every namespace too, with the reading of namespaces.
		for _, np := range strategy.Permissions {
			if np.ServiceAccountName == p.ServiceAccountName {
				expand(np.Rules, want)
			}
		}
		expand([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}}}, want)
		samePermissions(t, kube, "", p.ServiceAccountName, want)
	}
	webhooks, _, _ := unstructured.NestedSlice(csv.Object, "spec", "webhookdefinitions")
	for _, p := range strategy.Permissions {
		want := expand(p.Rules, map[harness.Permission]bool{})
		if len(webhooks) > 0 {
			// OLM lets the webhook's Pods read the Secret of the certificate it made for them.
			want[harness.Permission{Group: "", Resource: "secrets", Verb: "get"}] = true
		}
		samePermissions(t, kube, systemNamespace, p.ServiceAccountName, want)
	}
}

// samePermissions waits until the rules bound to the ServiceAccount sa, cluster-wide (ns "") or
// in ns, are want: OLM writes the roles of a CSV as it installs it, some after the CSV succeeds.
func samePermissions(t *testing.T, kube client.Client, ns, sa string, want map[harness.Permission]bool) {
	t.Helper()
	where := "cluster-wide"
	if ns != "" {
		where = "in " + ns
	}
	harness.Eventually(t, 120*time.Second, "the permissions of "+sa+" "+where, func(ctx context.Context) (bool, string) {
		got := map[harness.Permission]bool{}
		if ns == "" {
			var bindings rbacv1.ClusterRoleBindingList
			if err := kube.List(ctx, &bindings); err != nil {
				return false, err.Error()
			}
			for _, b := range bindings.Items {
				var role rbacv1.ClusterRole
				if boundTo(b.Subjects, sa) && kube.Get(ctx, client.ObjectKey{Name: b.RoleRef.Name}, &role) == nil {
					expand(role.Rules, got)
				}
			}
		} else {
			var bindings rbacv1.RoleBindingList
			if err := kube.List(ctx, &bindings, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			for _, b := range bindings.Items {
				var role rbacv1.Role
				if boundTo(b.Subjects, sa) && b.RoleRef.Kind == "Role" && kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: b.RoleRef.Name}, &role) == nil {
					expand(role.Rules, got)
				}
			}
		}
		var diff []string
		for _, p := range harness.SortedPermissions(want) {
			if !got[p] {
				diff = append(diff, "the bundle grants "+p.String()+", OLM did not")
			}
		}
		for _, p := range harness.SortedPermissions(got) {
			if !want[p] {
				diff = append(diff, "OLM granted "+p.String()+", which the bundle does not")
			}
		}
		return len(diff) == 0, strings.Join(diff, "; ")
	})
}

func boundTo(subjects []rbacv1.Subject, sa string) bool {
	for _, s := range subjects {
		if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && s.Namespace == systemNamespace {
			return true
		}
	}
	return false
}

func expand(rules []rbacv1.PolicyRule, into map[harness.Permission]bool) map[harness.Permission]bool {
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					into[harness.Permission{Group: g, Resource: res, Verb: v}] = true
				}
			}
		}
	}
	return into
}

// runManager runs the operator of release r as the container of the Pod OLM's Deployment made.
func runManager(t *testing.T, kube client.Client, r release) running {
	t.Helper()
	var d appsv1.Deployment
	must(t, kube.Get(context.Background(), client.ObjectKey{Namespace: systemNamespace, Name: "myproxy-operator-controller-manager"}, &d))
	kubectl(t, "rollout", "status", "-n", systemNamespace, "deployment/"+d.Name, "--timeout=120s")
	pod := podOf(t, kube, systemNamespace, d.Spec.Selector.MatchLabels, r.operator)
	spec := d.Spec.Template.Spec.Containers[0]
	op := container{pod: pod, spec: spec, image: r.operator}.start(t, kube)
	op.waitReady(t, spec)
	return op
}

func waitJSONPath(t *testing.T, ns, obj, path, want string) {
	t.Helper()
	harness.Eventually(t, 180*time.Second, obj+" "+path+"="+want, func(context.Context) (bool, string) {
		out, _ := harness.RunErr(nil, "kubectl", "--kubeconfig", kubeconfig, "get", "-n", ns, obj, "-o", "jsonpath="+path)
		return strings.TrimSpace(out) == want, out
	})
}

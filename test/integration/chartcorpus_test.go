package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/hack/manifests/manifestgen"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/options"
	"github.com/example/myproxy-operator/test/harness"
)

// The chart corpus (testdata/corpus) side by side: each chart, one construct that real charts
// use, is served as a kind through files alone (its watches.yaml entry and the CRD make
// manifests generates from it) by this operator, running with the manager role make manifests
// generates, and by the stock operator-sdk helm-operator, each in a namespace of its own, and
// taken through install, upgrade, hand edits of its objects and deletion. After each step the
// two namespaces must hold the same objects, field for field, but for what
// deliberateDifferences names. The custom resources carry the values a user of such a chart sets
// first, which its values.yaml need not set (the CRD accepts what the chart reads); what another
// controller writes into an object after install (a webhook's caBundle) must outlive drift
// correction and the upgrade under both.

const corpusGroup = "corpus.example.com"

// sharedNamespace is where the clusterscoped chart puts a ConfigMap, outside the watched
// namespace of either operator (testdata/corpus/watches.yaml allows it).
const sharedNamespace = "corpus-shared"

// construct is one chart of the corpus: the custom resource's spec at install and the merge
// patch of its upgrade, and a hand edit of one of its objects that both operators set back.
type construct struct {
	kind    string
	spec    map[string]any
	upgrade string
	// edited is the object a hand edits (GVK, and its name after the release name), and how.
	edited schema.GroupVersionKind
	suffix string
	edit   string
	// lookedUp, when set, is a ConfigMap of the namespace the chart reads with lookup: made
	// before the install, changed before the upgrade (whose patch only wakes the reconciler).
	lookedUp string
	// injected, when set, is a JSON patch another controller makes to the edited object once it
	// is installed (a CA bundle, an annotation): fields the chart does not set, which drift
	// correction and the upgrade must leave as they are.
	injected string
	// refused are specs with a bad value, each refused and named: at kubectl apply (by the CRD)
	// or in a condition (by Helm's check of the values at install).
	refused []refusal
}

// refusal is a spec with a bad value, and where and how it is refused.
type refusal struct {
	spec    map[string]any
	atApply bool
	// names is what the refusal must say of the value.
	names string
}

// clusterScopedKinds are the cluster-scoped kinds the corpus renders, named
// corpus-<namespace>-<release> so that both operators' objects coexist.
var clusterScopedKinds = []schema.GroupVersionKind{
	gvk("rbac.authorization.k8s.io", "v1", "ClusterRole"), gvk("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"),
}

// caBundle is what the webhook construct's injection writes; essence shows it base64-encoded.
var caBundle = []byte("-----BEGIN CERTIFICATE-----\nMIIBcorpus\n-----END CERTIFICATE-----\n")

// lookups is the construct served in the differential of the fast paths only
// (testdata/corpus/watches.yaml says why).
var lookups = construct{kind: "Lookups", spec: map[string]any{}, lookedUp: "corpus-source",
	upgrade: `{"metadata":{"annotations":{"corpus.example.com/wake":"1"}}}`,
	edited:  gvk("", "v1", "ConfigMap"), suffix: "-lookups", edit: `{"data":{"colour":"tampered"}}`}

var corpus = []construct{
	{kind: "Inferred", spec: map[string]any{"message": "hi", "extra": map[string]any{"colour": "blue"}},
		upgrade: `{"spec":{"count":3}}`,
		edited:  gvk("", "v1", "ConfigMap"), suffix: "-inferred", edit: `{"data":{"message":"tampered"}}`},
	{kind: "Schema", spec: map[string]any{"image": map[string]any{"repository": "registry.example.com/web", "tag": nil},
		"storage": map[string]any{"type": "pvc", "size": "10Gi"}, "annotations": map[string]any{"team": "a", "cost-centre": "b"}},
		upgrade: `{"spec":{"mode":"strict","storage":{"type":"emptyDir","size":null},"image":{"tag":"v2"}}}`,
		edited:  gvk("", "v1", "Secret"), suffix: "-schema-credentials", edit: `{"stringData":{"mode":"tampered"}}`},
	{kind: "Hooks", spec: map[string]any{}, upgrade: `{"spec":{"minAvailable":2}}`,
		edited: gvk("", "v1", "ConfigMap"), suffix: "-hooks", edit: `{"data":{"minAvailable":"9"}}`},
	{kind: "Umbrella", spec: map[string]any{"backend": map[string]any{"port": 8081}},
		upgrade: `{"spec":{"extra":{"enabled":true},"message":"bye"}}`,
		edited:  gvk("", "v1", "Service"), suffix: "-backend", edit: `{"spec":{"selector":{"app.kubernetes.io/instance":"other"}}}`},
	{kind: "Crds", spec: map[string]any{"size": 2}, upgrade: `{"spec":{"size":3}}`,
		edited: gvk("parts.example.com", "v1", "Widget"), suffix: "-widget", edit: `{"spec":{"size":9}}`},
	{kind: "ClusterScoped", spec: map[string]any{}, upgrade: `{"spec":{"verbs":["get","list"]}}`,
		edited: gvk("rbac.authorization.k8s.io", "v1", "ClusterRole"), suffix: "", edit: `{"rules":[{"apiGroups":[""],"resources":["secrets"],"verbs":["get"]}]}`},
	{kind: "Created", spec: map[string]any{"replicaCount": 2}, upgrade: `{"spec":{"service":{"port":8080}}}`,
		edited: gvk("apps", "v1", "Deployment"), suffix: "", edit: `{"spec":{"replicas":5}}`},
	// The values a user of such a chart sets first, none of which its values.yaml sets.
	{kind: "Undeclared", spec: map[string]any{
		"nameOverride": "web", "podAnnotations": map[string]any{"prometheus.io/scrape": "true"}, "podLabels": map[string]any{"team": "a"},
		"controller":    map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "500m", "memory": "128Mi"}}},
		"app.ini":       map[string]any{"analytics": map[string]any{"reporting_enabled": false}, "security": map[string]any{"admin_user": "root"}},
		"adminPassword": "s3cret", "priorityClassName": "high", "port": 8080,
		"sidecars": []any{map[string]any{"name": "log", "image": "registry.example.com/log:1.0", "args": []any{"-v"}}}},
		upgrade: `{"spec":{"fullnameOverride":"sample-undeclared-app","updateStrategy":{"type":"Recreate"},"image":{"tag":"1.1"}}}`,
		edited:  gvk("", "v1", "ConfigMap"), suffix: "-app", edit: `{"data":{"app.ini":"tampered"}}`},
	{kind: "OpenSchema", spec: map[string]any{"reloader": map[string]any{"watchMode": "all",
		"deployment": map[string]any{"annotations": map[string]any{"team": "a"}, "replicas": 2}}, "extraLabel": "blue"},
		upgrade: `{"spec":{"reloader":{"enabled":false},"strict":{"level":2}}}`,
		edited:  gvk("", "v1", "ConfigMap"), suffix: "-openschema", edit: `{"data":{"level":"9"}}`},
	{kind: "Required", spec: map[string]any{}, upgrade: `{"spec":{"replicaCount":3}}`,
		edited: gvk("", "v1", "ConfigMap"), suffix: "-required", edit: `{"data":{"replicaCount":"9"}}`},
	{kind: "RequiredPolicy", spec: map[string]any{"policy": "enforce"}, upgrade: `{"spec":{"timeoutSeconds":30}}`,
		edited: gvk("", "v1", "ConfigMap"), suffix: "-requiredpolicy", edit: `{"data":{"policy":"audit"}}`},
	// The CRD checks the first enum (an OpenAPI enum, where the rule that lets null pass is over
	// the apiserver's cost budget) and the chart's own rule; Helm checks the second, whose null
	// deletes a default.
	{kind: "EntryPoints", spec: map[string]any{"entryPoints": map[string]any{"web": map[string]any{"underscoreHeaders": "reject"},
		"admin": map[string]any{"port": 9000, "underscoreHeaders": nil}}},
		upgrade: `{"spec":{"entryPoints":{"web":{"parsing":"lenient","underscoreHeaders":null}},"allowedHosts":["example.com","example.org"]}}`,
		edited:  gvk("", "v1", "ConfigMap"), suffix: "-entrypoints", edit: `{"data":{"web":"tampered"}}`,
		refused: []refusal{
			{spec: map[string]any{"entryPoints": map[string]any{"web": map[string]any{"underscoreHeaders": "ignore"}}}, atApply: true,
				names: `spec.entryPoints.web.underscoreHeaders: Unsupported value: "ignore"`},
			{spec: map[string]any{"allowedHosts": []any{"Example.COM"}}, atApply: true, names: "allowedHosts: every host must be a DNS name"},
			{spec: map[string]any{"entryPoints": map[string]any{"web": map[string]any{"parsing": "loose"}}}, names: "/entryPoints/web/parsing"},
		}},
	{kind: "Webhook", spec: map[string]any{}, upgrade: `{"spec":{"timeoutSeconds":7}}`,
		edited: gvk("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"),
		edit:   `[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Fail"}]`,
		injected: `[{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"` + base64.StdEncoding.EncodeToString(caBundle) + `"},` +
			`{"op":"add","path":"/metadata/annotations/controller.example.com~1observed","value":"true"}]`},
}

// The kinds whose objects a snapshot reads: everything the corpus renders, or must not render
// (the test hooks of templates/tests, the helmignored draft).
var corpusObjectKinds = []schema.GroupVersionKind{
	gvk("", "v1", "ConfigMap"), gvk("", "v1", "Secret"), gvk("", "v1", "Service"), gvk("", "v1", "ServiceAccount"), gvk("", "v1", "Pod"),
	gvk("apps", "v1", "Deployment"), gvk("policy", "v1", "PodDisruptionBudget"), gvk("parts.example.com", "v1", "Widget"),
	gvk("networking.k8s.io", "v1", "Ingress"), gvk("networking.k8s.io", "v1", "NetworkPolicy"), gvk("autoscaling", "v2", "HorizontalPodAutoscaler"),
}

// deliberateDifferences are the metadata keys in which this operator's objects differ from the
// stock operator's, and why (docs/migration.md).
var deliberateDifferences = map[string]string{
	names.ManagedLabel:                    "the label this operator's caches select release objects on",
	"helm.sdk.operatorframework.io/chart": "the label the stock operator's caches select release objects on",
}

// hookAnnotation marks a Helm hook object. The stock operator gives hook objects an owner
// reference to their custom resource, for the garbage collector to delete them after it;
// this operator deletes them itself (the action client, after each uninstall) and gives them none.
const hookAnnotation = "helm.sh/hook"

// operatorAccount is the ServiceAccount this operator runs as in its namespace: the test's, not
// a release's.
const operatorAccount = "corpus-operator"

func gvk(group, version, kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}
}

func corpusCR(kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk(corpusGroup, "v1", kind))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// corpusProject writes the corpus as a project: its charts, `helm create`'s chart as it comes,
// and the watches file naming them; then generates what make manifests would and installs its
// CRDs, as make install would. It returns the watches file and the manager role generated.
func corpusProject(t *testing.T, c client.Client) (watches string, managerRole []byte) {
	t.Helper()
	dir := t.TempDir()
	harness.CopyDir(t, filepath.Join(harness.RepoRoot(), "test", "integration", "testdata", "corpus"), dir)
	harness.Run(t, nil, harness.Tool(t, "HELM", "helm"), "create", filepath.Join(dir, "created"))
	shared := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sharedNamespace}}
	if err := c.Create(context.Background(), shared); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	watches = filepath.Join(dir, "watches.yaml")
	if err := os.WriteFile(watches, []byte(strings.ReplaceAll(string(raw), "CHARTS", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	files, notes, err := manifestgen.Generate(watches, manifestgen.Options{})
	if err != nil {
		t.Fatalf("make manifests refuses the corpus: %v", err)
	}
	for kind, source := range map[string]string{"Inferred": "inferred", "Created": "inferred", "Schema": "values.schema.json",
		"Undeclared": "inferred", "OpenSchema": "values.schema.json", "Quantities": "inferred", "Receivers": "values.schema.json"} {
		prefix := kind + "." + corpusGroup + ": spec schema "
		if !slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, prefix) && strings.Contains(n, source) }) {
			t.Errorf("make manifests does not say %s's spec schema is %s:\n%s", kind, source, strings.Join(notes, "\n"))
		}
	}
	// Per kind, what the CRD types, what it leaves open and why, and what the warnings check.
	for kind, says := range map[string][]string{
		"Undeclared": {"spec typed, each as the type of its value in values.yaml", "image.{repository,tag}",
			"spec open (unknown keys kept beside the typed ones), inferred", "adminPassword", "typo warnings: ValidatingAdmissionPolicy unread-keys.undeclareds.corpus.example.com",
			"nothing is warned of below what templates read whole: ", "controller.resources (templates/deployment.yaml:"},
		"OpenSchema": {"spec open (unknown keys kept beside the typed ones), the schema leaves them open", "spec.reloader",
			"spec closed (keys not named refused at kubectl apply), by additionalProperties: false: spec.strict"},
		"RequiredPolicy": {"spec requires, as the schema does and values.yaml gives no default: spec.policy"},
		"Schema":         {"typo warnings: ValidatingAdmissionPolicy unread-keys.schemas.corpus.example.com", "in spec, spec.storage;"},
		"ClusterScoped":  {"typo warnings:", "template names, in spec"},
		"Quantities": {"spec typed, each as the type of its value in values.yaml (a number also as a string, or null)",
			"resources.{metricServer.{limits.{cpu,memory},requests.{cpu,memory}},operator.{limits.{cpu,memory},requests.{cpu,memory}}}, service.port"},
		"EntryPoints": {"spec.entryPoints[].underscoreHeaders: its enum, the rule \"self in ['keep', 'drop', 'reject']\", is over the apiserver's cost budget",
			"written as an OpenAPI enum instead", "spec.entryPoints[].parsing: its enum", "not checked at kubectl apply; Helm checks it"},
		"FixedNames": {"one custom resource per namespace: the chart names objects without the release's name, so a second FixedNames in a " +
			"namespace renders the same ones: ConfigMap cd-cm, Deployment cd-server, NetworkPolicy cd-server, Secret cd-secret, Service cd-server, ServiceAccount cd-server"},
	} {
		said := strings.Join(slices.DeleteFunc(slices.Clone(notes), func(n string) bool { return !strings.HasPrefix(n, kind+"."+corpusGroup+": ") }), "\n")
		for _, want := range says {
			if !strings.Contains(said, want) {
				t.Errorf("make manifests does not say %q of %s:\n%s", want, kind, said)
			}
		}
	}
	// The policies that warn of unread keys, as make deploy installs them (through config/default,
	// its name prefix and namespace).
	harness.CopyDir(t, filepath.Join(harness.RepoRoot(), "config"), filepath.Join(dir, "config"))
	if err := manifestgen.Write(filepath.Join(dir, "config"), files); err != nil {
		t.Fatal(err)
	}
	deployed := harness.Run(t, nil, harness.Tool(t, "KUSTOMIZE", "kustomize"), "build", filepath.Join(dir, "config", "default"))
	policies := 0
	for _, doc := range strings.Split(deployed, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if u.GetAPIVersion() != "admissionregistration.k8s.io/v1" {
			continue
		}
		policies++
		if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("make-deploy"), client.ForceOwnership); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	if policies == 0 {
		t.Error("make deploy would install no policy that warns of unread keys")
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for path, raw := range files {
		if filepath.Dir(path) != manifestgen.CRDDir {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := c.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: %v", path, err)
		}
		crds = append(crds, crd)
	}
	if len(crds) != len(corpus)+len(servedForTheirCRDs())+2 {
		t.Errorf("make manifests wrote %d CRDs, want one per kind and the crds/ folder's Widget", len(crds))
	}
	harness.Eventually(t, timeout, "the corpus CRDs served", func(ctx context.Context) (bool, string) {
		kinds := append(slices.Clone(corpus), lookups, construct{kind: "Widget"})
		for _, kind := range servedForTheirCRDs() {
			kinds = append(kinds, construct{kind: kind})
		}
		for _, k := range kinds {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(gvk(corpusGroup, "v1", k.kind+"List"))
			if k.kind == "Widget" {
				l.SetGroupVersionKind(gvk("parts.example.com", "v1", "WidgetList"))
			}
			if err := c.List(ctx, l); err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	})
	return watches, files[manifestgen.ManagerRole]
}

// corpusSubject is one operator serving the corpus in a namespace of its own.
type corpusSubject struct {
	name  string
	stock bool
	ns    string
	c     client.Client
	// constructs are the charts it takes through the phases.
	constructs []construct
	// restarted, when set, takes the subject through extendedPhases too: it kills the operator
	// with SIGKILL, runs whileDown and starts it again; charts is the folder of the corpus's charts.
	restarted func(t *testing.T, whileDown func())
	charts    string
}

// sample is the custom resource's (and its release's) name in every namespace.
const sample = "sample"

func (s corpusSubject) history(t *testing.T, kind string) []revision {
	return subject{name: s.name, ns: s.ns, c: s.c, t: t}.history(sample + "-" + strings.ToLower(kind))
}

// snapshot reads the objects the corpus's releases put in s.ns and the cluster-scoped ones they own,
// each reduced to what a chart decides (server-set fields left out, s.ns written as NS), by
// kind and name.
func (s corpusSubject) snapshot(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	add := func(u *unstructured.Unstructured) {
		if u.GetName() == "kube-root-ca.crt" || u.GetName() == operatorAccount || u.GetDeletionTimestamp() != nil ||
			u.GetLabels()[names.RecordOwnerLabel] == names.RecordOwnerHelm { // release records: compared as histories

			return
		}
		key := strings.ReplaceAll(u.GetKind()+" "+u.GetName(), s.ns, "NS")
		out[key] = strings.ReplaceAll(essence(u), s.ns, "NS")
	}
	for _, k := range corpusObjectKinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(k.GroupVersion().WithKind(k.Kind + "List"))
		if err := s.c.List(ctx, l, client.InNamespace(s.ns)); err != nil {
			return nil, err
		}
		for i := range l.Items {
			l.Items[i].SetKind(k.Kind)
			add(&l.Items[i])
		}
	}
	for _, k := range clusterScopedKinds {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(k.GroupVersion().WithKind(k.Kind + "List"))
		if err := s.c.List(ctx, l); err != nil {
			return nil, err
		}
		for i := range l.Items {
			if strings.HasPrefix(l.Items[i].GetName(), "corpus-"+s.ns+"-") {
				l.Items[i].SetKind(k.Kind)
				add(&l.Items[i])
			}
		}
	}
	shared := &unstructured.UnstructuredList{}
	shared.SetGroupVersionKind(gvk("", "v1", "ConfigMapList"))
	if err := s.c.List(ctx, shared, client.InNamespace(sharedNamespace)); err != nil {
		return nil, err
	}
	for i := range shared.Items {
		if strings.HasPrefix(shared.Items[i].GetName(), s.ns+"-") {
			shared.Items[i].SetKind("ConfigMap")
			shared.Items[i].SetName(sharedNamespace + "/" + shared.Items[i].GetName())
			add(&shared.Items[i])
		}
	}
	return out, nil
}

// essence is an object as its chart decides it: labels and annotations (but for
// deliberateDifferences), owners by kind and name (but a hook object's), and every field but metadata and status, less
// what the apiserver fills in (a Service's cluster IPs).
func essence(u *unstructured.Unstructured) string {
	o := u.DeepCopy().Object
	delete(o, "metadata")
	delete(o, "status")
	unstructured.RemoveNestedField(o, "spec", "clusterIP")
	unstructured.RemoveNestedField(o, "spec", "clusterIPs")
	labels, annots := u.GetLabels(), u.GetAnnotations()
	for k := range deliberateDifferences {
		delete(labels, k)
		delete(annots, k)
	}
	var owners []string // of a hook object, not compared (hookAnnotation)
	if _, hook := annots[hookAnnotation]; !hook {
		for _, r := range u.GetOwnerReferences() {
			owners = append(owners, fmt.Sprintf("%s/%s controller=%v", r.Kind, r.Name, r.Controller != nil && *r.Controller))
		}
	}
	for k, m := range map[string]map[string]string{"labels": labels, "annotations": annots} {
		if len(m) > 0 {
			o[k] = m
		}
	}
	o["owners"] = owners
	raw, _ := json.Marshal(o)
	return string(raw)
}

// diff lists what differs between two snapshots.
func diff(a, b map[string]string, aName, bName string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if bv, ok := b[k]; !ok {
			out = append(out, fmt.Sprintf("%s: only under %s", k, aName))
		} else if bv != a[k] {
			out = append(out, fmt.Sprintf("%s differs:\n  %s: %s\n  %s: %s", k, aName, a[k], bName, bv))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s: only under %s", k, bName))
		}
	}
	return out
}

// edited is the object of k that the hand edit and the injection change (by kind and name only).
func (s corpusSubject) edited(k construct) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(k.edited)
	obj.SetName(sample + "-" + strings.ToLower(k.kind) + k.suffix)
	if slices.Contains(clusterScopedKinds, k.edited) {
		obj.SetName("corpus-" + s.ns + "-" + sample + "-" + strings.ToLower(k.kind))
	} else {
		obj.SetNamespace(s.ns)
	}
	return obj
}

// rawPatch is a JSON patch (a list of operations) or else a JSON merge patch.
func rawPatch(patch string) client.Patch {
	if strings.HasPrefix(patch, "[") {
		return client.RawPatch(types.JSONPatchType, []byte(patch))
	}
	return client.RawPatch(types.MergePatchType, []byte(patch))
}

// waitRevision waits until every kind's release is deployed at revision want (the stock
// operator keeps only the last revisions of a release). The stock operator retries a reconcile
// that failed at its backoff or, at the latest, at its resync (a minute by default): its bound
// allows for one such retry.
func (s corpusSubject) waitRevision(t *testing.T, want int) {
	t.Helper()
	bound := timeout
	if s.stock {
		bound += time.Minute
	}
	for _, k := range s.constructs {
		harness.Eventually(t, bound, fmt.Sprintf("%s: %s at revision %d, deployed", s.name, k.kind, want), func(context.Context) (bool, string) {
			h := s.history(t, k.kind)
			return len(h) > 0 && h[len(h)-1].Revision == want && h[len(h)-1].Status == "deployed", fmt.Sprintf("history %+v", h)
		})
	}
}

// injectionsKept fails the test unless what another controller wrote into the objects (the
// injected patches) is still in the snapshot taken at phase: drift correction and upgrades
// take back only what the chart sets.
func (s corpusSubject) injectionsKept(t *testing.T, snap map[string]string, phase string) {
	t.Helper()
	for _, k := range s.constructs {
		if k.injected == "" {
			continue
		}
		key := strings.ReplaceAll(k.edited.Kind+" "+s.edited(k).GetName(), s.ns, "NS")
		for _, want := range []string{`"caBundle":"` + base64.StdEncoding.EncodeToString(caBundle) + `"`, `"controller.example.com/observed":"true"`} {
			if !strings.Contains(snap[key], want) {
				t.Errorf("%s, %s: %s lost what another controller wrote (%s): %s", s.name, phase, key, want, snap[key])
			}
		}
	}
}

// phases are the steps after which both namespaces are compared.
var phases = []string{"installed", "upgraded", "hand edits set back", "hand rollback undone", "deleted"}

// extendedPhases are the steps after which the differential of the fast paths also compares
// its two subjects, both this operator.
var extendedPhases = []string{"hand upgrade undone", "new API followed", "changed while killed"}

// statusAtRest is the key of the custom resources' statuses (by kind) once nothing more is
// written, in the differential of the fast paths.
const statusAtRest = "status at rest"

// histories is the key of the release histories (by kind) in a subject's snapshots, read
// after the hand edits were set back.
const histories = "release histories"

// runCorpus takes every construct through the phases under s, recording a snapshot after each.
func runCorpus(t *testing.T, s corpusSubject, snapshots map[string]map[string]string) {
	ctx := context.Background()
	take := func(phase string) map[string]string {
		snap, err := s.snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		snapshots[phase] = snap
		return snap
	}
	name := func(k construct) string { return sample + "-" + strings.ToLower(k.kind) }
	lookedUp := func(k construct, colour string) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: k.lookedUp}, Data: map[string]string{"colour": colour}}
		err := s.c.Create(ctx, cm)
		if apierrors.IsAlreadyExists(err) {
			err = s.c.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"colour":"`+colour+`"}}`)))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range s.constructs {
		if k.lookedUp != "" {
			lookedUp(k, "red")
		}
	}
	for _, k := range s.constructs {
		u := corpusCR(k.kind, s.ns, name(k))
		u.Object["spec"] = k.spec
		if err := s.c.Create(ctx, u); err != nil {
			t.Fatalf("%s: %v", k.kind, err)
		}
	}
	s.waitRevision(t, 1)
	harness.Eventually(t, timeout, s.name+": the post-install hook run", func(ctx context.Context) (bool, string) {
		snap, err := s.snapshot(ctx)
		return err == nil && snap["PodDisruptionBudget "+sample+"-hooks-hooks"] != "", fmt.Sprint(err)
	})
	take(phases[0])
	for _, k := range s.constructs {
		for i, r := range k.refused {
			refuse(t, s, corpusCR(k.kind, s.ns, fmt.Sprintf("%s-refused-%d", name(k), i)), r)
		}
	}
	// Another controller writes what the chart leaves unset; the write wakes both operators.
	for _, k := range s.constructs {
		if k.injected != "" {
			if err := s.c.Patch(ctx, s.edited(k), rawPatch(k.injected), client.FieldOwner("cainjector")); err != nil {
				t.Fatalf("%s: injecting into %s: %v", k.kind, k.edited.Kind, err)
			}
		}
	}
	if !s.stock {
		harness.Eventually(t, timeout, "Ready names the object outside the watched namespace", func(ctx context.Context) (bool, string) {
			u := corpusCR("ClusterScoped", s.ns, sample+"-clusterscoped")
			if err := s.c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
				return false, err.Error()
			}
			status, _, msg := harness.Condition(u, names.ConditionReady)
			return status == "True" && strings.Contains(msg, "not followed") &&
				strings.Contains(msg, "ConfigMap "+sharedNamespace+"/"+s.ns+"-"+sample+"-clusterscoped"), status + " " + msg
		})
	}
	harness.Eventually(t, timeout, s.name+": NOTES.txt in the Deployed condition", func(ctx context.Context) (bool, string) {
		u := corpusCR("Inferred", s.ns, name(corpus[0]))
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return false, err.Error()
		}
		_, _, msg := harness.Condition(u, names.ConditionDeployed)
		return strings.TrimSpace(msg) == sample+"-inferred says hi 1 times.", msg
	})

	for _, k := range s.constructs {
		if k.lookedUp != "" {
			lookedUp(k, "blue")
		}
		if err := s.c.Patch(ctx, corpusCR(k.kind, s.ns, name(k)), client.RawPatch(types.MergePatchType, []byte(k.upgrade))); err != nil {
			t.Fatalf("%s: %v", k.kind, err)
		}
	}
	s.waitRevision(t, 2)
	harness.Eventually(t, timeout, s.name+": the post-upgrade hook run", func(ctx context.Context) (bool, string) {
		snap, err := s.snapshot(ctx)
		return err == nil && strings.Contains(snap["PodDisruptionBudget "+sample+"-hooks-hooks"], `"minAvailable":2`), fmt.Sprint(err)
	})
	upgraded := take(phases[1])
	s.injectionsKept(t, upgraded, phases[1])

	for _, k := range s.constructs {
		if err := s.c.Patch(ctx, s.edited(k), rawPatch(k.edit)); err != nil {
			t.Fatalf("%s: editing %s: %v", k.kind, k.edited.Kind, err)
		}
	}
	// asUpgraded tells whether the namespace holds again what it held once upgraded.
	asUpgraded := func(ctx context.Context) (bool, string) {
		snap, err := s.snapshot(ctx)
		if err != nil {
			return false, err.Error()
		}
		d := diff(upgraded, snap, "upgraded", "now")
		return len(d) == 0, strings.Join(d, "\n")
	}
	// The stock operator sets hand edits back at its resync (a minute by default) at the latest.
	harness.Eventually(t, 3*time.Minute, s.name+": every hand edit set back", asUpgraded)
	s.injectionsKept(t, take(phases[2]), phases[2])
	s.waitRevision(t, 2) // setting hand edits back is no new revision

	// A person rolls a release back with helm: revision 3 renders revision 1's values, which
	// the custom resource no longer asks for; the operator upgrades it back to the spec. (The
	// stock operator keeps no revision 1 by then.)
	rolledBack := corpus[0]
	if !s.stock {
		harness.Run(t, []string{"KUBECONFIG=" + kubeconfig}, harness.Tool(t, "HELM", "helm"),
			"rollback", name(rolledBack), "1", "-n", s.ns)
	}
	harness.Eventually(t, timeout, s.name+": the hand rollback undone", func(ctx context.Context) (bool, string) {
		h := s.history(t, rolledBack.kind)
		want := 4 // the rollback's revision 3, then the upgrade back
		if s.stock {
			want = 2
		}
		if len(h) == 0 || h[len(h)-1].Revision != want || h[len(h)-1].Status != "deployed" {
			return false, fmt.Sprintf("history %+v", h)
		}
		return asUpgraded(ctx)
	})
	take(phases[3])
	if s.restarted != nil {
		runExtended(t, s, take, asUpgraded, snapshots)
	}
	snapshots[histories] = map[string]string{}
	for _, k := range s.constructs {
		snapshots[histories][k.kind] = fmt.Sprintf("%+v", s.history(t, k.kind))
	}

	for _, k := range s.constructs {
		if err := s.c.Delete(ctx, corpusCR(k.kind, s.ns, name(k))); err != nil {
			t.Fatalf("%s: %v", k.kind, err)
		}
	}
	for _, k := range s.constructs {
		harness.WaitForGone(t, s.c, corpusCR(k.kind, s.ns, name(k)), timeout)
		if h := s.history(t, k.kind); len(h) != 0 {
			t.Errorf("%s: %s's release left: %+v", s.name, k.kind, h)
		}
	}
	take(phases[4])
}

// refuse creates u with the refusal's spec and requires it refused as the refusal says, at
// kubectl apply or in a condition, naming the value; then deletes it, which leaves nothing.
func refuse(t *testing.T, s corpusSubject, u *unstructured.Unstructured, r refusal) {
	t.Helper()
	ctx := context.Background()
	u.Object["spec"] = r.spec
	err := s.c.Create(ctx, u)
	if r.atApply {
		if err == nil || !strings.Contains(err.Error(), r.names) {
			t.Errorf("%s: %s created: %v; want it refused at apply, saying %q", s.name, u.GetName(), err, r.names)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %s refused at apply (%v); want it refused in a condition", s.name, u.GetName(), err)
	}
	harness.Eventually(t, timeout, fmt.Sprintf("%s: %s refused in a condition naming %s", s.name, u.GetName(), r.names), func(ctx context.Context) (bool, string) {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return false, err.Error()
		}
		conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conditions {
			c, _ := c.(map[string]any)
			if c["status"] == "True" && strings.Contains(fmt.Sprint(c["message"]), r.names) {
				return true, ""
			}
		}
		return false, fmt.Sprint(conditions)
	})
	if err := s.c.Delete(ctx, u); err != nil {
		t.Fatal(err)
	}
	harness.WaitForGone(t, s.c, u, timeout)
}

// runExtended takes the corpus of s through extendedPhases: nothing written at rest; a hand
// `helm upgrade`, which the operator undoes; a new API that a chart tests for, which renders
// again the releases that read it; a spec changed while the operator was killed with SIGKILL.
func runExtended(t *testing.T, s corpusSubject, take func(string) map[string]string, asUpgraded func(context.Context) (bool, string),
	snapshots map[string]map[string]string) {
	ctx := context.Background()
	name := func(k construct) string { return sample + "-" + strings.ToLower(k.kind) }
	// A write loop (one writer waking another with nothing to change) shows as resources or
	// release histories that keep changing once everything is deployed.
	written := func(ctx context.Context) (bool, string) {
		var b strings.Builder
		for _, k := range s.constructs {
			u := corpusCR(k.kind, s.ns, name(k))
			if err := s.c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
				return false, err.Error()
			}
			fmt.Fprintf(&b, "%s@%s %+v\n", k.kind, u.GetResourceVersion(), s.history(t, k.kind))
		}
		return true, b.String()
	}
	_, atRest := written(ctx)
	harness.Consistently(t, 5*time.Second, s.name+": nothing written at rest", func(ctx context.Context) (bool, string) {
		ok, now := written(ctx)
		return ok && now == atRest, now
	})
	// At rest, the status of every resource as both writers left it, but for the times of
	// condition transitions.
	snapshots[statusAtRest] = map[string]string{}
	for _, k := range s.constructs {
		u := corpusCR(k.kind, s.ns, name(k))
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			t.Fatal(err)
		}
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		conditions, _, _ := unstructured.NestedSlice(st, "conditions")
		for _, c := range conditions {
			delete(c.(map[string]any), "lastTransitionTime")
		}
		if conditions != nil {
			st["conditions"] = conditions
		}
		raw, _ := json.Marshal(st)
		snapshots[statusAtRest][k.kind] = strings.ReplaceAll(string(raw), s.ns, "NS")
	}

	// A person upgrades a release with helm: revision 5, which the operator upgrades back to the spec.
	handled := corpus[0]
	harness.Run(t, []string{"KUBECONFIG=" + kubeconfig}, harness.Tool(t, "HELM", "helm"),
		"upgrade", name(handled), filepath.Join(s.charts, "inferred"), "-n", s.ns, "--reuse-values", "--set", "message=by-hand")
	harness.Eventually(t, timeout, s.name+": the hand upgrade undone", func(ctx context.Context) (bool, string) {
		h := s.history(t, handled.kind)
		if len(h) == 0 || h[len(h)-1].Revision != 6 || h[len(h)-1].Status != "deployed" {
			return false, fmt.Sprintf("history %+v", h)
		}
		return asUpgraded(ctx)
	})
	take(extendedPhases[0])

	// An API the lookups chart tests for (.Capabilities) appears: its release renders an object more.
	group := s.ns + ".corpus.example.com"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					XPreserveUnknownFields: ptr.To(true)}}}}},
	}
	if err := s.c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.c.Delete(context.Background(), crd) })
	harness.Eventually(t, timeout, s.name+": the new API followed", func(ctx context.Context) (bool, string) {
		snap, err := s.snapshot(ctx)
		return err == nil && snap["ConfigMap "+sample+"-lookups-gadget"] != "", fmt.Sprint(err)
	})
	take(extendedPhases[1])

	// The operator is killed; a spec changes while it is down; started again, it upgrades once.
	s.restarted(t, func() {
		if err := s.c.Patch(ctx, corpusCR(handled.kind, s.ns, name(handled)), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"count":5}}`))); err != nil {
			t.Fatal(err)
		}
	})
	harness.Eventually(t, timeout, s.name+": the change made while killed deployed", func(ctx context.Context) (bool, string) {
		h := s.history(t, handled.kind)
		if len(h) == 0 || h[len(h)-1].Revision != 7 || h[len(h)-1].Status != "deployed" {
			return false, fmt.Sprintf("history %+v", h)
		}
		snap, err := s.snapshot(ctx)
		return err == nil && strings.Contains(snap["ConfigMap "+sample+"-inferred-inferred"], `"count":"5"`), fmt.Sprint(err)
	})
	take(extendedPhases[2])
}

// runSubjects takes the corpus through its phases under every subject at once, and returns
// the snapshots of each, by phase.
func runSubjects(t *testing.T, subjects []corpusSubject) []map[string]map[string]string {
	snapshots := make([]map[string]map[string]string, len(subjects))
	t.Run("subjects", func(t *testing.T) {
		for i, s := range subjects {
			snapshots[i] = map[string]map[string]string{}
			t.Run(s.name, func(t *testing.T) {
				t.Parallel()
				runCorpus(t, s, snapshots[i])
			})
		}
	})
	return snapshots
}

func TestChartCorpusSideBySideWithTheStockOperator(t *testing.T) {
	c := harness.NewClient(t, cfg)
	watches, managerRole := corpusProject(t, c)
	subjects := []corpusSubject{{name: "this operator", constructs: corpus}, {name: "stock helm-operator", stock: true, constructs: corpus}}
	for i := range subjects {
		s := &subjects[i]
		s.c, s.ns = c, newNamespace(t, c, nil)
		if s.stock {
			startStockOperator(t, watches, s.ns)
		} else {
			// As the ServiceAccount make deploy binds to the manager role: what the charts grant
			// and what their values switch on must be in it.
			asManager := harness.ServiceAccountKubeconfig(t, c, cfg, s.ns, operatorAccount, managerRole)
			harness.StartOperator(t, operatorBin, asManager, []string{"--watches-file=" + watches}, "WATCH_NAMESPACE="+s.ns)
		}
	}
	snapshots := runSubjects(t, subjects)
	if t.Failed() {
		return
	}
	ours, stock := snapshots[0], snapshots[1]
	for _, phase := range phases[:4] {
		if d := diff(ours[phase], stock[phase], subjects[0].name, subjects[1].name); len(d) > 0 {
			t.Errorf("%s: the namespaces differ:\n%s", phase, strings.Join(d, "\n"))
		}
	}
	for _, absent := range []string{"ConfigMap " + sample + "-inferred-draft", "ConfigMap " + sample + "-inferred-test",
		"Pod " + sample + "-created-test-connection"} {
		if _, ok := ours[phases[0]][absent]; ok {
			t.Errorf("%s exists: a helmignored template or a test hook was installed", absent)
		}
	}

	// Deleted: what Helm keeps stays under both. envtest runs no garbage collector: the stock
	// operator leaves the hook objects to it (they carry an owner reference to the deleted
	// resource); this operator deletes them itself, so nothing depends on a collector.
	kept := "ConfigMap " + sample + "-hooks-kept"
	hook := "PodDisruptionBudget " + sample + "-hooks-hooks"
	if got := slices.Sorted(maps.Keys(ours[phases[4]])); !slices.Equal(got, []string{kept}) {
		t.Errorf("deleted, this operator left %v, want only %s", got, kept)
	}
	if got := slices.Sorted(maps.Keys(stock[phases[4]])); !slices.Equal(got, []string{kept, hook}) {
		t.Errorf("deleted, the stock operator left %v, want %s and %s (for the garbage collector)", got, kept, hook)
	}
	pdb := &unstructured.Unstructured{}
	pdb.SetGroupVersionKind(gvk("policy", "v1", "PodDisruptionBudget"))
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: subjects[1].ns, Name: sample + "-hooks-hooks"}, pdb); err != nil {
		t.Error(err)
	} else if refs := pdb.GetOwnerReferences(); len(refs) != 1 || refs[0].Name != sample+"-hooks" {
		t.Errorf("the hook object the stock operator left has no owner reference to its resource: %v", refs)
	}
}

// Every fast path is the stock one, cheaper: the corpus under this operator with its fast paths
// (digests, the empty history from the cache) and without them
// (--fast-paths=false: helm-operator-plugins' and Helm's own paths) ends in the same objects,
// field for field, after every step (install, upgrade, hand edits, a hand `helm rollback`,
// deletion), and in the same release histories (revisions, statuses, descriptions). The
// corpus here includes a chart that looks an object up: its change upgrades the release in
// both (the fast path follows it; the stock path renders again when woken).
func TestFastPathsAreTheStockPath(t *testing.T) {
	c := harness.NewClient(t, cfg)
	watches, _ := corpusProject(t, c)
	all := append(slices.Clone(corpus), lookups)
	subjects := []corpusSubject{{name: "fast paths", constructs: all}, {name: "stock paths", constructs: all}}
	for i := range subjects {
		s := &subjects[i]
		s.c, s.ns = c, newNamespace(t, c, nil)
		args := []string{"--watches-file=" + watches}
		if i == 1 {
			args = append(args, "--"+options.FastPathsFlag+"=false")
		}
		env := "WATCH_NAMESPACE=" + s.ns
		op := harness.StartOperator(t, operatorBin, kubeconfig, args, env)
		s.charts = filepath.Dir(watches)
		s.restarted = func(t *testing.T, whileDown func()) {
			op.Kill()
			whileDown()
			op = harness.StartOperator(t, operatorBin, kubeconfig, args, env)
		}
	}
	snapshots := runSubjects(t, subjects)
	if t.Failed() {
		return
	}
	if n := len(snapshots[0][statusAtRest]); n != len(all) {
		t.Errorf("the statuses of %d resources read at rest, want %d", n, len(all))
	}
	for _, phase := range slices.Concat(phases, extendedPhases, []string{statusAtRest, histories}) {
		if d := diff(snapshots[0][phase], snapshots[1][phase], subjects[0].name, subjects[1].name); len(d) > 0 {
			t.Errorf("%s: the two differ:\n%s", phase, strings.Join(d, "\n"))
		}
	}
}

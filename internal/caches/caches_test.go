package caches

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/shard"
)

// entry is one row of docs/architecture.md's table of caches, in words a reader checks against
// the code.
type entry struct {
	Cache, Holds, Selected, Keeps, Events, ReadBy string
	Condition                                     string // when it exists; "" always
}

// table is every cache the operator reads, the manager's first: each kind the manager's cache
// holds is in one of its two classes; each other row is a Side.
var table = []entry{
	{Cache: "manager", Holds: "the custom resources of every watched kind",
		Selected: "the watch's selector and this shard's (package shard)", Keeps: "all but managed fields",
		Events: "all but updates of status only or an added finalizer (the status controller watches the same informers " +
			"unfiltered), and additions and updates of resources another shard claims, which are held back",
		ReadBy: "the Helm reconciler, the status controller, the client's reads of custom resources"},
	{Cache: "manager", Holds: "release objects: every other kind a release renders, Secrets included, as each " +
		"is first watched (typed where the scheme knows the kind, ReleaseObject)",
		Selected: "the managed label with this shard's value (names.ManagedLabel)", Keeps: "all but managed fields",
		Events: "all, but updates of status and resourceVersion only (the plugins' dependent predicate), of the " +
			"Deployment revision too (fast path bookkeeping), and the operator's own deletes of a resource whose retry is " +
			"already due (controller/dependents.go, helmconfig.Records)",
		ReadBy: "the dependent watches (drift), the status controller (Ready, declared fields)"},
	{Cache: ReleaseRecords.Name, Holds: "Secret metadata of Helm release records",
		Selected: names.RecordOwnerLabel + "=" + names.RecordOwnerHelm, Keeps: "identity, labels, owner references",
		Events: "all; the record watch skips the operator's own writes and deletes (helmconfig.Records)",
		ReadBy: "the record watch (controller/records.go), the empty-history fast path (helmconfig.Records)"},
	{Cache: SecretMetadata.Name, Holds: "Secret metadata, but for release records",
		Selected: names.RecordOwnerLabel + "!=" + names.RecordOwnerHelm, Keeps: "identity",
		Events: "all", ReadBy: "the watch of Secrets that checked values name (controller/secrets.go)"},
	{Cache: Lookups.Name, Holds: "metadata of the kinds renderings looked up, and of APIServices",
		Selected: "none: a lookup may read any object of the namespace", Keeps: "identity",
		Events: "all", ReadBy: "actionclient.Lookups (a looked-up object changed), the API watch (controller/apiwatch.go)"},
	{Cache: ServiceAccounts("").Name, Holds: "metadata of the ServiceAccounts releases run as (one cache per name)",
		Selected: "metadata.name, the watches.yaml serviceAccountName or --default-service-account", Keeps: "identity",
		Events: "all", ReadBy: "package tenancy (a missing ServiceAccount, and its creation)",
		Condition: "when a watch runs as a ServiceAccount"},
	{Cache: RolloutState("").Name, Holds: "metadata of a watch's rollout state ConfigMap (one cache per ConfigMap)",
		Selected: "metadata.name, in the rollout state's namespace", Keeps: "all but managed fields",
		Events: "additions and updates", ReadBy: "the rollout gate: an administrator's resume request (package rollout)",
		Condition: "with rollout waves"},
	{Cache: Claims(shard.Shard{}).Name, Holds: "metadata of the custom resources that name this shard as their owner",
		Selected: "the shard's owner label (package shard)", Keeps: "all but managed fields",
		Events: "additions and updates of resources this shard's selector no longer picks",
		ReadBy: "the handover controller (package shard)", Condition: "sharded"},
}

// docs/architecture.md shows the table of every cache, and every Side the code declares is in it.
func TestTheArchitectureShowsEveryCache(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("| cache | holds | selected by | keeps | events that reach controllers | read by |\n|---|---|---|---|---|---|\n")
	for _, e := range table {
		name := e.Cache
		if e.Condition != "" {
			name += " (" + e.Condition + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", name, e.Holds, e.Selected, e.Keeps, e.Events, e.ReadBy)
	}
	if want := b.String(); !strings.Contains(string(doc), want) {
		t.Errorf("docs/architecture.md does not show the table of caches; its section should read:\n%s", want)
	}
	for _, s := range []Side{ReleaseRecords, SecretMetadata, Lookups, ServiceAccounts("a"), RolloutState("a"), Claims(shard.Shard{})} {
		if !slices.ContainsFunc(table, func(e entry) bool { return e.Cache == s.Name }) {
			t.Errorf("the %s cache has no row in the table", s.Name)
		}
	}
}

var myProxy = schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"}

// Every kind the manager's cache selects by an option of its own has an event filter declared
// for it; one without is refused, rather than falling under the release objects' filter.
func TestEveryKindSelectedApartHasItsOwnFilter(t *testing.T) {
	opts, newCache := Manager([]watches.Watch{{GroupVersionKind: myProxy}}, nil, shard.Shard{}, true)
	opts.Scheme = scheme.Scheme
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(myProxy, meta.RESTScopeNamespace)
	opts.Mapper = mapper
	if len(opts.ByObject) != 1 {
		t.Fatalf("%d kinds selected apart, want 1 (MyProxy)", len(opts.ByObject))
	}
	if _, err := newCache(&rest.Config{Host: "https://127.0.0.1:1"}, opts); err != nil {
		t.Fatalf("the declared kinds are refused: %v", err)
	}
	undeclared := &unstructured.Unstructured{}
	undeclared.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Other"})
	opts.ByObject[undeclared] = cache.ByObject{}
	if _, err := newCache(&rest.Config{Host: "https://127.0.0.1:1"}, opts); err == nil || !strings.Contains(err.Error(), "Other") {
		t.Errorf("a kind selected apart without a filter of its own: %v, want refused by name", err)
	}
}

func TestIdentityKeepsWhichObjectItIs(t *testing.T) {
	now := metav1.Now()
	full := func() *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "ns", UID: "u", ResourceVersion: "7",
			DeletionTimestamp: &now, Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"},
			OwnerReferences: []metav1.OwnerReference{{Name: "o"}}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	}
	got, _ := Identity(full())
	m := got.(*metav1.PartialObjectMetadata)
	if m.Name != "n" || m.Namespace != "ns" || m.UID != "u" || m.ResourceVersion != "7" || m.DeletionTimestamp == nil ||
		m.Labels != nil || m.Annotations != nil || m.OwnerReferences != nil || m.ManagedFields != nil {
		t.Errorf("Identity kept %+v", m.ObjectMeta)
	}
	got, _ = IdentityAndLinks(full())
	m = got.(*metav1.PartialObjectMetadata)
	if m.Name != "n" || m.Labels["a"] != "b" || len(m.OwnerReferences) != 1 || m.Annotations != nil || m.ManagedFields != nil {
		t.Errorf("IdentityAndLinks kept %+v", m.ObjectMeta)
	}
	var typed client.Object = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}}}
	if out, _ := Identity(typed); out != typed || typed.GetLabels()["a"] != "b" {
		t.Errorf("Identity changed an object that is not metadata only")
	}
}

// A release object points at its custom resource by its controller reference, or by the
// owner annotations where it carries none; references to another kind, and annotations when
// they are not asked for, point at nothing.
func TestOwnerRequestsReadWhatTheKubeClientWrites(t *testing.T) {
	owner := schema.GroupKind{Group: "gateway.example.com", Kind: "MyProxy"}
	controller := true
	object := func(refKind string, annotations map[string]string) client.Object {
		o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "cm", Annotations: annotations}}
		if refKind != "" {
			o.OwnerReferences = []metav1.OwnerReference{{APIVersion: "gateway.example.com/v1alpha1", Kind: refKind, Name: "edge", Controller: &controller}}
		}
		return o
	}
	annotated := map[string]string{"operator-sdk/primary-resource": "other/edge", "operator-sdk/primary-resource-type": "MyProxy.gateway.example.com"}
	for _, tc := range []struct {
		name                     string
		obj                      client.Object
		namespaced, byAnnotation bool
		want                     string
	}{
		{"reference, namespaced owner", object("MyProxy", nil), true, false, "team/edge"},
		{"reference, cluster-scoped owner", object("MyProxy", nil), false, false, "/edge"},
		{"reference to another kind", object("Site", annotated), true, true, ""},
		{"annotations", object("", annotated), true, true, "other/edge"},
		{"annotations not asked for", object("", annotated), true, false, ""},
		{"annotations of another kind", object("", map[string]string{"operator-sdk/primary-resource": "edge", "operator-sdk/primary-resource-type": "Site.web"}), true, true, ""},
	} {
		var got []string
		for _, r := range OwnerRequests(owner, tc.namespaced, tc.byAnnotation)(tc.obj) {
			got = append(got, r.String())
		}
		if want := []string{tc.want}; tc.want == "" && len(got) != 0 || tc.want != "" && !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %q", tc.name, got, tc.want)
		}
	}
}

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/example/myproxy-operator/hack/manifests/crdgen"
	"github.com/example/myproxy-operator/test/harness"
)

// mergePatch applies a JSON merge patch to a spec.
func mergePatch(spec, patch map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range spec {
		out[k] = v
	}
	for k, v := range patch {
		switch p := v.(type) {
		case nil:
			delete(out, k)
		case map[string]any:
			have, _ := out[k].(map[string]any)
			out[k] = mergePatch(have, p)
		default:
			out[k] = v
		}
	}
	return out
}

// warnings records the warnings the apiserver sends with its answers, as kubectl prints them
// ("Warning: ...").
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// take returns the warnings recorded since the last take.
func (w *warnings) take() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := strings.Join(w.seen, "\n")
	w.seen = nil
	return out
}

// corpusResources writes resources of the corpus kinds through a client that records warnings.
type corpusResources struct {
	t        *testing.T
	ns       string
	client   dynamic.Interface
	warnings *warnings
}

func newCorpusResources(t *testing.T, ns string) corpusResources {
	w := &warnings{}
	withWarnings := rest.CopyConfig(cfg)
	withWarnings.WarningHandler = w
	dc, err := dynamic.NewForConfig(withWarnings)
	if err != nil {
		t.Fatal(err)
	}
	return corpusResources{t: t, ns: ns, client: dc, warnings: w}
}

// create creates (or, with dryRun, has the apiserver check) a resource of kind (plural) with
// spec (none when nil), and returns the error and the warnings of the answer.
func (r corpusResources) create(plural, kind, name string, spec map[string]any, dryRun bool, validation string) (string, error) {
	u := corpusCR(kind, r.ns, name)
	if spec != nil {
		u.Object["spec"] = spec
	}
	opts := metav1.CreateOptions{FieldValidation: validation}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	r.warnings.take()
	_, err := r.client.Resource(schema.GroupVersionResource{Group: corpusGroup, Version: "v1", Resource: plural}).
		Namespace(r.ns).Create(context.Background(), u, opts)
	return r.warnings.take(), err
}

func (r corpusResources) patch(plural, name, patch string) (string, error) {
	r.warnings.take()
	_, err := r.client.Resource(schema.GroupVersionResource{Group: corpusGroup, Version: "v1", Resource: plural}).
		Namespace(r.ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return r.warnings.take(), err
}

// The CRDs make manifests writes for the chart corpus accept what the charts accept: every key
// a template reads, whether values.yaml sets it, mentions it in a comment or neither; every key
// of an object a values.schema.json leaves open; an empty spec where every required key has a
// default. What Helm would refuse the CRD refuses too, naming the key: a required key without
// a default; a key of an object the schema closes. A key no template reads is kept, and
// warned of as a likely typo (a Warning: line of kubectl apply); an update that leaves the spec
// alone is not.
func TestWhatTheChartAcceptsTheCRDAccepts(t *testing.T) {
	c := harness.NewClient(t, cfg)
	corpusProject(t, c)
	ns := newNamespace(t, c, nil)
	r := newCorpusResources(t, ns)

	typo := map[string]any{"replicaCont": 2, "image": map[string]any{"tga": "1.2"},
		"podAnnotations": map[string]any{"any.example.com/key": "x"}, "app.ini": map[string]any{"new_section": map[string]any{"k": "v"}}}
	wantWarnings := []string{
		"spec.replicaCont: no template of chart undeclared reads this key (a typo?); it is kept, and the release renders without it",
		"spec.image.tga: no template of chart undeclared reads this key",
	}
	harness.Eventually(t, timeout, "the warning policy of Undeclared in force", func(context.Context) (bool, string) {
		said, err := r.create("undeclareds", "Undeclared", "typo", typo, true, "")
		if err != nil {
			return false, err.Error()
		}
		for _, w := range wantWarnings {
			if !strings.Contains(said, w) {
				return false, "warnings: " + said
			}
		}
		return true, ""
	})
	// As kubectl prints it.
	manifest := harness.WriteTemp(t, "typo-*.yaml", []byte("apiVersion: corpus.example.com/v1\nkind: Undeclared\nmetadata:\n  name: typo\nspec:\n  replicaCont: 2\n"))
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if out, err := harness.RunErr(nil, kubectl, "--kubeconfig", kubeconfig, "apply", "--dry-run=server", "-n", ns, "-f", manifest); err != nil ||
		!strings.Contains(out, "Warning: ") || !strings.Contains(out, wantWarnings[0]) {
		t.Errorf("kubectl apply: %v, printed\n%s\nwant a Warning: line naming the key", err, out)
	}
	// Stored as it is written: the warning refuses nothing.
	said, err := r.create("undeclareds", "Undeclared", "typo", typo, false, "")
	if err != nil {
		t.Fatalf("a resource with a typo was refused: %v", err)
	}
	if strings.Contains(said, "podAnnotations") || strings.Contains(said, "app.ini") {
		t.Errorf("warned of keys templates read whole: %s", said)
	}
	stored := corpusCR("Undeclared", ns, "typo")
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "typo"}, stored); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedInt64(stored.Object, "spec", "replicaCont"); v != 2 {
		t.Errorf("the unread key was not kept: %v", stored.Object["spec"])
	}
	if said, err := r.patch("undeclareds", "typo", `{"metadata":{"labels":{"team":"a"}}}`); err != nil || said != "" {
		t.Errorf("an update that leaves the spec alone: %v, warnings %q; want none", err, said)
	}
	if said, err := r.patch("undeclareds", "typo", `{"spec":{"replicaCount":3}}`); err != nil || !strings.Contains(said, "spec.replicaCont") {
		t.Errorf("an update of the spec that keeps the typo: %v, warnings %q; want the typo named", err, said)
	}
	if err := c.Delete(context.Background(), stored); err != nil {
		t.Fatal(err)
	}

	// Every value of the corpus's install and upgrade is accepted, without a warning.
	for _, k := range corpus {
		var upgrade map[string]any
		if err := json.Unmarshal([]byte(k.upgrade), &upgrade); err != nil {
			t.Fatal(err)
		}
		upgraded, _ := upgrade["spec"].(map[string]any)
		for i, spec := range []map[string]any{k.spec, mergePatch(k.spec, upgraded)} {
			said, err := r.create(crdgen.Plural(strings.ToLower(k.kind)), k.kind, fmt.Sprintf("values-%d", i), spec, true, metav1.FieldValidationStrict)
			if err != nil {
				t.Errorf("%s %v: refused: %v", k.kind, spec, err)
			} else if said != "" {
				t.Errorf("%s %v: warnings %s", k.kind, spec, said)
			}
		}
	}

	// As users write them: numbers as strings, nulls.
	for _, s := range asUsersWriteThem {
		said, err := r.create(crdgen.Plural(strings.ToLower(s.kind)), s.kind, "as-users-write-it", specOf(t, s.name), true, metav1.FieldValidationStrict)
		if err != nil {
			t.Errorf("%s %s: refused: %v", s.kind, s.spec, err)
		} else if said != "" {
			t.Errorf("%s %s: warnings %s", s.kind, s.spec, said)
		}
	}

	for _, tc := range []struct {
		what, plural, kind string
		spec               map[string]any
		validation         string
		refused            string // "" when accepted
		warned             string
	}{
		{what: "an empty spec whose required keys all have defaults", plural: "requireds", kind: "Required", spec: map[string]any{}},
		{what: "no spec whose required keys all have defaults", plural: "requireds", kind: "Required"},
		{what: "a nested required key with a default, left out", plural: "requireds", kind: "Required", spec: map[string]any{"image": map[string]any{"tag": "3"}}},
		{what: "a required key without a default, left out", plural: "requiredpolicies", kind: "RequiredPolicy", spec: map[string]any{"timeoutSeconds": 5},
			refused: "spec.policy: Required value"},
		{what: "no spec where a required key has no default", plural: "requiredpolicies", kind: "RequiredPolicy",
			refused: "the chart requires spec.policy, and its values.yaml gives no default"},
		{what: "the required key given, the others from values.yaml", plural: "requiredpolicies", kind: "RequiredPolicy", spec: map[string]any{"policy": "audit"}},
		{what: "an enum the schema pins, in an open object", plural: "openschemas", kind: "OpenSchema",
			spec: map[string]any{"reloader": map[string]any{"watchMode": "sometimes"}}, refused: `spec.reloader.watchMode: Invalid value: "sometimes": must be one of "annotations", "all", or null`},
		{what: "a key the schema does not describe, of an object it leaves open", plural: "openschemas", kind: "OpenSchema",
			spec: map[string]any{"reloader": map[string]any{"deployment": map[string]any{"replicas": 3}}}, validation: metav1.FieldValidationStrict},
		{what: "a key of an object the schema closes", plural: "openschemas", kind: "OpenSchema",
			spec: map[string]any{"strict": map[string]any{"level": 1, "lvel": 2}}, validation: metav1.FieldValidationStrict,
			refused: `unknown field "spec.strict.lvel"`},
		{what: "a key no template reads, where the schema leaves the spec open", plural: "openschemas", kind: "OpenSchema",
			spec: map[string]any{"extraLable": "x"}, warned: "spec.extraLable: no template of chart openschema reads this key"},
	} {
		said, err := r.create(tc.plural, tc.kind, "case", tc.spec, true, tc.validation)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.what, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s: %v, want refused naming %q", tc.what, err, tc.refused)
		case tc.refused == "" && !strings.Contains(said, tc.warned):
			t.Errorf("%s: warnings %q, want %q", tc.what, said, tc.warned)
		case tc.warned == "" && said != "":
			t.Errorf("%s: warnings %q, want none", tc.what, said)
		}
	}
}

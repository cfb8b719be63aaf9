package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/hack/manifests/chartrender"
	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/status"
	"github.com/example/myproxy-operator/test/harness"
)

// The status controller reads release objects of known kinds as typed structs (the cache holds
// them so) and converts them with caches.Content; it used to read them unstructured. Over
// the objects of a real release, read both ways from the apiserver, the chart's declaration and
// the Ready condition must come out the same, at every stage of a rollout, and the converted
// form must be the unstructured one plus zero values only.
func TestStatusOverTypedObjectsIsStatusOverUnstructured(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	if err := c.Create(ctx, harness.MyProxy(ns, "both", map[string]any{"replicas": 2,
		"routes": []any{map[string]any{"path": "/", "upstream": "http://web:8080"}}})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "both", "Deployed", "True", timeout)
	declaration, err := chartrender.LoadChecked(filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"), harness.MyProxyGVK)
	if err != nil {
		t.Fatal(err)
	}
	mapper := c.RESTMapper()
	namespaced := func(gvk schema.GroupVersionKind) bool {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		return err == nil && m.Scope.Name() == "namespace"
	}

	d := waitDeployment(t, c, ns, "both", "installed", func(*appsv1.Deployment) bool { return true })
	for _, stage := range []struct {
		name  string
		ready int32
	}{{name: "not rolled out", ready: -1}, {name: "half ready", ready: 1}, {name: "rolled out", ready: 2}} {
		if stage.ready >= 0 {
			rolledOut(t, d, stage.ready)
		}
		self, err := harness.GetMyProxy(ctx, c, ns, "both")
		if err != nil {
			t.Fatal(err)
		}
		rel, err := driver.NewSecrets(kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets(ns)).Get(releaseKey("both", 1))
		if err != nil {
			t.Fatal(err)
		}
		refs, err := status.ParseManifest(rel.Manifest, self.GetNamespace(), namespaced)
		if err != nil || len(refs) == 0 {
			t.Fatalf("%s: %d objects in the manifest (%v)", stage.name, len(refs), err)
		}
		var typed, plain []status.ReleaseObject
		for _, ref := range refs {
			key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(ref.GVK)
			obj := caches.ReleaseObject(scheme.Scheme, ref.GVK)
			if _, unknown := obj.(*unstructured.Unstructured); unknown {
				t.Fatalf("%s is not known to the scheme: nothing typed to compare", ref)
			}
			if err := c.Get(ctx, key, u); err != nil {
				t.Fatal(err)
			}
			if err := c.Get(ctx, key, obj); err != nil {
				t.Fatal(err)
			}
			converted, err := caches.Content(obj, ref.GVK)
			if err != nil {
				t.Fatal(err)
			}
			// The cache strips managed fields from both forms.
			unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
			delete(converted["metadata"].(map[string]any), "managedFields")
			for _, diff := range nonZeroDifferences(u.Object, converted, ref.String()) {
				t.Errorf("%s: %s", stage.name, diff)
			}
			plain = append(plain, status.ReleaseObject{Ref: ref, Live: u.Object})
			typed = append(typed, status.ReleaseObject{Ref: ref, Live: converted})
		}
		evalPlain, evalTyped := declaration.Evaluate(self.Object, lives(plain)), declaration.Evaluate(self.Object, lives(typed))
		if !reflect.DeepEqual(evalPlain, evalTyped) {
			t.Errorf("%s: the declaration evaluates\n over unstructured objects to %+v\n over typed ones to %+v", stage.name, evalPlain, evalTyped)
		}
		if len(evalPlain.Errors) > 0 || len(evalPlain.Fields) == 0 {
			t.Errorf("%s: nothing to compare: fields %v, errors %v", stage.name, evalPlain.Fields, evalPlain.Errors)
		}
		if p, ty := status.Ready(true, plain), status.Ready(true, typed); p != ty {
			t.Errorf("%s: Ready over unstructured objects %+v, over typed ones %+v", stage.name, p, ty)
		}
		t.Logf("%s: fields %v; Ready %s", stage.name, evalTyped.Fields, status.Ready(true, typed).Reason)
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			t.Fatal(err)
		}
	}
}

func lives(objects []status.ReleaseObject) []map[string]any {
	out := make([]map[string]any, len(objects))
	for i, o := range objects {
		out[i] = o.Live
	}
	return out
}

// nonZeroDifferences lists where converted differs from plain other than by fields that plain
// leaves out and converted holds at their zero value (a typed struct's null timestamps, empty
// maps, false and 0).
func nonZeroDifferences(plain, converted any, path string) []string {
	switch p := plain.(type) {
	case map[string]any:
		c, ok := converted.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v became %v", path, plain, converted)}
		}
		var out []string
		keys := make([]string, 0, len(c))
		for k := range c {
			keys = append(keys, k)
		}
		for k := range p {
			if _, ok := c[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: %v is missing", path, k, p[k]))
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			if pv, ok := p[k]; ok {
				out = append(out, nonZeroDifferences(pv, c[k], path+"."+k)...)
			} else if !isZero(c[k]) {
				out = append(out, fmt.Sprintf("%s.%s: %v added", path, k, c[k]))
			}
		}
		return out
	case []any:
		c, ok := converted.([]any)
		if !ok || len(c) != len(p) {
			return []string{fmt.Sprintf("%s: %v became %v", path, plain, converted)}
		}
		var out []string
		for i := range p {
			out = append(out, nonZeroDifferences(p[i], c[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		if !reflect.DeepEqual(plain, converted) {
			return []string{fmt.Sprintf("%s: %v (%T) became %v (%T)", path, plain, plain, converted, converted)}
		}
		return nil
	}
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range x {
			if !isZero(e) {
				return false
			}
		}
		return true
	case []any:
		return len(x) == 0
	default:
		return reflect.ValueOf(v).IsZero()
	}
}

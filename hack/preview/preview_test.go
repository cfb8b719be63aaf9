package main

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const manifest = `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: a
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: r
---
apiVersion: v1
kind: Service
metadata:
  name: s
  namespace: elsewhere
`

// The release's namespace goes to its namespaced objects that name none, as Helm does.
func TestObjectsTakeTheReleaseNamespaceWhereNamespaced(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace)
	objs, err := Previewer{Mapper: mapper}.objects(manifest, "team")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"/v1, Kind=ConfigMap team/a", "rbac.authorization.k8s.io/v1, Kind=ClusterRole /r", "/v1, Kind=Service elsewhere/s"} {
		if objs[key] == nil {
			t.Errorf("no object %q in %v", key, objs)
		}
	}
}

func TestTheReportSaysWhatFailsAndCountsEveryOutcome(t *testing.T) {
	rep := Report{Releases: []Release{
		{Kind: "gateway.example.com/v1alpha1, MyProxy", Namespace: "a", Name: "p", Outcome: Changed,
			Objects: []Object{{Kind: "apps/v1, Deployment", Namespace: "a", Name: "p", Change: "changed", Diff: "-x\n+y\n"}}},
		{Kind: "gateway.example.com/v1alpha1, MyProxy", Namespace: "a", Name: "q", Outcome: Unchanged},
	}, Summary: map[Outcome]int{Changed: 1, Unchanged: 1}}
	if rep.Fails() {
		t.Error("a changed and an unchanged release fail")
	}
	var b strings.Builder
	WriteText(&b, rep)
	want := "MyProxy a/p: changed\n  changed Deployment p\n    -x\n    +y\nMyProxy a/q: unchanged\n2 releases: 1 unchanged, 1 changed, 0 replaced, 0 refused\n"
	if b.String() != want {
		t.Errorf("text:\n%s\nwant:\n%s", b.String(), want)
	}
	rep.Releases[1].Outcome = Replaced
	if !rep.Fails() || !Refused.Fails() || Changed.Fails() {
		t.Error("a replaced or refused release does not fail the preview")
	}
	if !isImmutable(`Deployment.apps "p" is invalid: spec.selector: Invalid value: ...: field is immutable`) {
		t.Error("an immutable field's refusal not told apart")
	}
}

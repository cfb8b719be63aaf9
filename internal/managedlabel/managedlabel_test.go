package managedlabel

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

func TestPostRendererLabelsEveryObjectAndKeepsTheRest(t *testing.T) {
	in := `---
# Source: myproxy/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: p
  labels: {app.kubernetes.io/name: myproxy}
data: {nginx.conf: "events {}\n"}
---
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: p}
spec: {replicas: 2}
`
	out, err := PostRenderer()(nil, nil, nil).Run(bytes.NewBufferString(in))
	if err != nil {
		t.Fatal(err)
	}
	rendered := out.String()
	dec := utilyaml.NewYAMLOrJSONDecoder(out, 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	if len(objs) != 2 {
		t.Fatalf("rendered %d objects, want 2:\n%s", len(objs), out)
	}
	for _, o := range objs {
		if !Selector().Matches(labels.Set(o.GetLabels())) {
			t.Errorf("%s %s not labelled: %v", o.GetKind(), o.GetName(), o.GetLabels())
		}
	}
	if objs[0].GetLabels()["app.kubernetes.io/name"] != "myproxy" {
		t.Errorf("the chart's own labels were lost: %v", objs[0].GetLabels())
	}
	if conf, _, _ := unstructured.NestedString(objs[0].Object, "data", "nginx.conf"); conf != "events {}\n" {
		t.Errorf("data changed: %q", conf)
	}
	if !strings.Contains(rendered, "replicas: 2\n") {
		t.Errorf("spec changed (want replicas: 2, an integer):\n%s", rendered)
	}
}

func TestPostRendererRefusesBrokenYAML(t *testing.T) {
	_, err := PostRenderer()(nil, nil, nil).Run(bytes.NewBufferString("kind: [unclosed"))
	if err == nil || !strings.Contains(err.Error(), "labelling") {
		t.Errorf("error = %v, want one that says what failed", err)
	}
}

// FuzzPostRenderer: whatever a chart renders, labelling never panics; it either refuses with
// an error or returns documents that all carry the label.
func FuzzPostRenderer(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"---\n---\n# only a comment\n",
		"apiVersion: v1\nkind: List\nitems: []\n",
		"metadata: {labels: null}\n",
		"metadata: {labels: {a: 1}}\n",
		"metadata: 5\n",
		"- a\n- b\n",
		"kind: [unclosed",
		"data: {big: \"" + strings.Repeat("ü", 4096) + "\"}\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, manifest string) {
		out, err := PostRenderer()(nil, nil, nil).Run(bytes.NewBufferString(manifest))
		if err != nil {
			return
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(out, 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				return
			}
			u := &unstructured.Unstructured{Object: obj}
			if len(obj) > 0 && u.GetLabels()[Key] != Value {
				t.Fatalf("an object came out unlabelled: %v", obj)
			}
		}
	})
}

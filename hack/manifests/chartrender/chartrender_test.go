package chartrender

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/test/harness"
)

var myProxy = schema.GroupVersionKind{Group: "gateway.example.com", Version: "v1alpha1", Kind: "MyProxy"}

func chartDir() string { return filepath.Join("..", "..", "..", "helm-charts", "myproxy") }

func compiled(t *testing.T, dir string) (*chartapi.Compiled, []Rendering) {
	t.Helper()
	c, err := chartapi.LoadCompiled(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c, r
}

// The project's chart passes its own checks, in both of its renderings.
func TestTheMyProxyDeclarationChecks(t *testing.T) {
	c, renderings := compiled(t, chartDir())
	if len(renderings) != 2 {
		t.Fatalf("%d renderings, want the defaults and ci/tls-routes-values.yaml", len(renderings))
	}
	if err := Check(c, myProxy, renderings); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, gvk := range Kinds(renderings) {
		kinds[gvk.Kind] = true
	}
	for _, k := range []string{"ConfigMap", "Deployment", "Service"} {
		if !kinds[k] {
			t.Errorf("rendered kinds %v lack %s", kinds, k)
		}
	}
}

// live gives the rendered objects the status a cluster would.
func live(objs []map[string]any, ready int64) []map[string]any {
	var out []map[string]any
	for _, o := range objs {
		o = deepCopy(o)
		o["metadata"].(map[string]any)["generation"] = int64(2)
		if o["kind"] == "Deployment" {
			o["status"] = map[string]any{"observedGeneration": int64(2), "replicas": int64(2), "readyReplicas": ready,
				"conditions": []any{map[string]any{"type": "Available", "status": map[bool]string{true: "True", false: "False"}[ready > 0]}}}
		}
		out = append(out, o)
	}
	return out
}

func deepCopy(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if mm, ok := v.(map[string]any); ok {
			v = deepCopy(mm)
		}
		out[k] = v
	}
	return out
}

func TestStatusFromLiveObjects(t *testing.T) {
	c, renderings := compiled(t, chartDir())
	self := map[string]any{"metadata": map[string]any{"name": "example"}, "spec": map[string]any{}}

	got := c.Evaluate(self, live(renderings[0].Objects, 1))
	if len(got.Errors) > 0 {
		t.Fatal(got.Errors)
	}
	want := map[string]any{"replicas": int64(2), "readyReplicas": int64(1), "image": "docker.io/nginxinc/nginx-unprivileged:1.27.5",
		"selector": "app.kubernetes.io/instance=example,app.kubernetes.io/name=myproxy", "url": "http://example.default.svc:80"}
	for k, v := range want {
		if got.Fields[k] != v {
			t.Errorf("status.%s = %#v, want %#v", k, got.Fields[k], v)
		}
	}
	if a := got.Conditions[0]; a.Type != "Available" || a.Status != "True" || a.Reason != "DeploymentAvailable" ||
		a.Message != "Deployment example: 1/1 replicas ready" {
		t.Errorf("Available = %+v", a)
	}

	notReady := c.Evaluate(self, live(renderings[0].Objects, 0)).Conditions[0]
	if notReady.Status != "False" || notReady.Reason != "DeploymentUnavailable" {
		t.Errorf("Available with no ready Pod = %+v", notReady)
	}
	none := c.Evaluate(self, nil)
	if _, ok := none.Fields["image"]; ok || none.Fields["replicas"] != int64(0) || none.Conditions[0].Reason != "NoDeployment" {
		t.Errorf("with no objects: %+v", none)
	}
}

func TestErrorsNameTheFileAndLine(t *testing.T) {
	cases := []struct {
		name, decl, want string
		atCheck          bool // found only by evaluating against the renderings
	}{
		{name: "syntax", decl: "status:\n  fields:\n    x:\n      type: string\n      expression: objects.map(o,\n", want: "kind.yaml:5: status.fields.x"},
		{name: "undeclared", decl: "status:\n  fields:\n    x:\n      type: string\n      expression: nothing\n", want: "undeclared reference to 'nothing'"},
		{name: "static type", decl: "status:\n  fields:\n    x:\n      type: integer\n      expression: \"'a'\"\n", want: "of type string, want int"},
		{name: "unknown key", decl: "status:\n  feilds: {}\n", want: "field feilds not found"},
		{name: "reserved", decl: "status:\n  conditions:\n  - type: Ready\n    status: 'true'\n    reason: \"'X'\"\n", want: "set by the operator itself"},
		{name: "scale", decl: "status:\n  scale: {specReplicasPath: .spec.replicas, statusReplicas: nope}\n", want: `"nope" is not a declared integer`},
		{name: "needs status", atCheck: true, want: "kind.yaml:5: status.fields.x", decl: "status:\n  fields:\n    x:\n      type: integer\n      expression: objects.filter(o, o.kind == 'Deployment')[0].status.replicas\n"},
		{name: "dynamic type", atCheck: true, want: "want integer", decl: "status:\n  fields:\n    x:\n      type: integer\n      expression: self.metadata.name\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			harness.CopyDir(t, chartDir(), dir)
			if err := os.WriteFile(filepath.Join(dir, chartapi.FileName), []byte(tc.decl), 0o644); err != nil {
				t.Fatal(err)
			}
			k, err := chartapi.Load(dir)
			if err == nil {
				err = CheckShape(k)
			}
			if err == nil {
				var c *chartapi.Compiled
				if c, err = chartapi.Compile(k); err == nil {
					if !tc.atCheck {
						t.Fatal("compiled")
					}
					r, rerr := Render(dir)
					if rerr != nil {
						t.Fatal(rerr)
					}
					err = Check(c, myProxy, r)
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

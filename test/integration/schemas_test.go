package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/hack/manifests/crdgen"
	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/test/harness"
)

// A values.schema.json whose oneOf a CRD cannot hold: `make manifests`' CRD keeps what it can
// (types) and the apiserver refuses a wrong type at once; a value of the right types that only
// the whole schema refuses is refused by Helm before anything is written, and the resource's
// ReleaseFailed condition names the field.
const storageSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "$defs": {"size": {"type": "string", "pattern": "^[0-9]+Gi$"}},
  "properties": {
    "storage": {
      "type": "object",
      "oneOf": [
        {"properties": {"type": {"const": "pvc"}, "size": {"$ref": "#/$defs/size"}}, "required": ["type", "size"]},
        {"properties": {"type": {"const": "emptyDir"}}, "required": ["type"]}
      ]
    }
  }
}`

var volumeGVK = schema.GroupVersionKind{Group: "storage.example.com", Version: "v1", Kind: "Volume"}

func TestWhatOnlyTheWholeSchemaRefusesIsAConditionNamingTheField(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	chart := writeChart(t, map[string]string{
		"Chart.yaml":         "apiVersion: v2\nname: volume\nversion: 0.1.0\n",
		"values.yaml":        "storage:\n  type: emptyDir\n",
		"values.schema.json": storageSchema,
		"templates/cm.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  type: {{ .Values.storage.type | quote }}\n",
	})
	crd, _, err := crdgen.Generate(volumeGVK, &chartapi.Kind{}, crdgen.Spec{Schema: []byte(storageSchema)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), crd) })
	ns := newNamespace(t, c, nil)
	volume := func(name string, storage map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"storage": storage}}}
		u.SetGroupVersionKind(volumeGVK)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	harness.Eventually(t, timeout, "the Volume CRD served", func(ctx context.Context) (bool, string) {
		err := c.Create(ctx, volume("wrong-type", map[string]any{"type": "pvc", "size": 5}), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "spec.storage.size"), fmt.Sprint(err)
	})

	watches := harness.WriteTemp(t, "watches-*.yaml", []byte(fmt.Sprintf("- group: %s\n  version: %s\n  kind: %s\n  chart: %s\n",
		volumeGVK.Group, volumeGVK.Version, volumeGVK.Kind, chart)))
	harness.StartOperator(t, operatorBin, kubeconfig, []string{"--watches-file=" + watches}, "WATCH_NAMESPACE="+ns)
	for name, storage := range map[string]map[string]any{
		"good":     {"type": "pvc", "size": "10Gi"},
		"no-size":  {"type": "pvc"},
		"bad-size": {"type": "pvc", "size": "ten"},
	} {
		if err := c.Create(ctx, volume(name, storage)); err != nil {
			t.Fatalf("%s: the CRD refused what only the whole schema refuses: %v", name, err)
		}
	}
	condition := func(name, conditionType string) (string, string) {
		u := volume(name, nil)
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return "", err.Error()
		}
		status, _, message := harness.Condition(u, conditionType)
		return status, message
	}
	harness.Eventually(t, timeout, "good Deployed", func(context.Context) (bool, string) {
		status, message := condition("good", names.ConditionDeployed)
		return status == "True", message
	})
	for _, name := range []string{"no-size", "bad-size"} {
		harness.Eventually(t, timeout, name+" ReleaseFailed naming the field", func(context.Context) (bool, string) {
			status, message := condition(name, names.ConditionReleaseFailed)
			return status == "True" && strings.Contains(message, "storage") && strings.Contains(message, "schema"), message
		})
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: its ConfigMap exists (%v) although its values were refused", name, err)
		}
	}
}

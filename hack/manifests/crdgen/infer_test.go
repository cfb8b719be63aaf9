package crdgen

import (
	"reflect"
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// values.yaml as `helm create` writes it, in part, with helm-docs comments and defaults that
// say nothing of their type.
const createdValues = `# Default values for demo.
# This is a YAML-formatted file.

# This will set the replicaset count more information can be found here: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/
replicaCount: 1

image:
  repository: nginx
  # -- (string) Overrides the image tag whose default is the chart appVersion.
  tag: ""
  pullPolicy: IfNotPresent

imagePullSecrets: []
nameOverride: ""
podAnnotations: {}
# @default -- none
ratio: 0.5
resources: {}
tolerations: []
affinity:
nodeSelector: {}
service:
  type: ClusterIP
  port: 80
ingress:
  enabled: false
  hosts:
    - host: chart-example.local
      paths:
        - path: /
          pathType: ImplementationSpecific
`

func TestInferredSchemaFollowsValuesYAML(t *testing.T) {
	raw, err := InferSchema([]byte(createdValues))
	if err != nil {
		t.Fatal(err)
	}
	spec := validSpec(t, schema.GroupVersionKind{Group: "demo.example.com", Version: "v1", Kind: "Demo"}, raw)
	open := map[string]any{"type": "object", "nullable": true, "x-kubernetes-preserve-unknown-fields": true}
	p := "properties."
	for path, want := range map[string]any{
		// A number is also taken as a string: a quantity, a port's name, a version.
		p + "replicaCount": map[string]any{"x-kubernetes-int-or-string": true, "pattern": NumberAsString, "nullable": true,
			"description": "This will set the replicaset count more information can be found here: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/"},
		// An empty string is a chart's "unset": a user's tag may be 1.2, a port 8080.
		p + "image.properties.tag":             map[string]any{"x-kubernetes-preserve-unknown-fields": true, "description": "Overrides the image tag whose default is the chart appVersion."},
		p + "image.properties.pullPolicy.type": "string",
		p + "imagePullSecrets":                 map[string]any{"type": "array", "nullable": true, "items": map[string]any{"x-kubernetes-preserve-unknown-fields": true}},
		p + "podAnnotations":                   open,
		p + "resources":                        open,
		// No structural type is a number or a string: any value, a string checked.
		p + "ratio":    map[string]any{"x-kubernetes-preserve-unknown-fields": true, "pattern": NumberAsString, "nullable": true},
		p + "affinity": map[string]any{"x-kubernetes-preserve-unknown-fields": true},
		p + "service.properties.port.x-kubernetes-int-or-string":         true,
		p + "ingress.properties.enabled.type":                            "boolean",
		p + "ingress.properties.hosts.items.properties.host.type":        "string",
		p + "ingress.properties.hosts.items.properties.paths.items.type": "object",
		"default": map[string]any{},
		// Open beside the keys values.yaml sets, at every level and in list items.
		"x-kubernetes-preserve-unknown-fields":                                                           true,
		p + "image.x-kubernetes-preserve-unknown-fields":                                                 true,
		p + "ingress.properties.hosts.items.x-kubernetes-preserve-unknown-fields":                        true,
		p + "ingress.properties.hosts.items.properties.paths.items.properties.path.type":                 "string",
		p + "ingress.properties.hosts.items.properties.paths.items.x-kubernetes-preserve-unknown-fields": true,
	} {
		if got := at(spec, path); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %s, want %s", path, show(got), show(want))
		}
	}
}

func TestInferredDefaultsServeTheScaleSubresource(t *testing.T) {
	raw, err := InferSchema([]byte("replicas: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := SpecSchema(raw, nil, "spec.replicas")
	if err != nil {
		t.Fatal(err)
	}
	replicas := spec.Properties["replicas"]
	if d := replicas.Default; d == nil || string(d.Raw) != "2" {
		t.Errorf("replicas default %v, want 2 (kept for the scale subresource)", d)
	}
	// kubectl scale and HPAs read and write an integer; a null gets the default.
	if replicas.Type != "integer" || replicas.XIntOrString || replicas.Pattern != "" || replicas.Nullable {
		t.Errorf("replicas %+v, want an integer that is not nullable", replicas)
	}
}

// The strings a number's key takes are numbers as users write quantities, ports and versions;
// none can end the scalar a template prints it as.
func TestNumberAsString(t *testing.T) {
	pattern := regexp.MustCompile(NumberAsString)
	for _, s := range []string{"1", "500m", "1.5Gi", "1e3", "-1", "+2", ".5", "25%", "-.5", "2.20.2", "v1.2.3-rc.1+b5", "1_000"} {
		if !pattern.MatchString(s) {
			t.Errorf("%q refused", s)
		}
	}
	for _, s := range []string{"", "two", "http-metrics", "v", " 1", "1 CPU", "1\n---", "80: x", "1#", "\"1\"", "'1'", "{1}", "[1]", "*a", "&a", "!!str", "|", ">", "%1", "- 1", "--", "1,5", "ü", "{{ .Release.Name }}"} {
		if pattern.MatchString(s) {
			t.Errorf("%q taken", s)
		}
	}
}

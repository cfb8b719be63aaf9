// Command operatorchart writes dist/chart, a Helm chart that installs the operator itself,
// generated from what `make deploy` applies (kustomize build config/default, read on stdin),
// so that the two never drift apart:
//   - the CRD goes to crds/ (Helm installs it first and never deletes it);
//   - the Namespace is left out: `helm install -n NS --create-namespace` owns it;
//   - every other object becomes a template, its namespace the release's, with the manager's
//     image, replicas, resources and WATCH_NAMESPACE taken from values.yaml;
//   - the manager Deployment is repeated for each named shard in values.yaml's shards, as
//     `make deploy SHARDS=...` (hack/shards.sh) does: its own name suffix and control-plane
//     label, and --shards/--shard.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Placeholders put into objects before marshalling, replaced by template expressions after.
const (
	nsPlaceholder        = "RELEASE-NAMESPACE-PLACEHOLDER"
	imagePlaceholder     = "IMAGE-PLACEHOLDER"
	replicasPlaceholder  = 987654321
	resourcesPlaceholder = "RESOURCES-PLACEHOLDER"
	managerPlaceholder   = "MANAGER-NAME-PLACEHOLDER"
	controlPlanePlace    = "CONTROL-PLANE-PLACEHOLDER"
	shardArgsPlaceholder = "SHARD-ARGS-PLACEHOLDER"
)

// The manager Deployment's template: once for the default shard, then once per named shard.
const (
	shardsRange = "{{- range $shard := prepend $.Values.shards \"\" }}\n---\n"
	shardsEnd   = "{{- end }}\n"
	shardArgs   = `        {{- if $.Values.shards }}
        - --shards={{ join "," $.Values.shards }}
        {{- end }}
        {{- if $shard }}
        - --shard={{ $shard }}
        {{- end }}`
)

func main() {
	out := flag.String("out", "dist/chart", "chart folder to write")
	version := flag.String("version", "0.1.0", "chart and app version")
	image := flag.String("image", "example.com/myproxy-operator", "default image repository")
	flag.Parse()
	if err := run(os.Stdin, *out, *version, *image); err != nil {
		fmt.Fprintln(os.Stderr, "operatorchart:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out, version, image string) error {
	objs, err := decode(in)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	for _, dir := range []string{"crds", "templates"} {
		if err := os.MkdirAll(filepath.Join(out, dir), 0o755); err != nil {
			return err
		}
	}
	var managerResources map[string]any
	for _, obj := range objs {
		kind, name := str(obj, "kind"), str(obj["metadata"].(map[string]any), "name")
		switch kind {
		case "Namespace":
			continue
		case "CustomResourceDefinition":
			if err := writeYAML(filepath.Join(out, "crds", name+".yaml"), obj, nil); err != nil {
				return err
			}
			continue
		case "Deployment":
			managerResources = resourcesOf(obj) // before placeNamespaces templates them
		}
		placeNamespaces(obj)
		file := fmt.Sprintf("%s-%s.yaml", strings.ToLower(kind), strings.TrimPrefix(name, "myproxy-operator-"))
		transform := templated
		if kind == "Deployment" {
			transform = func(y string) string { return shardsRange + templated(y) + shardsEnd }
		}
		if err := writeYAML(filepath.Join(out, "templates", file), obj, transform); err != nil {
			return err
		}
	}
	if managerResources == nil {
		return errors.New("no manager Deployment with resources in the input")
	}
	return writeChartFiles(out, version, image, managerResources)
}

// resourcesOf returns the resources of the manager container of a Deployment.
func resourcesOf(deployment map[string]any) map[string]any {
	podSpec := deployment["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	for _, c := range podSpec["containers"].([]any) {
		if ctr := c.(map[string]any); ctr["name"] == "manager" {
			resources, _ := ctr["resources"].(map[string]any)
			return resources
		}
	}
	return nil
}

func decode(in io.Reader) ([]map[string]any, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(in, 4096)
	var objs []map[string]any
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if obj != nil {
			objs = append(objs, obj)
		}
	}
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// placeNamespaces puts the release namespace wherever the operator's namespace appears:
// metadata.namespace and the subjects of bindings; the manager gets its templated fields.
func placeNamespaces(obj map[string]any) {
	meta := obj["metadata"].(map[string]any)
	if _, ok := meta["namespace"]; ok {
		meta["namespace"] = nsPlaceholder
	}
	if subjects, ok := obj["subjects"].([]any); ok {
		for _, s := range subjects {
			if m, ok := s.(map[string]any); ok && m["namespace"] != nil {
				m["namespace"] = nsPlaceholder
			}
		}
	}
	if str(obj, "kind") != "Deployment" {
		return
	}
	meta["name"] = managerPlaceholder
	spec := obj["spec"].(map[string]any)
	spec["replicas"] = replicasPlaceholder
	template := spec["template"].(map[string]any)
	for _, labels := range []any{meta["labels"], spec["selector"].(map[string]any)["matchLabels"],
		template["metadata"].(map[string]any)["labels"]} {
		if l, ok := labels.(map[string]any); ok && l["control-plane"] != nil {
			l["control-plane"] = controlPlanePlace
		}
	}
	podSpec := template["spec"].(map[string]any)
	for _, c := range podSpec["containers"].([]any) {
		ctr := c.(map[string]any)
		if ctr["name"] != "manager" {
			continue
		}
		ctr["image"] = imagePlaceholder
		args, _ := ctr["args"].([]any)
		ctr["args"] = append(args, shardArgsPlaceholder)
		ctr["resources"] = resourcesPlaceholder
		env, _ := ctr["env"].([]any)
		ctr["env"] = append(env, map[string]any{"name": "WATCH_NAMESPACE", "value": "WATCH-NAMESPACE-PLACEHOLDER"})
	}
}

// templated turns the placeholders into template expressions.
func templated(y string) string {
	// $ is the chart's root wherever the template stands, also in the Deployment's range.
	return strings.NewReplacer(
		nsPlaceholder, "{{ $.Release.Namespace }}",
		"app.kubernetes.io/managed-by: kustomize", "app.kubernetes.io/managed-by: {{ $.Release.Service }}",
		imagePlaceholder, `{{ $.Values.image.repository }}:{{ $.Values.image.tag | default $.Chart.AppVersion }}`,
		fmt.Sprint(replicasPlaceholder), "{{ $.Values.replicas }}",
		"resources: "+resourcesPlaceholder, "resources: {{- toYaml $.Values.resources | nindent 10 }}",
		"WATCH-NAMESPACE-PLACEHOLDER", `{{ join "," $.Values.watchNamespaces | quote }}`,
		managerPlaceholder, "myproxy-operator-controller-manager{{ if $shard }}-{{ $shard }}{{ end }}",
		controlPlanePlace, "controller-manager{{ if $shard }}-{{ $shard }}{{ end }}",
		"        - "+shardArgsPlaceholder, shardArgs,
	).Replace(y)
}

func writeYAML(path string, obj map[string]any, transform func(string) string) error {
	raw, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	text := "# Generated by `make operator-chart` from config/default. Do not edit.\n" + string(raw)
	if transform != nil {
		text = transform(text)
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

func writeChartFiles(out, version, image string, resources map[string]any) error {
	res, err := yaml.Marshal(map[string]any{"resources": resources})
	if err != nil {
		return err
	}
	chart := fmt.Sprintf(`# Generated by `+"`make operator-chart`"+`. Do not edit.
apiVersion: v2
name: myproxy-operator
description: Installs myproxy-operator, which runs nginx reverse proxies from MyProxy resources.
type: application
version: %s
appVersion: "v%s"
keywords: [operator, nginx, reverse-proxy, helm]
`, version, version)
	values := fmt.Sprintf(`# Generated by `+"`make operator-chart`"+` from config/default. Do not edit.

image:
  # -- Operator image repository.
  repository: %s
  # -- Image tag; defaults to the chart's appVersion.
  tag: ""

# -- Operator replicas. Leader election keeps one of them reconciling; the others take over.
replicas: 1

# -- Namespaces whose MyProxies the operator reconciles; empty means all namespaces.
watchNamespaces: []

# -- Named shards of a sharded fleet (docs/deploying.md): one more manager Deployment per name,
# owning the MyProxies labelled myproxy-operator.gateway.example.com/shard=<name>; the first
# Deployment is the default shard and owns every other MyProxy. Empty: it owns them all.
shards: []

# -- Resources of the manager container.
%s`, image, res)
	notes := `myproxy-operator runs in {{ .Release.Namespace }}.
Label the namespace to hold the operator to the restricted Pod Security Standard:
  kubectl label namespace {{ .Release.Namespace }} pod-security.kubernetes.io/enforce=restricted
Then create MyProxies: kubectl apply -f config/samples/gateway_v1alpha1_myproxy.yaml
`
	var errs []error
	for name, content := range map[string]string{"Chart.yaml": chart, "values.yaml": values, "templates/NOTES.txt": notes} {
		errs = append(errs, os.WriteFile(filepath.Join(out, name), []byte(content), 0o644))
	}
	return errors.Join(errs...)
}

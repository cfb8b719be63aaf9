package crdgen

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gobuffalo/flect"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
)

// Labels on every generated CRD.
var crdLabels = map[string]string{
	"app.kubernetes.io/name":    "myproxy-operator",
	"app.kubernetes.io/part-of": "myproxy-operator",
}

// maxReleaseName is Helm's limit on a release name; the release is named after the resource.
const maxReleaseName = 53

// Names returns the CRD names of a kind: those the declaration gives, and defaults (the
// lower-case kind, pluralised in English) for the rest.
func Names(gvk schema.GroupVersionKind, k *chartapi.Kind) apiextv1.CustomResourceDefinitionNames {
	n := apiextv1.CustomResourceDefinitionNames{
		Kind: gvk.Kind, ListKind: gvk.Kind + "List",
		Plural: k.Names.Plural, Singular: k.Names.Singular,
		ShortNames: k.Names.ShortNames, Categories: k.Names.Categories,
	}
	if n.Singular == "" {
		n.Singular = strings.ToLower(gvk.Kind)
	}
	if n.Plural == "" {
		n.Plural = Plural(n.Singular)
	}
	return n
}

// Plural is the plural of a lower-case singular as operator-sdk and kubebuilder form it
// (flect), so that a project moved here from operator-sdk keeps its resource names.
func Plural(singular string) string { return flect.Pluralize(singular) }

// Spec is what a kind's spec schema is made from.
type Spec struct {
	// Schema is a values.schema.json document (or one InferSchema wrote); nil gives an open
	// spec (any fields), as operator-sdk writes it.
	Schema []byte
	// Defaults are the chart's default values (values.yaml, its subcharts' coalesced in): a key
	// the schema requires and they give is not required of a resource.
	Defaults map[string]any
}

// Generate returns the CRD of a kind served by a chart with this declaration and spec schema,
// which the apiserver's own validation accepts, and a note for each check of the chart's schema
// it had to write otherwise than it would (budget.go).
func Generate(gvk schema.GroupVersionKind, k *chartapi.Kind, from Spec) (*apiextv1.CustomResourceDefinition, []string, error) {
	var keepDefaults []string
	if sc := k.Status.Scale; sc != nil {
		keepDefaults = append(keepDefaults, strings.TrimPrefix(sc.SpecReplicasPath, "."))
	}
	var tree map[string]any
	if from.Schema != nil {
		var err error
		if tree, err = specTree(from.Schema, from.Defaults, keepDefaults...); err != nil {
			return nil, nil, err
		}
	}
	var notes []string
	for {
		crd, err := build(gvk, k, tree)
		if err != nil {
			return nil, nil, err
		}
		errs := validationErrors(crd)
		if len(errs) == 0 {
			return crd, notes, nil
		}
		rewritten, err := fitBudget(tree, errs)
		if err != nil {
			return nil, nil, fmt.Errorf("the apiserver would refuse the CRD %s: %w", crd.Name, err)
		}
		notes = append(notes, rewritten...)
	}
}

// build is the CRD of a kind whose spec schema is the converted document tree (nil: open).
func build(gvk schema.GroupVersionKind, k *chartapi.Kind, tree map[string]any) (*apiextv1.CustomResourceDefinition, error) {
	names := Names(gvk, k)
	version := apiextv1.CustomResourceDefinitionVersion{
		Name: gvk.Version, Served: true, Storage: true,
		Subresources: &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}},
	}
	if sc := k.Status.Scale; sc != nil {
		version.Subresources.Scale = &apiextv1.CustomResourceSubresourceScale{
			SpecReplicasPath:   sc.SpecReplicasPath,
			StatusReplicasPath: ".status." + sc.StatusReplicas,
		}
		if sc.LabelSelector != "" {
			path := ".status." + sc.LabelSelector
			version.Subresources.Scale.LabelSelectorPath = &path
		}
	}
	spec := &apiextv1.JSONSchemaProps{Description: fmt.Sprintf("Spec defines the desired state of %s", gvk.Kind),
		Type: "object", XPreserveUnknownFields: ptrTrue()}
	var rules apiextv1.ValidationRules
	if tree != nil {
		var err error
		if spec, err = schemaProps(tree); err != nil {
			return nil, err
		}
		if len(spec.Required) == 0 {
			// An absent spec is an empty one, so that its stored defaults (replicas) still apply.
			spec.Default = &apiextv1.JSON{Raw: []byte("{}")}
		} else {
			// Helm would refuse the values without these keys; a resource must name them. A rule
			// rather than `required: [spec]`, which the apiserver checks first, alone, and whose
			// message names spec but not the keys.
			rules = append(rules, apiextv1.ValidationRule{Rule: "has(self.spec)",
				Message: fmt.Sprintf("spec: Required value: the chart requires %s, and its values.yaml gives no default",
					"spec."+strings.Join(spec.Required, ", spec."))})
		}
	}
	description := k.Description
	if description == "" {
		description = fmt.Sprintf("%s is run by one Helm release of its chart.", gvk.Kind)
	}
	rules = append(apiextv1.ValidationRules{{
		Rule:    fmt.Sprintf("self.metadata.name.size() <= %d", maxReleaseName),
		Message: fmt.Sprintf("metadata.name: must be at most %d characters (it names the Helm release)", maxReleaseName),
	}}, rules...)
	for _, v := range k.Validations {
		rules = append(rules, apiextv1.ValidationRule{Rule: v.Rule, Message: v.Message})
	}
	version.Schema = &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
		Description: description, Type: "object", XValidations: rules,
		Properties: map[string]apiextv1.JSONSchemaProps{
			"apiVersion": {Type: "string", Description: "APIVersion defines the versioned schema of this representation of an object."},
			"kind":       {Type: "string", Description: "Kind is a string value representing the REST resource this object represents."},
			"metadata":   {Type: "object"},
			"spec":       *spec,
			"status":     StatusSchema(k.Status),
		},
	}}
	for _, c := range k.PrinterColumns {
		version.AdditionalPrinterColumns = append(version.AdditionalPrinterColumns, apiextv1.CustomResourceColumnDefinition{
			Name: c.Name, Type: c.Type, Description: c.Description, JSONPath: c.JSONPath})
	}
	version.AdditionalPrinterColumns = append(version.AdditionalPrinterColumns,
		apiextv1.CustomResourceColumnDefinition{Name: "Ready", Type: "string", Description: "Every object of the release is ready.",
			JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
		apiextv1.CustomResourceColumnDefinition{Name: "Status", Type: "string", Description: "Reason of the Deployed condition.",
			JSONPath: `.status.conditions[?(@.type=="Deployed")].reason`},
		apiextv1.CustomResourceColumnDefinition{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	)
	return &apiextv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: names.Plural + "." + gvk.Group, Labels: crdLabels},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: gvk.Group, Scope: apiextv1.NamespaceScoped, Names: names,
			Versions: []apiextv1.CustomResourceDefinitionVersion{version},
		},
	}, nil
}

// helmConditions are the conditions helm-operator-plugins' reconciler sets.
const helmConditions = "Initialized, Deployed, ReleaseFailed, Irreconcilable, Paused (from the Helm reconciler)"

// StatusSchema is the schema of the status: what the Helm reconciler writes, observedGeneration,
// and the declared fields. Unknown fields are pruned.
func StatusSchema(s chartapi.Status) apiextv1.JSONSchemaProps {
	conditions := helmConditions + ", Ready (every object of the release is ready)"
	for _, c := range s.Conditions {
		conditions += ", " + c.Type
		if d := strings.TrimSuffix(c.Description, "."); d != "" {
			conditions += " (" + strings.ToLower(d[:1]) + d[1:] + ")"
		}
	}
	str := apiextv1.JSONSchemaProps{Type: "string"}
	props := map[string]apiextv1.JSONSchemaProps{
		names.StatusConditions: {
			Description: conditions + ".", Type: "array",
			Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &apiextv1.JSONSchemaProps{
				Type: "object", Required: []string{"type", "status"},
				Properties: map[string]apiextv1.JSONSchemaProps{
					"type": str, "status": str, "reason": str, "message": str,
					"lastTransitionTime": {Type: "string", Format: "date-time"},
				},
			}},
		},
		names.StatusDeployedRelease: {
			// No manifest: the rendered objects (Secrets included) are not for whoever may read
			// the custom resource (status.PluginWrites leaves it out; this prunes a stored one).
			Description: "The Helm release currently deployed.", Type: "object",
			Properties: map[string]apiextv1.JSONSchemaProps{"name": str},
		},
		names.StatusObservedGeneration: {Description: "The metadata.generation this status describes.", Type: "integer", Format: "int64"},
	}
	for _, name := range s.FieldNames() {
		f := s.Fields[name]
		p := apiextv1.JSONSchemaProps{Description: f.Description, Type: f.Type}
		switch f.Type {
		case "object":
			p.XPreserveUnknownFields = ptrTrue()
		case "array":
			p.Items = &apiextv1.JSONSchemaPropsOrArray{Schema: &apiextv1.JSONSchemaProps{XPreserveUnknownFields: ptrTrue()}}
		case "integer":
			p.Format = "int64"
		}
		props[name] = p
	}
	return apiextv1.JSONSchemaProps{Description: "Observed state, written by the operator.", Type: "object", Properties: props}
}

func ptrTrue() *bool { t := true; return &t }

// Marshal writes a CRD as YAML without what the apiserver fills in (status, creationTimestamp),
// under a header naming its sources.
func Marshal(crd *apiextv1.CustomResourceDefinition, sources ...string) ([]byte, error) {
	raw, err := json.Marshal(crd)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	delete(doc, "status")
	if meta, ok := doc["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# Generated by `make manifests` from %s.\n# Do not edit: change those and regenerate.\n",
		strings.Join(sources, " and "))
	return append([]byte(header), out...), nil
}

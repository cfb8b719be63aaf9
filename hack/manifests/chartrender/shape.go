package chartrender

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/example/myproxy-operator/internal/chartapi"
	"github.com/example/myproxy-operator/internal/names"
)

var (
	conditionType = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	fieldName     = regexp.MustCompile(`^[a-z][A-Za-z0-9]*$`)
	jsonTypes     = map[string]bool{"integer": true, "number": true, "string": true, "boolean": true, "object": true, "array": true}
)

// Reserved status fields and condition types: the Helm reconciler's and this operator's.
var (
	reservedFields     = map[string]bool{names.StatusConditions: true, names.StatusDeployedRelease: true, names.StatusObservedGeneration: true}
	reservedConditions = map[string]bool{names.ConditionInitialized: true, names.ConditionDeployed: true,
		names.ConditionReleaseFailed: true, names.ConditionIrreconcilable: true, names.ConditionPaused: true,
		names.ConditionReady: true}
)

// CheckShape checks what a declaration says beyond its expressions: names, types, the status
// fields and conditions the operator writes itself, the scale subresource's fields, the checks.
func CheckShape(k *chartapi.Kind) error {
	var errs []error
	switch k.SpecSchema {
	case "", chartapi.SpecFromValuesSchema, chartapi.SpecInferred, chartapi.SpecOpen:
	default:
		errs = append(errs, fmt.Errorf("specSchema %q: want %s, %s or %s", k.SpecSchema, chartapi.SpecFromValuesSchema, chartapi.SpecInferred, chartapi.SpecOpen))
	}
	for _, name := range k.Status.FieldNames() {
		f := k.Status.Fields[name]
		switch {
		case !fieldName.MatchString(name):
			errs = append(errs, fmt.Errorf("line %d: status field %q: a name is lowerCamelCase", f.Expression.Line, name))
		case reservedFields[name]:
			errs = append(errs, fmt.Errorf("line %d: status field %q is written by the operator itself", f.Expression.Line, name))
		case !jsonTypes[f.Type]:
			errs = append(errs, fmt.Errorf("line %d: status field %q: type %q, want one of integer, number, string, boolean, object, array", f.Expression.Line, name, f.Type))
		case f.Expression.Source == "":
			errs = append(errs, fmt.Errorf("status field %q has no expression", name))
		}
	}
	seen := map[string]bool{}
	for _, v := range k.Status.Variables {
		switch {
		case !fieldName.MatchString(v.Name):
			errs = append(errs, fmt.Errorf("line %d: variable %q: a name is lowerCamelCase", v.Expression.Line, v.Name))
		case seen[v.Name]:
			errs = append(errs, fmt.Errorf("line %d: variable %q is declared twice", v.Expression.Line, v.Name))
		}
		seen[v.Name] = true
	}
	seen = map[string]bool{}
	for _, c := range k.Status.Conditions {
		switch {
		case !conditionType.MatchString(c.Type):
			errs = append(errs, fmt.Errorf("line %d: condition type %q: UpperCamelCase expected", c.Status.Line, c.Type))
		case reservedConditions[c.Type]:
			errs = append(errs, fmt.Errorf("line %d: condition %s is set by the operator itself", c.Status.Line, c.Type))
		case seen[c.Type]:
			errs = append(errs, fmt.Errorf("line %d: condition %s is declared twice", c.Status.Line, c.Type))
		case c.Status.Source == "" || c.Reason.Source == "":
			errs = append(errs, fmt.Errorf("condition %s needs a status and a reason expression", c.Type))
		}
		seen[c.Type] = true
	}
	if s := k.Status.Scale; s != nil {
		if f, ok := k.Status.Fields[s.StatusReplicas]; !ok || f.Type != "integer" {
			errs = append(errs, fmt.Errorf("status.scale.statusReplicas: %q is not a declared integer status field", s.StatusReplicas))
		}
		if f, ok := k.Status.Fields[s.LabelSelector]; s.LabelSelector != "" && (!ok || f.Type != "string") {
			errs = append(errs, fmt.Errorf("status.scale.labelSelector: %q is not a declared string status field", s.LabelSelector))
		}
		if s.SpecReplicasPath == "" {
			errs = append(errs, errors.New("status.scale.specReplicasPath is required"))
		}
	}
	for _, c := range k.Checks {
		switch {
		case c.Secret == nil:
			errs = append(errs, fmt.Errorf("line %d: a check names its kind (secret)", c.Line))
		case c.Secret.Value == "":
			errs = append(errs, fmt.Errorf("line %d: a secret check names the value that holds the Secret's name", c.Line))
		}
	}
	return errors.Join(errs...)
}

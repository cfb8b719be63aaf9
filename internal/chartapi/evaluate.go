package chartapi

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// Evaluation is what a declaration computes for one custom resource.
type Evaluation struct {
	// Fields holds the declared fields that have a value; the others are to be left out.
	Fields map[string]any
	// Conditions are the declared conditions, in declaration order.
	Conditions []ConditionValue
	// Errors are the expressions that failed, each naming its file and line; their fields are
	// left out and their conditions Unknown.
	Errors []error
}

// ConditionValue is a computed condition.
type ConditionValue struct {
	Type, Status, Reason, Message string
}

// Evaluate computes the declared status of a custom resource from its live release objects.
func (c *Compiled) Evaluate(self map[string]any, objects []map[string]any) Evaluation {
	list := make([]any, len(objects))
	for i, o := range objects {
		list[i] = o
	}
	variables := map[string]any{}
	vars := map[string]any{VarSelf: self, VarObjects: list, VarVariables: variables}
	out := Evaluation{Fields: map[string]any{}}
	for i, v := range c.Kind.Status.Variables {
		val, _, err := c.variables[i].Eval(vars)
		if err != nil {
			// Expressions reading it fail too, naming it as a missing key.
			out.Errors = append(out.Errors, c.Kind.errorAt(v.Expression.Line, "status.variables."+v.Name, err))
			continue
		}
		variables[v.Name] = val
	}
	for _, name := range c.Kind.Status.FieldNames() {
		f := c.Kind.Status.Fields[name]
		v, err := evaluate(c.fields[name], vars, f.Type)
		if err != nil {
			out.Errors = append(out.Errors, c.Kind.errorAt(f.Expression.Line, "status.fields."+name, err))
			continue
		}
		if v != nil {
			out.Fields[name] = v
		}
	}
	for _, cond := range c.conditions {
		value, err := evaluateCondition(cond, vars)
		if err != nil {
			out.Errors = append(out.Errors, c.Kind.errorAt(cond.Status.Line, "status.conditions["+cond.Type+"]", err))
			value = ConditionValue{Type: cond.Type, Status: "Unknown", Reason: "ExpressionFailed", Message: err.Error()}
		}
		out.Conditions = append(out.Conditions, value)
	}
	return out
}

func evaluateCondition(c compiledCondition, vars map[string]any) (ConditionValue, error) {
	status, err := evaluate(c.status, vars, "boolean")
	if err != nil {
		return ConditionValue{}, fmt.Errorf("status: %w", err)
	}
	reason, err := evaluate(c.reason, vars, "string")
	if err != nil {
		return ConditionValue{}, fmt.Errorf("reason: %w", err)
	}
	value := ConditionValue{Type: c.Type, Status: "False"}
	if status == true {
		value.Status = "True"
	}
	value.Reason, _ = reason.(string)
	if !conditionType.MatchString(value.Reason) {
		return ConditionValue{}, fmt.Errorf("reason %q: UpperCamelCase expected", value.Reason)
	}
	message, err := evaluate(c.message, vars, "string") // nil, without a message expression
	if err != nil {
		return ConditionValue{}, fmt.Errorf("message: %w", err)
	}
	value.Message, _ = message.(string)
	return value, nil
}

// evaluate runs one program and converts its result to JSON form, checking it has the wanted
// JSON schema type. A null or an empty optional gives nil.
func evaluate(p cel.Program, vars map[string]any, want string) (any, error) {
	if p == nil {
		return nil, nil
	}
	v, _, err := p.Eval(vars)
	if err != nil {
		return nil, err
	}
	if opt, ok := v.(*types.Optional); ok {
		if !opt.HasValue() {
			return nil, nil
		}
		v = opt.GetValue()
	}
	if v == types.NullValue {
		return nil, nil
	}
	native, err := toJSON(v)
	if err != nil {
		return nil, err
	}
	if !isJSONType(native, want) {
		return nil, fmt.Errorf("the value %v is a %s, want %s", short(v), v.Type(), want)
	}
	return native, nil
}

func isJSONType(v any, want string) bool {
	switch v.(type) {
	case int64:
		return want == "integer" || want == "number"
	case float64:
		return want == "number"
	case string:
		return want == "string"
	case bool:
		return want == "boolean"
	case map[string]any:
		return want == "object"
	case []any:
		return want == "array"
	}
	return false
}

func short(v ref.Val) string {
	s := fmt.Sprint(v.Value())
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}

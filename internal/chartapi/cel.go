package chartapi

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// The variables an expression reads.
const (
	// VarSelf is the custom resource.
	VarSelf = "self"
	// VarObjects is the list of the live objects of the release, as the cluster has them now
	// (status included); empty until the release is deployed.
	VarObjects = "objects"
	// VarVariables holds the declared variables by name.
	VarVariables = "variables"
)

// environment is the CEL environment of every expression: the variables, CEL's optional
// values (o.?status.?replicas.orValue(0)), the strings and lists extensions, and two functions
// of this operator: <list>.sum() adds numbers, labelSelector(<selector>) writes a
// metav1.LabelSelector (a Deployment's spec.selector) in the form the scale subresource wants.
func environment() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(VarSelf, cel.DynType),
		cel.Variable(VarObjects, cel.ListType(cel.DynType)),
		cel.Variable(VarVariables, cel.MapType(cel.StringType, cel.DynType)),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Lists(),
		cel.Function("sum", cel.MemberOverload("list_sum", []*cel.Type{cel.ListType(cel.DynType)}, cel.DynType,
			cel.UnaryBinding(sum))),
		cel.Function("labelSelector", cel.Overload("label_selector", []*cel.Type{cel.DynType}, cel.StringType,
			cel.UnaryBinding(labelSelector))),
	)
}

// sum adds the numbers of a list. Integers and doubles mix: the sum turns double at the first
// double. The total is only ever an Int or a Double, whose Add refuses any other item.
func sum(v ref.Val) ref.Val {
	list, ok := v.(traits.Lister)
	if !ok {
		return types.NewErr("sum: not a list")
	}
	var total ref.Val = types.Int(0)
	for it := list.Iterator(); it.HasNext() == types.True; {
		item := it.Next()
		if t := item.Type(); t != total.Type() && (t == types.IntType || t == types.DoubleType) {
			total, item = total.ConvertToType(types.DoubleType), item.ConvertToType(types.DoubleType)
		}
		total = total.(traits.Adder).Add(item)
		if types.IsError(total) {
			return total
		}
	}
	return total
}

func labelSelector(v ref.Val) ref.Val {
	native, err := toJSON(v)
	if err != nil {
		return types.NewErr("labelSelector: %v", err)
	}
	m, ok := native.(map[string]any)
	if !ok {
		return types.NewErr("labelSelector: want a label selector object, got %T", native)
	}
	var sel metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &sel); err != nil {
		return types.NewErr("labelSelector: %v", err)
	}
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		return types.NewErr("labelSelector: %v", err)
	}
	return types.String(s.String())
}

// toJSON converts a CEL value into the form of a decoded JSON document (as unstructured objects
// hold them: whole numbers are int64), so that a computed field compares equal to the same
// value read back from the apiserver.
func toJSON(v ref.Val) (any, error) {
	pb, err := v.ConvertToNative(reflect.TypeOf(&structpb.Value{}))
	if err != nil {
		return nil, err
	}
	raw, err := pb.(*structpb.Value).MarshalJSON()
	if err != nil {
		return nil, err
	}
	var out any
	err = utiljson.Unmarshal(raw, &out)
	return out, err
}

// Compiled is a declaration whose expressions are ready to evaluate.
type Compiled struct {
	Kind *Kind
	// programs are the compiled expressions, by source: the same source is the same program
	// wherever it is declared (the type it must have is checked where it is declared).
	programs   map[string]cel.Program
	fieldNames []string // sorted: errors come in a stable order
}

// Compile compiles every expression of the declaration; the error names the file and line of
// each one that does not compile or whose type is not the declared one.
func Compile(k *Kind) (*Compiled, error) {
	env, err := environment()
	if err != nil {
		return nil, err
	}
	c := &Compiled{Kind: k, programs: map[string]cel.Program{}, fieldNames: k.Status.FieldNames()}
	var errs []error
	compile := func(what string, e Expr, want *cel.Type) {
		if e.Source == "" {
			return
		}
		p, err := compileOne(env, e, want)
		if err != nil {
			errs = append(errs, k.errorAt(e.Line, what, err))
		}
		c.programs[e.Source] = p
	}
	for _, v := range k.Status.Variables {
		if v.Expression.Source == "" { // a field or a message may have none; a variable has its expression
			errs = append(errs, k.errorAt(v.Expression.Line, "status.variables."+v.Name, errors.New("expression is required")))
		}
		compile("status.variables."+v.Name, v.Expression, cel.DynType)
	}
	for _, name := range c.fieldNames {
		f := k.Status.Fields[name]
		compile("status.fields."+name, f.Expression, celTypes[f.Type])
	}
	for _, cond := range k.Status.Conditions {
		what := "status.conditions[" + cond.Type + "]."
		compile(what+"status", cond.Status, cel.BoolType)
		compile(what+"reason", cond.Reason, cel.StringType)
		compile(what+"message", cond.Message, cel.StringType)
	}
	errs = append(errs, c.compileVersions(env))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// celTypes are the CEL types of the JSON schema types a field may declare.
var celTypes = map[string]*cel.Type{
	"integer": cel.IntType, "number": cel.DoubleType, "string": cel.StringType, "boolean": cel.BoolType,
	"object": cel.MapType(cel.StringType, cel.DynType), "array": cel.ListType(cel.DynType),
}

func compileOne(env *cel.Env, e Expr, want *cel.Type) (cel.Program, error) {
	ast, iss := env.Compile(e.Source)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if out := ast.OutputType(); want != cel.DynType && !typeFits(out, want) {
		return nil, fmt.Errorf("the expression is of type %s, want %s", out, want)
	}
	return env.Program(ast, cel.EvalOptions(cel.OptOptimize))
}

// typeFits reports whether a statically known result type can be the wanted one: dyn fits
// anything (it is checked on evaluation), null fits anything (it is no value), an
// optional fits through its value, and a whole number may be a number.
func typeFits(out, want *cel.Type) bool {
	if out.Kind() == types.DynKind || out.Kind() == types.NullTypeKind || out.IsAssignableType(want) {
		return true
	}
	if out.Kind() == types.OpaqueKind && out.TypeName() == "optional_type" && len(out.Parameters()) == 1 {
		return typeFits(out.Parameters()[0], want)
	}
	return want == cel.DoubleType && out == cel.IntType
}

func (k *Kind) errorAt(line int, what string, err error) error {
	return fmt.Errorf("%s:%d: %s: %w", cmp.Or(k.File, FileName), line, what, err)
}

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
	variables := map[string]any{}
	vars := map[string]any{VarSelf: self, VarObjects: objects, VarVariables: variables}
	out := Evaluation{Fields: map[string]any{}}
	for _, v := range c.Kind.Status.Variables {
		if val, _, err := c.programs[v.Expression.Source].Eval(vars); err != nil {
			// Expressions reading it fail too, naming it as a missing key.
			out.Errors = append(out.Errors, c.Kind.errorAt(v.Expression.Line, "status.variables."+v.Name, err))
		} else {
			variables[v.Name] = val
		}
	}
	for _, name := range c.fieldNames {
		f := c.Kind.Status.Fields[name]
		if v, err := c.evaluate(f.Expression, vars, f.Type); err != nil {
			out.Errors = append(out.Errors, c.Kind.errorAt(f.Expression.Line, "status.fields."+name, err))
		} else if v != nil {
			out.Fields[name] = v
		}
	}
	for _, cond := range c.Kind.Status.Conditions {
		value, err := c.evaluateCondition(cond, vars)
		if err != nil {
			out.Errors = append(out.Errors, c.Kind.errorAt(cond.Status.Line, "status.conditions["+cond.Type+"]", err))
			value = ConditionValue{Type: cond.Type, Status: "Unknown", Reason: "ExpressionFailed", Message: err.Error()}
		}
		out.Conditions = append(out.Conditions, value)
	}
	return out
}

func (c *Compiled) evaluateCondition(cond Condition, vars map[string]any) (ConditionValue, error) {
	status, err := c.evaluate(cond.Status, vars, "boolean")
	if err != nil {
		return ConditionValue{}, fmt.Errorf("status: %w", err)
	}
	reason, err := c.evaluate(cond.Reason, vars, "string")
	if err != nil {
		return ConditionValue{}, fmt.Errorf("reason: %w", err)
	}
	value := ConditionValue{Type: cond.Type, Status: "False"}
	if status == true {
		value.Status = "True"
	}
	value.Reason, _ = reason.(string)
	if !conditionType.MatchString(value.Reason) {
		return ConditionValue{}, fmt.Errorf("reason %q: UpperCamelCase expected", value.Reason)
	}
	message, err := c.evaluate(cond.Message, vars, "string") // nil, without a message expression
	if err != nil {
		return ConditionValue{}, fmt.Errorf("message: %w", err)
	}
	value.Message, _ = message.(string)
	return value, nil
}

// evaluate runs the program of an expression and converts its result to JSON form, checking
// it has the wanted JSON schema type (any, when want is anyJSON). No expression, a null or an
// empty optional gives nil.
func (c *Compiled) evaluate(e Expr, vars map[string]any, want string) (any, error) {
	p := c.programs[e.Source]
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
	if want != anyJSON && !isJSONType(native, want) {
		return nil, fmt.Errorf("the value %v is a %s, want %s", short(v), v.Type(), want)
	}
	return native, nil
}

// anyJSON is the want of evaluate that takes any JSON value: no field type is spelt so.
const anyJSON = "*"

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

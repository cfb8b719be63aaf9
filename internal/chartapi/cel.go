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

func sum(v ref.Val) ref.Val {
	list, ok := v.(traits.Lister)
	if !ok {
		return types.NewErr("sum: not a list")
	}
	var total ref.Val = types.Int(0)
	it := list.Iterator()
	for it.HasNext() == types.True {
		item := it.Next()
		adder, ok := total.(traits.Adder)
		if !ok {
			return types.NewErr("sum: cannot add %s", item.Type())
		}
		if _, isDouble := item.(types.Double); isDouble {
			if i, isInt := total.(types.Int); isInt {
				adder = types.Double(i)
			}
		}
		if i, isInt := item.(types.Int); isInt {
			if _, isDouble := total.(types.Double); isDouble {
				item = types.Double(i)
			}
		}
		total = adder.Add(item)
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
	Kind       *Kind
	variables  []cel.Program
	fields     map[string]cel.Program
	conditions []compiledCondition
}

type compiledCondition struct {
	Condition
	status, reason, message cel.Program
}

// Compile compiles every expression of the declaration; the error names the file and line of
// each one that does not compile or whose type is not the declared one.
func Compile(k *Kind) (*Compiled, error) {
	env, err := environment()
	if err != nil {
		return nil, err
	}
	c := &Compiled{Kind: k, fields: map[string]cel.Program{}}
	var errs []error
	compile := func(what string, e Expr, want *cel.Type) cel.Program {
		if e.Source == "" {
			return nil
		}
		p, err := compileOne(env, e, want)
		if err != nil {
			errs = append(errs, k.errorAt(e.Line, what, err))
		}
		return p
	}
	for _, v := range k.Status.Variables {
		c.variables = append(c.variables, compile("status.variables."+v.Name, v.Expression, cel.DynType))
	}
	for _, name := range k.Status.FieldNames() {
		f := k.Status.Fields[name]
		c.fields[name] = compile("status.fields."+name, f.Expression, celTypes[f.Type])
	}
	for _, cond := range k.Status.Conditions {
		what := "status.conditions[" + cond.Type + "]."
		c.conditions = append(c.conditions, compiledCondition{Condition: cond,
			status:  compile(what+"status", cond.Status, cel.BoolType),
			reason:  compile(what+"reason", cond.Reason, cel.StringType),
			message: compile(what+"message", cond.Message, cel.StringType),
		})
	}
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

package chartapi

import (
	"strings"
	"testing"
)

func TestSum(t *testing.T) {
	k, err := Parse([]byte("status:\n  fields:\n    a: {type: integer, expression: '[1, 2, 3].sum()'}\n    b: {type: number, expression: '[1, 2.5].sum()'}\n    c: {type: integer, expression: '[].sum()'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compile(k)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Evaluate(nil, nil)
	if got.Fields["a"] != int64(6) || got.Fields["b"] != 3.5 || got.Fields["c"] != int64(0) || len(got.Errors) > 0 {
		t.Errorf("%+v", got)
	}
}

func TestAVariableWithoutAnExpressionIsRefused(t *testing.T) {
	k, err := Parse([]byte("status:\n  variables:\n  - name: ready\n  fields:\n    a: {type: integer, expression: '1'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(k); err == nil || !strings.Contains(err.Error(), "status.variables.ready: expression is required") {
		t.Errorf("compiling a variable without an expression: %v, want it refused by name", err)
	}
}

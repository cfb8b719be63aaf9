package caches

import (
	"testing"
)

func TestEqual(t *testing.T) {
	ignore := Ignore{
		"status": nil,
		"metadata": Ignore{
			"resourceVersion": nil,
			"annotations":     Ignore{"deployment.kubernetes.io/revision": nil},
		},
		"count": func(a, b any) bool { return (a == nil) == (b == nil) }, // only presence counts
	}
	base := func() map[string]any {
		return map[string]any{
			"metadata": map[string]any{"name": "p", "resourceVersion": "1", "labels": map[string]any{"a": "b"}},
			"spec":     map[string]any{"replicas": int64(1)},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(m map[string]any)
		equal  bool
	}{
		{name: "identical", change: func(map[string]any) {}, equal: true},
		{name: "ignored top-level field added", change: func(m map[string]any) { m["status"] = map[string]any{"x": 1} }, equal: true},
		{name: "ignored nested field changed", change: func(m map[string]any) { m["metadata"].(map[string]any)["resourceVersion"] = "2" }, equal: true},
		{name: "ignored annotation where there were none", change: func(m map[string]any) {
			m["metadata"].(map[string]any)["annotations"] = map[string]any{"deployment.kubernetes.io/revision": "1"}
		}, equal: true},
		{name: "another annotation", change: func(m map[string]any) {
			m["metadata"].(map[string]any)["annotations"] = map[string]any{"team": "x"}
		}, equal: false},
		{name: "spec changed", change: func(m map[string]any) { m["spec"] = map[string]any{"replicas": int64(2)} }, equal: false},
		{name: "spec removed", change: func(m map[string]any) { delete(m, "spec") }, equal: false},
		{name: "label changed", change: func(m map[string]any) { m["metadata"].(map[string]any)["labels"] = map[string]any{"a": "c"} }, equal: false},
		{name: "metadata not an object", change: func(m map[string]any) { m["metadata"] = "x" }, equal: false},
		{name: "custom equality: present", change: func(m map[string]any) { m["count"] = 1 }, equal: false},
	} {
		a, b := base(), base()
		tc.change(b)
		if got := Equal(a, b, ignore); got != tc.equal {
			t.Errorf("%s: Equal = %v, want %v", tc.name, got, tc.equal)
		}
		if got := Equal(b, a, ignore); got != tc.equal {
			t.Errorf("%s (swapped): Equal = %v, want %v", tc.name, got, tc.equal)
		}
	}
	a, b := base(), base()
	a["count"], b["count"] = 1, 2
	if !Equal(a, b, ignore) {
		t.Error("the custom equality was not used")
	}
}

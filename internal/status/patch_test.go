package status

import (
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// Applying the patch to current gives desired, whatever changed, and unchanged fields (the
// plugins' deployedRelease with its manifest) are not sent.
func TestStatusPatch(t *testing.T) {
	manifest := strings.Repeat("apiVersion: v1\n", 100)
	current := map[string]any{
		"conditions":      []any{map[string]any{"type": "Deployed", "status": "True"}},
		"deployedRelease": map[string]any{"name": "edge", "manifest": manifest},
		"replicas":        int64(1),
		"selector":        "app=edge",
		"nested":          map[string]any{"keep": "a", "drop": "b", "change": "c"},
	}
	desired := map[string]any{
		"conditions":      []any{map[string]any{"type": "Deployed", "status": "True"}, map[string]any{"type": "Available"}},
		"deployedRelease": map[string]any{"name": "edge", "manifest": manifest},
		"replicas":        int64(2),
		"url":             "http://edge.team.svc:80",
		"nested":          map[string]any{"keep": "a", "change": "d", "add": "e"},
	}
	p, err := statusPatch(current, desired)
	if err != nil {
		t.Fatal(err)
	}
	var patch map[string]any
	if err := json.Unmarshal(p, &patch); err != nil {
		t.Fatal(err)
	}
	if _, sent := patch["deployedRelease"]; sent {
		t.Error("an unchanged field was sent")
	}
	if v, sent := patch["selector"]; !sent || v != nil {
		t.Errorf("a removed field: %v, want null", v)
	}
	cur, _ := json.Marshal(current)
	got, err := jsonpatch.MergePatch(cur, p)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(desired)
	if !jsonpatch.Equal(got, want) {
		t.Errorf("patched:\n%s\nwant:\n%s", got, want)
	}
}

// Equal statuses give an empty patch: the controller then writes nothing.
func TestStatusPatchOfEqualStatusesIsNil(t *testing.T) {
	st := map[string]any{"replicas": int64(1), "nested": map[string]any{"a": "b"}, "list": []any{"x"}}
	p, err := statusPatch(st, map[string]any{"replicas": int64(1), "nested": map[string]any{"a": "b"}, "list": []any{"x"}})
	if err != nil || p != nil {
		t.Errorf("patch of equal statuses: %s, %v", p, err)
	}
}

package status

import "reflect"

// MergePatch returns the JSON merge patch (RFC 7386) that turns current into desired.
func MergePatch(current, desired map[string]any) map[string]any {
	patch := map[string]any{}
	for k, want := range desired {
		have, had := current[k]
		if had && reflect.DeepEqual(have, want) {
			continue
		}
		haveMap, isMap := have.(map[string]any)
		wantMap, wantIsMap := want.(map[string]any)
		if isMap && wantIsMap {
			patch[k] = MergePatch(haveMap, wantMap)
			continue
		}
		patch[k] = want
	}
	for k := range current {
		if _, kept := desired[k]; !kept {
			patch[k] = nil
		}
	}
	return patch
}

// Equal tells whether two unstructured objects differ beyond fields that do not matter to the
// reader, without copying them: event filters run on every update of every watched object.

package caches

import "reflect"

// Ignore says which fields of an object a comparison leaves out. The value of a key is nil to
// leave the whole field out, an Ignore to compare inside the field leaving out what that says
// (a missing field then equals an empty one), or a func(a, b any) bool that says whether the
// two values are equal (either may be nil when missing).
type Ignore map[string]any

// Equal reports whether a and b are equal but for the ignored fields.
func Equal(a, b map[string]any, ignore Ignore) bool {
	for k, av := range a {
		if !equalField(k, av, b[k], ignore) {
			return false
		}
	}
	for k, bv := range b {
		if _, inA := a[k]; !inA && !equalField(k, nil, bv, ignore) {
			return false
		}
	}
	return true
}

func equalField(key string, a, b any, ignore Ignore) bool {
	rule, ruled := ignore[key]
	switch r := rule.(type) {
	case nil:
		// A field ruled nil is left out; a missing field (nil) equals only a missing one.
		return ruled || reflect.DeepEqual(a, b)
	case Ignore:
		am, aOK := a.(map[string]any)
		bm, bOK := b.(map[string]any)
		if (a != nil && !aOK) || (b != nil && !bOK) {
			return reflect.DeepEqual(a, b) // not objects: nothing inside to leave out
		}
		return Equal(am, bm, r)
	case func(a, b any) bool:
		return r(a, b)
	default:
		panic("objcompare: an Ignore value must be nil, an Ignore or a func(a, b any) bool")
	}
}

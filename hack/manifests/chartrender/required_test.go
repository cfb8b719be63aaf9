package chartrender

import (
	"path/filepath"
	"reflect"
	"testing"
)

// A chart whose schema requires keys that values.yaml gives no default for renders offline with
// those keys filled in from the schema, as a resource must give them; the chart's own defaults
// are not overridden.
func TestAChartThatRequiresKeysRendersWithThemFilledIn(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "test", "integration", "testdata", "corpus", "requiredpolicy")
	renderings, err := Render(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(renderings) != 1 || renderings[0].ValuesFile != "" {
		t.Fatalf("%d renderings (%+v), want the defaults alone", len(renderings), renderings)
	}
	want := map[string]any{"policy": "audit"} // the first value the enum admits; timeoutSeconds has a default
	if got := renderings[0].Values; !reflect.DeepEqual(got, want) {
		t.Errorf("rendered with %v, want %v", got, want)
	}
	if _, err := SwitchedOn(dir); err != nil {
		t.Errorf("every boolean value on: %v", err)
	}
}

package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"
)

func TestPackageOf(t *testing.T) {
	for function, want := range map[string]string{
		"k8s.io/client-go/rest.(*Request).Do": "k8s.io/client-go/rest",
		"runtime.mallocgc":                    "runtime",
		"encoding/json.(*decodeState).object": "encoding/json",
		"sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller[go.shape.struct { k8s.io/x/y.Z }]).Start": "sigs.k8s.io/controller-runtime/pkg/internal/controller",
		"main.main.func1": "main",
	} {
		if got := packageOf(function); got != want {
			t.Errorf("packageOf(%q) = %q, want %q", function, got, want)
		}
	}
}

// Shares are counted from the samples: flat by the innermost frame, cum once per sample.
func TestByPackage(t *testing.T) {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	gc, dec, rec := fn(1, "runtime.gcBgMarkWorker"), fn(2, "encoding/json.Unmarshal"), fn(3, "example.com/op/reconcile.Run")
	loc := func(id uint64, f *profile.Function) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: f}}}
	}
	lgc, ldec, lrec := loc(1, gc), loc(2, dec), loc(3, rec)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lgc}, Value: []int64{1, 30}},
			{Location: []*profile.Location{ldec, lrec}, Value: []int64{1, 50}},
			{Location: []*profile.Location{lrec}, Value: []int64{1, 20}},
		},
		Location: []*profile.Location{lgc, ldec, lrec}, Function: []*profile.Function{gc, dec, rec},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}, Period: 1,
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	shares, total, err := byPackage([]string{path, path}, "cpu", 10)
	if err != nil {
		t.Fatal(err)
	}
	if total != 200 {
		t.Errorf("total %v, want 200 (two merged profiles of 100)", total)
	}
	want := map[string][2]float64{"encoding/json": {0.5, 0.5}, "runtime": {0.3, 0.3}, "example.com/op/reconcile": {0.2, 0.7}}
	if len(shares) != len(want) {
		t.Fatalf("shares %v, want %v", shares, want)
	}
	for _, s := range shares {
		w := want[s.Package]
		if math.Abs(s.Flat-w[0]) > 1e-9 || math.Abs(s.Cum-w[1]) > 1e-9 {
			t.Errorf("%s: flat %v cum %v, want %v", s.Package, s.Flat, s.Cum, w)
		}
	}
	if shares[0].Package != "encoding/json" {
		t.Errorf("first share %s, want the largest flat share first", shares[0].Package)
	}
}

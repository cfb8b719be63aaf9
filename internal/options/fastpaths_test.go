package options

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestFastPathsFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want FastPaths
		err  bool
	}{
		{args: nil, want: AllFastPaths},
		{args: []string{"--fast-paths"}, want: AllFastPaths},
		{args: []string{"--fast-paths=true"}, want: AllFastPaths},
		{args: []string{"--fast-paths=false"}, want: FastPaths{}},
		{args: []string{"--fast-paths=digests,empty-history,digests"}, want: FastPaths{FastDigests, FastEmptyHistory}},
		{args: []string{"--fast-paths=event-filters"}, err: true},
		{args: []string{"--fast-paths=digest"}, err: true},
	} {
		var o Options
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.BindFlags(fs)
		err := fs.Parse(tt.args)
		if (err != nil) != tt.err {
			t.Errorf("%v: error %v", tt.args, err)
			continue
		}
		if !tt.err && !slices.Equal(o.FastPaths, tt.want) {
			t.Errorf("%v: %v, want %v", tt.args, o.FastPaths, tt.want)
		}
	}
	none := FastPaths{}
	if none.On(FastDigests) || !slices.Contains(AllFastPaths, FastDigests) || none.String() != "false" {
		t.Errorf("an empty set takes a fast path, or prints as %q", none.String())
	}
}

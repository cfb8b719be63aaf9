package options

import (
	"flag"
	"io"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestWatchNamespaces(t *testing.T) {
	cases := []struct {
		value string
		want  []string // nil: all namespaces
	}{
		{value: "", want: nil},
		{value: " , ,", want: nil},
		{value: "team-a", want: []string{"team-a"}},
		{value: "team-a,team-b", want: []string{"team-a", "team-b"}},
		{value: " team-a , team-b ,team-a,", want: []string{"team-a", "team-b"}},
	}
	for _, c := range cases {
		got := WatchNamespaces(c.value)
		if c.want == nil {
			if got != nil {
				t.Errorf("WatchNamespaces(%q) = %v, want nil (all namespaces)", c.value, got)
			}
			continue
		}
		var names []string
		for ns := range got {
			names = append(names, ns)
		}
		sort.Strings(names)
		if !reflect.DeepEqual(names, c.want) {
			t.Errorf("WatchNamespaces(%q) = %v, want %v", c.value, names, c.want)
		}
	}
}

func TestFlagsMatchStockHelmOperator(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs)
	for _, name := range []string{"watches-file", "leader-elect", "leader-election-id", "leader-election-namespace",
		"metrics-bind-address", "metrics-secure", "health-probe-bind-address", "max-concurrent-reconciles",
		"reconcile-period"} {
		if fs.Lookup(name) == nil {
			t.Errorf("flag --%s of the stock helm-operator is missing", name)
		}
	}
	err := fs.Parse([]string{"--watches-file=/w.yaml", "--leader-elect", "--reconcile-period=2m", "--max-concurrent-reconciles=8"})
	if err != nil {
		t.Fatal(err)
	}
	if o.WatchesFile != "/w.yaml" || !o.LeaderElect || o.ReconcilePeriod != 2*time.Minute || o.MaxConcurrentReconciles != 8 {
		t.Errorf("parsed options = %+v", o)
	}
}

func TestValidate(t *testing.T) {
	valid := func() Options {
		var o Options
		o.BindFlags(flag.NewFlagSet("test", flag.ContinueOnError))
		return o
	}
	cases := []struct {
		name   string
		mutate func(*Options)
		errHas string
	}{
		{name: "defaults", mutate: func(*Options) {}, errHas: ""},
		{name: "zero workers", mutate: func(o *Options) { o.MaxConcurrentReconciles = 0 }, errHas: "--max-concurrent-reconciles"},
		{name: "negative period", mutate: func(o *Options) { o.ReconcilePeriod = -time.Second }, errHas: "--reconcile-period"},
		{name: "negative history", mutate: func(o *Options) { o.MaxReleaseHistory = -1 }, errHas: "--max-release-history"},
		{name: "zero qps", mutate: func(o *Options) { o.KubeAPIQPS = 0 }, errHas: "--kube-api-qps"},
		{name: "zero burst", mutate: func(o *Options) { o.KubeAPIBurst = 0 }, errHas: "--kube-api-burst"},
		{name: "renew after lease", mutate: func(o *Options) { o.LeaderElect = true; o.RenewDeadline = o.LeaseDuration }, errHas: "renew-deadline"},
	}
	for _, c := range cases {
		o := valid()
		c.mutate(&o)
		err := o.Validate()
		if c.errHas == "" && err != nil {
			t.Errorf("%s: unexpected error %v", c.name, err)
		}
		if c.errHas != "" && (err == nil || !strings.Contains(err.Error(), c.errHas)) {
			t.Errorf("%s: error %v, want one naming %s", c.name, err, c.errHas)
		}
	}
}

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

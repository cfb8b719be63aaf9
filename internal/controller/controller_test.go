package controller

import (
	"testing"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/myproxy-operator/internal/options"
)

func TestSettingsFor(t *testing.T) {
	yes, no := true, false
	two := 2
	defaults := options.Options{MaxConcurrentReconciles: 4, ReconcilePeriod: 0}
	cases := []struct {
		name  string
		watch watches.Watch
		want  Settings
	}{
		{name: "defaults: dependent watches on", watch: watches.Watch{}, want: Settings{MaxConcurrentReconciles: 4}},
		{name: "watchDependentResources true keeps them", watch: watches.Watch{WatchDependentResources: &yes},
			want: Settings{MaxConcurrentReconciles: 4}},
		{name: "watchDependentResources false skips them", watch: watches.Watch{WatchDependentResources: &no},
			want: Settings{MaxConcurrentReconciles: 4, SkipDependentWatches: true}},
		{name: "entry overrides workers and period",
			watch: watches.Watch{MaxConcurrentReconciles: &two, ReconcilePeriod: &metav1.Duration{Duration: time.Minute}},
			want:  Settings{MaxConcurrentReconciles: 2, ReconcilePeriod: time.Minute}},
	}
	for _, c := range cases {
		if got := SettingsFor(c.watch, defaults); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

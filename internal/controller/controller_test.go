package controller

import (
	"testing"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSettingsFor(t *testing.T) {
	yes, no := true, false
	two := 2
	defaults := Defaults{MaxConcurrentReconciles: 4, ReconcilePeriod: 0}
	cases := []struct {
		name  string
		watch watches.Watch
		want  Settings
	}{
		{"defaults: dependent watches on", watches.Watch{}, Settings{MaxConcurrentReconciles: 4}},
		{"watchDependentResources true keeps them", watches.Watch{WatchDependentResources: &yes}, Settings{MaxConcurrentReconciles: 4}},
		{"watchDependentResources false skips them", watches.Watch{WatchDependentResources: &no},
			Settings{MaxConcurrentReconciles: 4, SkipDependentWatches: true}},
		{"entry overrides workers and period",
			watches.Watch{MaxConcurrentReconciles: &two, ReconcilePeriod: &metav1.Duration{Duration: time.Minute}},
			Settings{MaxConcurrentReconciles: 2, ReconcilePeriod: time.Minute}},
	}
	for _, c := range cases {
		if got := SettingsFor(c.watch, defaults); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	"github.com/example/myproxy-operator/internal/names"
)

func withAnnotations(a map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAnnotations(a)
	return u
}

func TestValidateNamesTheAnnotation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a       map[string]string
		wantErr string
	}{
		{name: "none", a: nil},
		{name: "valid", a: map[string]string{names.UpgradeForce: "true", names.RollbackForce: "false", names.ReconcilePeriod: "30s", names.UpgradeDescription: "anything"}},
		{name: "not a boolean", a: map[string]string{names.UninstallWait: "yes"}, wantErr: "metadata.annotations[" + names.UninstallWait + "]"},
		{name: "not a duration", a: map[string]string{names.ReconcilePeriod: "5 minutes"}, wantErr: "metadata.annotations[" + names.ReconcilePeriod + "]"},
		{name: "negative duration", a: map[string]string{names.ReconcilePeriod: "-1s"}, wantErr: names.ReconcilePeriod},
		{name: "pause not a boolean", a: map[string]string{names.PauseReconcile: "please"}, wantErr: names.PauseReconcile},
		{name: "period below the floor", a: map[string]string{names.ReconcilePeriod: "1ns"}, wantErr: "shorter than the operator's --min-reconcile-period 10s"},
		{name: "period at the floor", a: map[string]string{names.ReconcilePeriod: "10s"}},
		{name: "period off", a: map[string]string{names.ReconcilePeriod: "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateAnnotations(withAnnotations(tc.a), 10*time.Second)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
}

func TestPeriodFallsBackWhenAbsent(t *testing.T) {
	if got := period(withAnnotations(nil), time.Minute, time.Second); got != time.Minute {
		t.Errorf("no annotation: period %s, want the watch's", got)
	}
	if got := period(withAnnotations(map[string]string{names.ReconcilePeriod: "2s"}), time.Minute, time.Second); got != 2*time.Second {
		t.Errorf("annotation 2s: period %s", got)
	}
	if got := period(withAnnotations(map[string]string{names.ReconcilePeriod: "0s"}), time.Minute, time.Second); got != 0 {
		t.Errorf("annotation 0s turns the watch's period off, got %s", got)
	}
	if got := period(withAnnotations(map[string]string{names.ReconcilePeriod: "1ns"}), time.Minute, time.Second); got != time.Minute {
		t.Errorf("annotation below the floor: period %s, want the watch's", got)
	}
}

func TestPauseHandlerRecordsTransitions(t *testing.T) {
	recorder := record.NewFakeRecorder(10)
	pause := PauseHandler(recorder)
	obj := withAnnotations(map[string]string{names.PauseReconcile: "true"})
	if paused, _ := pause(context.Background(), obj); !paused {
		t.Fatal("not paused with the annotation true")
	}
	if ev := <-recorder.Events; !strings.Contains(ev, names.ReasonReconcilePaused) {
		t.Errorf("event %q, want %s", ev, names.ReasonReconcilePaused)
	}
	// The plugins set Paused=True; while it stays paused, no more Events.
	_ = unstructured.SetNestedSlice(obj.Object, []any{map[string]any{"type": "Paused", "status": "True"}}, "status", "conditions")
	_, _ = pause(context.Background(), obj)
	obj.SetAnnotations(nil)
	if paused, _ := pause(context.Background(), obj); paused {
		t.Fatal("paused without the annotation")
	}
	if ev := <-recorder.Events; !strings.Contains(ev, names.ReasonReconcileResumed) {
		t.Errorf("event %q, want %s", ev, names.ReasonReconcileResumed)
	}
	if len(recorder.Events) != 0 {
		t.Errorf("extra events: %d", len(recorder.Events))
	}
}

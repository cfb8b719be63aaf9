package integration

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/example/myproxy-operator/test/harness"
)

// An uninstall that cannot finish (here: the release record is unreadable) keeps the MyProxy,
// whose finalizer guards the release's objects, and says why in a condition; once the cause is
// gone, the deletion completes.
func TestUninstallThatCannotFinishSaysWhy(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", timeout)

	records := releaseRecords(ctx, t, c, ns, "edge")
	if len(records) != 1 {
		t.Fatalf("want one release record, found %d", len(records))
	}
	record := records[0]
	record.Data["release"] = []byte("not a release")
	if err := c.Update(ctx, &record); err != nil {
		t.Fatal(err)
	}

	mp := harness.MyProxy(ns, "edge", nil)
	if err := c.Delete(ctx, mp); err != nil {
		t.Fatal(err)
	}
	got := harness.WaitForCondition(t, c, ns, "edge", "ReleaseFailed", "True", timeout)
	_, reason, msg := harness.Condition(got, "ReleaseFailed")
	if reason != "UninstallError" || !strings.Contains(msg, "keeps its finalizer") {
		t.Errorf("ReleaseFailed reason %q message %q, want UninstallError with the cause", reason, msg)
	}
	t.Logf("condition: %s: %s", reason, msg)
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge"}, mp); err != nil {
		t.Fatalf("the MyProxy is gone although its release could not be uninstalled: %v", err)
	}

	// The cause removed (the broken record deleted by hand), the deletion completes.
	if err := c.Delete(ctx, &record); err != nil {
		t.Fatal(err)
	}
	harness.WaitForGone(t, c, mp, timeout)
	if strings.Contains(msg, "panic") {
		t.Errorf("the uninstall error reads like a crash: %s", msg)
	}
}

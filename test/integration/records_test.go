package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/test/harness"
)

func releaseRecords(ctx context.Context, t *testing.T, c client.Client, ns, name string) []corev1.Secret {
	t.Helper()
	var records corev1.SecretList
	if err := c.List(ctx, &records, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
		t.Fatal(err)
	}
	return records.Items
}

// Release records are watched: a deployed release whose record is deleted by hand is installed
// again at once over its objects (adopted, not recreated), and a record edited into garbage is
// reported in the Irreconcilable condition, not silently ignored.
func TestDeletedOrCorruptedReleaseRecordIsRestoredOrReported(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", timeout)
	dep := waitDeployment(t, c, ns, "edge", "installed", func(*appsv1.Deployment) bool { return true })
	records := releaseRecords(ctx, t, c, ns, "edge")
	if len(records) != 1 {
		t.Fatalf("%d release records, want 1", len(records))
	}

	// Deleted: restored, from the record watch alone (nothing else about the MyProxy changes).
	if err := c.Delete(ctx, &records[0]); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, timeout, "a deployed release record again", func(ctx context.Context) (bool, string) {
		for _, r := range releaseRecords(ctx, t, c, ns, "edge") {
			if r.UID != records[0].UID && r.Labels["status"] == "deployed" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d records", len(releaseRecords(ctx, t, c, ns, "edge")))
	})
	var again appsv1.Deployment
	if err := c.Get(ctx, client.ObjectKeyFromObject(dep), &again); err != nil || again.UID != dep.UID {
		t.Errorf("the release's Deployment was replaced (uid %s, was %s; %v): its objects must be adopted", again.UID, dep.UID, err)
	}

	// Corrupted: reported.
	record := releaseRecords(ctx, t, c, ns, "edge")[0]
	record.Data["release"] = []byte("not a release")
	if err := c.Update(ctx, &record); err != nil {
		t.Fatal(err)
	}
	mp := harness.WaitForCondition(t, c, ns, "edge", "Irreconcilable", "True", timeout)
	_, reason, msg := harness.Condition(mp, "Irreconcilable")
	t.Logf("Irreconcilable: %s: %s", reason, msg)
	if !strings.Contains(msg, "release") {
		t.Errorf("Irreconcilable message %q does not say the release record is unreadable", msg)
	}
}

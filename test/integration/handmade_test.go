package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/test/harness"
)

// A release changed by hand with helm (an upgrade with other values, a rollback to that
// revision) is set back to what the MyProxy says: the labels Helm copies into the hand-made
// revision do not pass for the operator's own.
func TestHandMadeHelmUpgradeAndRollbackAreSetBack(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	helm := harness.Tool(t, "HELM", "helm")
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	if err := c.Create(ctx, harness.MyProxy(ns, "hand", map[string]any{"replicas": int64(1)})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "hand", "Deployed", "True", timeout)
	harness.WaitForSettled(t, c, ns, "hand", 2*time.Second, timeout)
	env := []string{"KUBECONFIG=" + kubeconfig}
	chart := filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy")

	setBack := func(what string, after int) {
		t.Helper()
		harness.Eventually(t, timeout, what+" set back by a new revision", func(ctx context.Context) (bool, string) {
			var d appsv1.Deployment
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hand"}, &d); err != nil {
				return false, err.Error()
			}
			rev, err := latestRevision(ctx, c, ns, "hand")
			return err == nil && *d.Spec.Replicas == 1 && rev > after,
				fmt.Sprintf("replicas %d, latest revision %d (hand-made: %d)", *d.Spec.Replicas, rev, after)
		})
	}
	harness.Run(t, env, helm, "upgrade", "hand", chart, "-n", ns, "--reuse-values", "--set", "replicas=3")
	handMade, _ := latestRevision(ctx, c, ns, "hand")
	setBack("helm upgrade", handMade)
	harness.WaitForSettled(t, c, ns, "hand", 2*time.Second, timeout)

	harness.Run(t, env, helm, "rollback", "hand", fmt.Sprint(handMade), "-n", ns)
	rolledBack, _ := latestRevision(ctx, c, ns, "hand")
	setBack("helm rollback", rolledBack)
}

package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/test/harness"
)

// An operator-sdk helm project (testdata/sdkproject) moves to this operator and back with
// nothing changed but the binary: a resource created under one operator is adopted by the
// other, which uninstalls it when it is deleted and lets it go (the finalizer both store is
// operator-sdk's), leaving none of the release's objects, hooks included, and no record.
// envtest runs no garbage collector: what goes, the operator deleted.
func TestAResourceMovesBetweenTheStockOperatorAndThisOne(t *testing.T) {
	c := harness.NewClient(t, cfg)
	watches := sdkProject(t, c)
	s := subject{name: "migration", c: c, t: t, ns: newNamespace(t, c, nil)}
	stock := func() *harness.Operator {
		return startStockOperator(t, watches, s.ns)
	}
	ours := func() *harness.Operator {
		return harness.StartOperator(t, operatorBin, kubeconfig, []string{"--watches-file=" + watches}, "WATCH_NAMESPACE="+s.ns)
	}
	finalizers := func(name string) []string {
		u := nginxCR(s.ns, name, nil, nil)
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
			return []string{err.Error()}
		}
		return u.GetFinalizers()
	}
	waitReady := func(name string) {
		harness.Eventually(t, timeout, name+" Ready under this operator", func(ctx context.Context) (bool, string) {
			status, msg := s.condition(ctx, name, names.ConditionReady)
			return status == "True", status + " " + msg
		})
	}
	deleteAndWaitGone := func(name string) {
		t.Helper()
		if err := c.Delete(context.Background(), nginxCR(s.ns, name, nil, nil)); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, timeout, name+" deleted", func(ctx context.Context) (bool, string) {
			return !s.exists(ctx, name), fmt.Sprintf("finalizers %v", finalizers(name))
		})
		for _, cm := range []string{name + "-config", name + "-hook"} {
			if _, err := s.configMap(context.Background(), cm); !apierrors.IsNotFound(err) {
				t.Errorf("ConfigMap %s left after %s was deleted (%v)", cm, name, err)
			}
		}
		var records corev1.SecretList
		if err := c.List(context.Background(), &records, client.InNamespace(s.ns),
			client.MatchingLabels{names.RecordOwnerLabel: names.RecordOwnerHelm, names.RecordNameLabel: name}); err != nil {
			t.Fatal(err)
		}
		if len(records.Items) > 0 {
			t.Errorf("%d release records of %s left", len(records.Items), name)
		}
	}

	t.Log("stock -> this: adopted, and deleted without hanging on the stock finalizer")
	op := stock()
	s.create("moved-in", nil)
	s.waitDeployed("moved-in")
	s.waitConfigMap("moved-in-hook", "created by the post-install hook", func(*corev1.ConfigMap) bool { return true })
	if got := finalizers("moved-in"); !slices.Equal(got, []string{names.UninstallFinalizer}) {
		t.Fatalf("under the stock operator: finalizers %v, want [%s]", got, names.UninstallFinalizer)
	}
	op.Stop(t)
	op = ours()
	waitReady("moved-in")
	if got := finalizers("moved-in"); !slices.Equal(got, []string{names.UninstallFinalizer}) {
		t.Errorf("adopted: finalizers %v, want only operator-sdk's [%s]", got, names.UninstallFinalizer)
	}
	deleteAndWaitGone("moved-in")

	t.Log("this -> stock: the stock operator finds its own finalizer and uninstalls")
	s.create("moved-out", nil)
	waitReady("moved-out")
	if got := finalizers("moved-out"); !slices.Equal(got, []string{names.UninstallFinalizer}) {
		t.Fatalf("under this operator: finalizers %v, want [%s] (domain-qualified, operator-sdk's)", got, names.UninstallFinalizer)
	}
	op.Stop(t)
	stock()
	s.waitDeployed("moved-out")
	if err := c.Delete(context.Background(), nginxCR(s.ns, "moved-out", nil, nil)); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, timeout, "moved-out deleted by the stock operator", func(ctx context.Context) (bool, string) {
		return !s.exists(ctx, "moved-out"), fmt.Sprintf("finalizers %v", finalizers("moved-out"))
	})
	if h := s.history("moved-out"); len(h) > 0 {
		t.Errorf("the stock operator left the release: %+v", h)
	}
}

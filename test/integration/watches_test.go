package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/myproxy-operator/test/harness"
)

// With watchDependentResources: false nothing watches the release's objects, so a deleted
// Deployment stays deleted until the MyProxy itself changes. (The upstream `run` command gets
// this backwards; TestInstallUpgradeDriftUninstall shows the default brings it back.)
func TestWatchDependentResourcesFalse(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{Extra: "watchDependentResources: false"})
	ns := newNamespace(t, c, nil)

	if err := c.Create(ctx, harness.MyProxy(ns, "quiet", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "quiet", "Deployed", "True", timeout)
	harness.WaitForSettled(t, c, ns, "quiet", 2*time.Second, timeout)
	dep := waitDeployment(t, c, ns, "quiet", "installed", func(*appsv1.Deployment) bool { return true })
	if err := c.Delete(ctx, dep); err != nil {
		t.Fatal(err)
	}
	harness.Consistently(t, 5*time.Second, "Deployment stays deleted", func(ctx context.Context) (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "quiet"}, &appsv1.Deployment{})
		return err != nil, "the Deployment was recreated: a dependent watch is active"
	})
	// The operator still reconciles the MyProxy itself.
	patchSpec(t, c, ns, "quiet", `{"replicas":2}`)
	waitDeployment(t, c, ns, "quiet", "recreated by the upgrade", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 2 })
}

func TestWatchNamespaceScopesTheOperator(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	watched := newNamespace(t, c, nil)
	other := newNamespace(t, c, nil)
	startOperator(t, harness.Watch{}, "WATCH_NAMESPACE="+watched)

	for _, ns := range []string{watched, other} {
		if err := c.Create(ctx, harness.MyProxy(ns, "scoped", map[string]any{})); err != nil {
			t.Fatal(err)
		}
	}
	harness.WaitForCondition(t, c, watched, "scoped", "Deployed", "True", timeout)
	harness.Consistently(t, 3*time.Second, "MyProxy outside WATCH_NAMESPACE untouched", func(ctx context.Context) (bool, string) {
		mp, err := harness.GetMyProxy(ctx, c, other, "scoped")
		if err != nil {
			return false, err.Error()
		}
		_, hasStatus := mp.Object["status"]
		return len(mp.GetFinalizers()) == 0 && !hasStatus, fmt.Sprintf("finalizers=%v status=%v", mp.GetFinalizers(), mp.Object["status"])
	})
	if err := c.Get(ctx, types.NamespacedName{Namespace: other, Name: "scoped"}, &appsv1.Deployment{}); err == nil {
		t.Error("a release was installed outside WATCH_NAMESPACE")
	}
}

// overrideValues (with environment expansion) win over the spec; selector limits which
// MyProxies the operator takes.
func TestOverrideValuesAndSelector(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	const pinned = "mirror.example.com/nginx:1.27.5"
	startOperator(t, harness.Watch{Extra: "overrideValues:\n  image: $PINNED_IMAGE\nselector:\n  matchLabels:\n    tier: edge"},
		"PINNED_IMAGE="+pinned)
	ns := newNamespace(t, c, nil)

	selected := harness.MyProxy(ns, "selected", map[string]any{"image": "docker.io/library/nginx:1.25"})
	selected.SetLabels(map[string]string{"tier": "edge"})
	if err := c.Create(ctx, selected); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, harness.MyProxy(ns, "ignored", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "selected", "Deployed", "True", timeout)
	waitDeployment(t, c, ns, "selected", "with the overridden image", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == pinned
	})
	harness.WaitForEvent(t, c, ns, "selected", "ValueOverridden", timeout)
	mp, err := harness.GetMyProxy(ctx, c, ns, "ignored")
	if err != nil {
		t.Fatal(err)
	}
	if len(mp.GetFinalizers()) != 0 {
		t.Errorf("a MyProxy outside the selector was reconciled (finalizers %v)", mp.GetFinalizers())
	}
}

// A chart author edits a template and a default; restarting the operator upgrades every
// existing release, with no Go change. (Waves are off here: no rollout state namespace.)
func TestChartChangeRollsThroughEveryRelease(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	chart := filepath.Join(t.TempDir(), "myproxy")
	harness.Run(t, nil, "cp", "-r", filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"), chart)
	ns := newNamespace(t, c, nil)

	op := startOperator(t, harness.Watch{Chart: chart})
	names := []string{"one", "two", "three", "four", "five", "six"}
	for _, name := range names {
		if err := c.Create(ctx, harness.MyProxy(ns, name, map[string]any{})); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		harness.WaitForCondition(t, c, ns, name, "Deployed", "True", timeout)
	}
	op.Stop(t)

	// A new template label and a new default of a value.
	edit(t, filepath.Join(chart, "templates", "deployment.yaml"),
		"    {{- include \"myproxy.labels\" . | nindent 4 }}\n",
		"    {{- include \"myproxy.labels\" . | nindent 4 }}\n    chart-edit: applied\n")
	edit(t, filepath.Join(chart, "values.yaml"), "imagePullPolicy: IfNotPresent", "imagePullPolicy: Always")

	startOperator(t, harness.Watch{Chart: chart})
	upgraded := map[string]bool{}
	harness.Eventually(t, timeout, "every Deployment upgraded to the edited chart", func(ctx context.Context) (bool, string) {
		for _, name := range names {
			if upgraded[name] {
				continue
			}
			var d appsv1.Deployment
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &d); err == nil &&
				d.Labels["chart-edit"] == "applied" && d.Spec.Template.Spec.Containers[0].ImagePullPolicy == "Always" {
				upgraded[name] = true
			}
		}
		return len(upgraded) == len(names), fmt.Sprintf("%d of %d upgraded", len(upgraded), len(names))
	})
}

func edit(t *testing.T, path, old, replacement string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), old) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(raw), old, replacement, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/test/fixture"
	"github.com/example/myproxy-operator/test/harness"
)

const (
	timeout   = fixture.Timeout
	finalizer = names.UninstallFinalizer
)

// The helpers every integration test shares, from test/fixture.
var (
	waitDeployment = fixture.WaitDeployment
	patchSpec      = fixture.PatchSpec
	releaseSecrets = fixture.ReleaseSecrets
	newNamespace   = fixture.Namespace
)

// startOperator starts the operator with a watches file for w and extra environment.
func startOperator(t *testing.T, w harness.Watch, env ...string) *harness.Operator {
	return harness.StartOperator(t, operatorBin, kubeconfig, []string{"--watches-file=" + harness.WriteWatches(t, w)}, env...)
}

// startOperatorWith starts the operator on the repository chart with extra flags.
func startOperatorWith(t *testing.T, args ...string) *harness.Operator {
	t.Helper()
	return env.StartOperatorWith(t, args...)
}

func TestInstallUpgradeDriftUninstall(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	defaults := harness.ChartValues(t)

	// Install on create.
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	mp := harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", timeout)
	if got := mp.GetFinalizers(); len(got) != 1 || got[0] != finalizer {
		t.Errorf("finalizers = %v, want [%s]", got, finalizer)
	}
	dep := waitDeployment(t, c, ns, "edge", "with chart defaults", func(d *appsv1.Deployment) bool {
		return int64(*d.Spec.Replicas) == int64(defaults["replicas"].(float64)) &&
			d.Spec.Template.Spec.Containers[0].Image == defaults["image"]
	})
	for _, obj := range []client.Object{dep, &corev1.Service{}, &corev1.ConfigMap{}} {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge"}, obj); err != nil {
			t.Errorf("%T of the release: %v", obj, err)
		}
		// The operator's caches see only labelled objects: without the label, no drift is corrected.
		if obj.GetLabels()[names.ManagedLabel] != names.ManagedValue {
			t.Errorf("%T of the release lacks the label %s: %v", obj, names.ManagedLabel, obj.GetLabels())
		}
		if refs := obj.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != mp.GetUID() || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%T of the release: owner references %+v, want one controller reference to the MyProxy", obj, refs)
		}
	}
	rel, err := driver.NewSecrets(kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets(ns)).Get("sh.helm.release.v1.edge.v1")
	if err != nil {
		t.Fatal(err)
	}
	// The stored manifest is what the chart rendered, as for helm install: what the operator adds
	// is on the objects alone.
	if strings.Contains(rel.Manifest, names.ManagedLabel) || strings.Contains(rel.Manifest, "ownerReferences") {
		t.Errorf("the stored manifest carries what the operator adds to the objects:\n%s", rel.Manifest)
	}
	if got := dep.Labels["app.kubernetes.io/instance"]; got != "edge" {
		t.Errorf("Deployment label app.kubernetes.io/instance = %q", got)
	}
	harness.WaitForEvent(t, c, ns, "edge", "Installed", timeout)

	// Upgrade when replicas change 1 -> 3, then when the image changes.
	patchSpec(t, c, ns, "edge", `{"replicas":3}`)
	waitDeployment(t, c, ns, "edge", "scaled to 3", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })
	harness.WaitForEvent(t, c, ns, "edge", "Upgraded", timeout)
	const image = "registry.example.com/team/nginx:1.27.4"
	patchSpec(t, c, ns, "edge", `{"image":"`+image+`"}`)
	dep = waitDeployment(t, c, ns, "edge", "with the new image", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == image
	})

	// A change of the proxy configuration rolls the Pods: the pod template's config checksum changes.
	checksum := dep.Spec.Template.Annotations["checksum/config"]
	if checksum == "" {
		t.Fatal("the pod template carries no checksum/config annotation")
	}
	patchSpec(t, c, ns, "edge", `{"routes":[{"path":"/api/","upstream":"http://api.example.svc:8080"}]}`)
	dep = waitDeployment(t, c, ns, "edge", "rolled for the new configuration", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Annotations["checksum/config"] != checksum
	})

	// Drift: a deleted Deployment or Service comes back; a hand-edited replica count is reverted.
	// Settle first, so that only a watch on the release's objects can explain a recreation.
	harness.WaitForSettled(t, c, ns, "edge", 2*time.Second, timeout)
	if err := c.Delete(ctx, dep); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, c, ns, "edge", "recreated after deletion", func(d *appsv1.Deployment) bool {
		return d.UID != dep.UID && *d.Spec.Replicas == 3
	})
	svc := &corev1.Service{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge"}, svc); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, timeout, "Service recreated", func(ctx context.Context) (bool, string) {
		again := &corev1.Service{}
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge"}, again)
		return err == nil && again.UID != svc.UID, fmt.Sprintf("err=%v", err)
	})
	if err := c.Patch(ctx, &appsv1.Deployment{ObjectMeta: dep.ObjectMeta},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":7}}`))); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, c, ns, "edge", "hand-edited replicas reverted", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })

	// Uninstall on delete: every object of the release and the release itself go, then the CR.
	if err := c.Delete(ctx, harness.MyProxy(ns, "edge", nil)); err != nil {
		t.Fatal(err)
	}
	harness.WaitForGone(t, c, harness.MyProxy(ns, "edge", nil), timeout)
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &corev1.ConfigMap{}} {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge"}, obj)
		if !apierrors.IsNotFound(err) {
			t.Errorf("%T of the release after delete: err=%v, want NotFound", obj, err)
		}
	}
	if secrets, err := releaseSecrets(ctx, c, ns, "edge"); err != nil || len(secrets) != 0 {
		t.Errorf("release Secrets after delete: %d (err=%v), want 0", len(secrets), err)
	}
	harness.WaitForEvent(t, c, ns, "edge", "Uninstalled", timeout)
}

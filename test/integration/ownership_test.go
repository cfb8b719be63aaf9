package integration

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/test/harness"
)

// fixedObjects are the objects the FixedNames chart renders whatever the release is called.
var fixedObjects = []struct {
	kind string
	obj  client.Object
}{
	{"ConfigMap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cd-cm"}}},
	{"Secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cd-secret"}}},
	{"ServiceAccount", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "cd-server"}}},
	{"Service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "cd-server"}}},
}

// A release never touches another release's objects. Two custom resources of a chart that names
// its objects without the release's name, created at the same moment, many times over: one
// installs; the other's install writes none of the first release's objects (their ownership,
// identity and what the application wrote into them stay), and its condition names an object
// and the release that owns it, while the first release sees nothing of it. The second does not
// retry in a tight loop: its attempts back off, as every failing reconcile's do.
func TestAReleaseNeverTouchesAnotherReleasesObjects(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	watches, managerRole := corpusProject(t, c)
	const rounds = 8
	for round := range rounds {
		ns := newNamespace(t, c, nil)
		asManager := harness.ServiceAccountKubeconfig(t, c, cfg, ns, operatorAccount, managerRole)
		op := harness.StartOperator(t, operatorBin, asManager, []string{"--watches-file=" + watches}, "WATCH_NAMESPACE="+ns)
		a, b := corpusCR("FixedNames", ns, "alpha"), corpusCR("FixedNames", ns, "bravo")
		for _, u := range []*unstructured.Unstructured{a, b} {
			u.Object["spec"] = map[string]any{}
		}
		created := make(chan error, 2)
		for _, u := range []*unstructured.Unstructured{a, b} {
			go func() { created <- c.Create(ctx, u.DeepCopy()) }()
		}
		for range 2 {
			if err := <-created; err != nil {
				t.Fatal(err)
			}
		}
		// One of them deploys: the winner.
		var winner, loser string
		harness.Eventually(t, timeout, "one of the two deployed", func(ctx context.Context) (bool, string) {
			for _, name := range []string{"alpha", "bravo"} {
				u := corpusCR("FixedNames", ns, name)
				if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
					return false, err.Error()
				}
				if status, _, _ := harness.Condition(u, names.ConditionDeployed); status == "True" {
					winner, loser = name, map[string]string{"alpha": "bravo", "bravo": "alpha"}[name]
					return true, ""
				}
			}
			return false, "neither is Deployed"
		})
		// What the application writes into its Secret at run time.
		secret := &corev1.Secret{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cd-secret"}, secret); err != nil {
			t.Fatal(err)
		}
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data["server.secretkey"] = []byte(fmt.Sprintf("written at run time, round %d", round))
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		before := ownedBy(t, c, ns, winner)
		// The loser reports the conflict, naming an object and the owner.
		var message string
		harness.Eventually(t, timeout, loser+" reports the conflict", func(ctx context.Context) (bool, string) {
			u := corpusCR("FixedNames", ns, loser)
			if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
				return false, err.Error()
			}
			status, _, msg := harness.Condition(u, names.ConditionReleaseFailed)
			message = msg
			names := strings.Contains(msg, `current value is "`+winner+`"`) || strings.Contains(msg, "belongs to release "+winner+" ")
			return status == "True" && strings.Contains(msg, `"cd-`) && names, status + " " + msg
		})
		// Give the loser's retries time to run; none may touch the winner's objects, and they back
		// off: a retry every few milliseconds would be a thousand in this time.
		failures, watch := installFailures(t, c, ns, loser), 3*time.Second
		if round == 0 {
			watch = 20 * time.Second
		}
		time.Sleep(watch)
		retries := installFailures(t, c, ns, loser) - failures
		after := ownedBy(t, c, ns, winner)
		if !maps.Equal(before, after) {
			t.Errorf("round %d: the objects of %s changed while %s tried to install:\nbefore %v\nafter  %v", round, winner, loser, before, after)
		}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cd-secret"}, secret); err != nil || !strings.HasPrefix(string(secret.Data["server.secretkey"]), "written at run time") {
			t.Errorf("round %d: what the application wrote into cd-secret is gone (%v)", round, err)
		}
		if retries > 16 {
			t.Errorf("round %d: %s failed to install %d more times in %s: a tight loop", round, loser, retries, watch)
		}
		u := corpusCR("FixedNames", ns, winner)
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			t.Fatal(err)
		}
		if status, _, msg := harness.Condition(u, names.ConditionIrreconcilable); status == "True" {
			t.Errorf("round %d: %s noticed: Irreconcilable %s", round, winner, msg)
		}
		if round == 0 {
			t.Logf("%s says: %s", loser, message)
		}
		op.Stop(t)
	}
}

// ownedBy returns, for each fixed object, its UID, ownership annotations and content, which must
// stay as release rls of ns left them.
func ownedBy(t *testing.T, c client.Client, ns, rls string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range fixedObjects {
		obj := f.obj.DeepCopyObject().(client.Object)
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: f.obj.GetName()}, obj); err != nil {
			t.Fatalf("%s %s: %v", f.kind, f.obj.GetName(), err)
		}
		a := obj.GetAnnotations()
		if a[names.HelmReleaseNameAnnotation] != rls || a[names.HelmReleaseNamespaceAnnotation] != ns {
			t.Errorf("%s %s is not release %s's: annotations %v", f.kind, obj.GetName(), rls, a)
		}
		content := ""
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			content = fmt.Sprint(o.Data)
		case *corev1.Secret:
			content = fmt.Sprint(o.Data)
		}
		out[f.kind+"/"+obj.GetName()] = fmt.Sprintf("uid %s rv %s owner %s content %s", obj.GetUID(), obj.GetResourceVersion(),
			a[names.HelmReleaseNameAnnotation], content)
	}
	return out
}

// installFailures counts the InstallFailed Events of ns/name.
func installFailures(t *testing.T, c client.Client, ns, name string) int {
	t.Helper()
	var events corev1.EventList
	if err := c.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Reason == names.ReasonInstallFailed {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

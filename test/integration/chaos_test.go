package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/test/harness"
)

// kill -9 of the operator at random moments while MyProxies are created, changed and deleted.
// After the last restart every MyProxy converges to its spec with no manual step, no release is
// left pending, nothing of a deleted MyProxy remains, and no release is installed twice.
// CHAOS_CYCLES sets the number of kill/restart cycles (make chaos runs the long form).
func TestKillDuringChanges(t *testing.T) {
	cycles := 4
	if v, err := strconv.Atoi(os.Getenv("CHAOS_CYCLES")); err == nil && v > 0 {
		cycles = v
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("%d cycles, seed %d", cycles, seed)

	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	ns := harness.Namespace(t, c, nil)
	images := []string{"registry.example.com/nginx:1.27.3", "registry.example.com/nginx:1.27.4", "registry.example.com/nginx:1.27.5"}
	type spec struct {
		replicas int64
		image    string
	}
	desired := map[string]*spec{} // nil: deleted
	names := make([]string, 8)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}

	op := startOperator(t, harness.Watch{})
	for cycle := 1; cycle <= cycles; cycle++ {
		for _, name := range names {
			switch current := desired[name]; {
			case current == nil && rng.IntN(3) > 0:
				s := &spec{replicas: int64(1 + rng.IntN(4)), image: images[rng.IntN(len(images))]}
				mp := harness.MyProxy(ns, name, map[string]any{"replicas": s.replicas, "image": s.image})
				if err := c.Create(ctx, mp); err != nil {
					if !apierrors.IsAlreadyExists(err) { // still being deleted from an earlier cycle
						t.Fatal(err)
					}
					continue
				}
				desired[name] = s
			case current != nil && rng.IntN(5) == 0:
				if err := c.Delete(ctx, harness.MyProxy(ns, name, nil)); client.IgnoreNotFound(err) != nil {
					t.Fatal(err)
				}
				desired[name] = nil
			case current != nil:
				current.replicas, current.image = int64(1+rng.IntN(4)), images[rng.IntN(len(images))]
				patchSpec(t, c, ns, name, fmt.Sprintf(`{"replicas":%d,"image":%q}`, current.replicas, current.image))
			}
		}
		time.Sleep(time.Duration(50+rng.IntN(1500)) * time.Millisecond)
		op.Kill()
		op = startOperator(t, harness.Watch{})
	}

	started := time.Now()
	secrets := driver.NewSecrets(kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets(ns))
	for _, name := range names {
		s := desired[name]
		harness.Eventually(t, 3*time.Minute, "MyProxy "+name+" converged", func(ctx context.Context) (bool, string) {
			history, err := secrets.Query(map[string]string{"name": name, "owner": "helm"})
			if err != nil && err != driver.ErrReleaseNotFound {
				return false, err.Error()
			}
			for _, r := range history {
				if r.Info.Status.IsPending() {
					return false, fmt.Sprintf("revision %d is %s", r.Version, r.Info.Status)
				}
			}
			var dep appsv1.Deployment
			depErr := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &dep)
			if s == nil {
				_, mpErr := harness.GetMyProxy(ctx, c, ns, name)
				gone := apierrors.IsNotFound(mpErr) && apierrors.IsNotFound(depErr) && len(history) == 0 &&
					apierrors.IsNotFound(c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &corev1.Service{}))
				return gone, fmt.Sprintf("deleted MyProxy: cr=%v deployment=%v revisions=%d", mpErr, depErr, len(history))
			}
			if depErr != nil {
				return false, depErr.Error()
			}
			return int64(*dep.Spec.Replicas) == s.replicas && dep.Spec.Template.Spec.Containers[0].Image == s.image,
				fmt.Sprintf("deployment replicas=%d image=%s, want %d %s", *dep.Spec.Replicas, dep.Spec.Template.Spec.Containers[0].Image, s.replicas, s.image)
		})
		if s != nil {
			harness.WaitForCondition(t, c, ns, name, "Deployed", "True", time.Minute)
		}
	}
	converged := time.Since(started)
	t.Logf("converged %s after the last restart", converged.Round(time.Millisecond))

	// No release was installed twice for the same MyProxy.
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	installs := map[types.UID]int32{}
	var unlocked int32
	for _, e := range events.Items {
		switch e.Reason {
		case "Installed":
			installs[e.InvolvedObject.UID] += max(e.Count, 1)
		case "ReleaseUnlocked":
			unlocked += max(e.Count, 1)
		}
	}
	t.Logf("%d releases were left pending by a kill and recovered", unlocked)
	twice := 0
	for uid, n := range installs {
		if n > 1 {
			twice++
			t.Errorf("MyProxy %s was installed %d times", uid, n)
		}
	}
	writeChaosReport(t, cycles, unlocked, twice, converged)
}

// writeChaosReport writes the README's chaos table to $CHAOS_REPORT (make chaos sets it). The
// stuck and left-over columns are 0 exactly when the checks above passed.
func writeChaosReport(t *testing.T, cycles int, unlocked int32, twice int, converged time.Duration) {
	path := os.Getenv("CHAOS_REPORT")
	if path == "" {
		return
	}
	zeroIfPassed := "0"
	if t.Failed() {
		zeroIfPassed = "see the failures"
	}
	report := fmt.Sprintf("| cycles | kills | releases left pending by a kill, recovered | stuck | objects of deleted MyProxies left | installed twice | converged after the last restart |\n"+
		"|---|---|---|---|---|---|---|\n| %d | %d | %d | %s | %s | %d | %.1f s |\n",
		cycles, cycles, unlocked, zeroIfPassed, zeroIfPassed, twice, converged.Seconds())
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Error(err)
	}
}

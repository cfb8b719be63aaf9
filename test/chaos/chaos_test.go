package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
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

	"github.com/example/myproxy-operator/test/fixture"
	"github.com/example/myproxy-operator/test/harness"
)

// kill -9 of the operator at random moments while MyProxies are created, changed and deleted.
// After the last restart every MyProxy converges to its spec with no manual step, no release is
// left pending, nothing of a deleted MyProxy remains, and no release is installed twice.
// The operator runs as deployed, with leader election (short timings): each restart waits for
// the killed one's Lease to expire, then unlocks what it left pending.
// CHAOS_CYCLES and CHAOS_PROXIES set the number of kill/restart cycles and of MyProxies (make
// chaos runs the long form). Every figure reported is counted from the cluster.
func TestKillDuringChanges(t *testing.T) {
	cycles, proxies := envInt("CHAOS_CYCLES", 4), envInt("CHAOS_PROXIES", 8)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("%d cycles, seed %d", cycles, seed)

	ctx := context.Background()
	c := harness.NewClient(t, env.Cfg)
	ns := fixture.Namespace(t, c, nil)
	truth := env.Record(t, ns)
	args := fixture.LeaderElectionArgs(ns, "chaos")
	images := []string{"registry.example.com/nginx:1.27.3", "registry.example.com/nginx:1.27.4", "registry.example.com/nginx:1.27.5"}
	type spec struct {
		replicas int64
		image    string
	}
	desired := map[string]*spec{} // nil: deleted
	names := make([]string, proxies)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}

	op := env.StartOperatorWith(t, args...)
	holder := env.WaitForNewLeader(t, ns, "chaos", "")
	kills := 0
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
				fixture.PatchSpec(t, c, ns, name, fmt.Sprintf(`{"replicas":%d,"image":%q}`, current.replicas, current.image))
			}
		}
		time.Sleep(time.Duration(50+rng.IntN(1500)) * time.Millisecond)
		op.Kill()
		if fixture.KilledBySignal(op) {
			kills++
		}
		op = env.StartOperatorWith(t, args...)
		// The next kill must find a leader at work: wait until the new process holds the Lease
		// (the killed one's expires first).
		holder = env.WaitForNewLeader(t, ns, "chaos", holder)
	}

	started := time.Now()
	secrets := driver.NewSecrets(kubernetes.NewForConfigOrDie(env.Cfg).CoreV1().Secrets(ns))
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

	// What a kill left pending is counted once the last operator has stopped (SIGTERM lets its
	// in-flight actions finish): a pending record of an action still running is not stuck.
	op.Stop(t)
	var deleted []string
	for _, name := range names {
		if desired[name] == nil {
			deleted = append(deleted, name)
		}
	}
	counts := chaosCounts{cycles: cycles, proxies: proxies, kills: kills, unlocked: truth.UnlockedReleases(),
		stuck: env.PendingRecords(ctx, t, ns), twice: truth.InstalledTwice(), converged: converged}
	counts.leftRecords, counts.leftObjects = env.LeftOver(ctx, t, ns, deleted)
	t.Logf("%+v", counts)
	if counts.kills != cycles {
		t.Errorf("%d of %d kills ended the process by SIGKILL", counts.kills, cycles)
	}
	if counts.stuck != 0 || counts.twice != 0 || counts.leftRecords+counts.leftObjects != 0 {
		t.Errorf("pending records %d, MyProxies installed twice %d, left of deleted MyProxies: %d records and %d objects",
			counts.stuck, counts.twice, counts.leftRecords, counts.leftObjects)
	}
	writeChaosReport(t, counts)
}

type chaosCounts struct {
	cycles, proxies, kills, unlocked, stuck, twice, leftRecords, leftObjects int
	converged                                                                time.Duration
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// writeChaosReport adds the kill table to $CHAOS_REPORT, every figure counted from the cluster
// or the processes.
func writeChaosReport(t *testing.T, c chaosCounts) {
	appendReport(t, "Kills during changes", fmt.Sprintf("| cycles | MyProxies | operator processes ended by SIGKILL | releases left pending or uninstalling by a kill, unlocked | "+
		"release records pending at the end | MyProxies whose Deployment was created twice | records and objects of deleted MyProxies left (no garbage collector) | converged after the last restart |\n"+
		"|---|---|---|---|---|---|---|---|\n| %d | %d | %d | %d | %d | %d | %d | %.1f s |\n",
		c.cycles, c.proxies, c.kills, c.unlocked, c.stuck, c.twice, c.leftRecords+c.leftObjects, c.converged.Seconds()))
}

// appendReport adds a section to $CHAOS_REPORT (make chaos sets it and writes its heading;
// docs/reliability.md explains what each section counts). Without it, nothing is written.
func appendReport(t *testing.T, title, body string) {
	path := os.Getenv("CHAOS_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "\n## %s\n\n%s", title, body); err != nil {
		t.Error(err)
	}
}

// An upgrade that fails on every attempt, FAILED_UPGRADES times (100 in make test, 1000 in make
// chaos): each attempt is driven by a spec change, which a queue in backoff still takes at once.
// The release history stays at its maximum, the condition still says why, retries have backed
// off to their cap (no attempt comes without a change), and fixing the spec deploys at once.
func TestRepeatedlyFailingUpgradeStaysBounded(t *testing.T) {
	const maxHistory = 3
	attempts := 100
	if v, err := strconv.Atoi(os.Getenv("FAILED_UPGRADES")); err == nil && v > 0 {
		attempts = v
	}
	ctx := context.Background()
	c := harness.NewClient(t, env.Cfg)
	addr := harness.FreeAddr(t)
	env.StartOperatorWith(t, fmt.Sprintf("--max-release-history=%d", maxHistory), "--metrics-bind-address="+addr)
	ns := fixture.Namespace(t, c, nil)
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", fixture.Timeout)

	failures := func() int { return int(fixture.HelmFailures(t, addr, "upgrade")) }
	start := time.Now()
	for i := range attempts {
		before := failures()
		// Alternate the replicas so that every patch is a change.
		fixture.PatchSpec(t, c, ns, "edge", fmt.Sprintf(`{"affinity":%s,"replicas":%d}`, fixture.BadAffinityValue, 1+i%2))
		harness.Eventually(t, fixture.Timeout, fmt.Sprintf("upgrade attempt %d fails", i+1), func(context.Context) (bool, string) {
			n := failures()
			return n > before, fmt.Sprintf("%d failed upgrades", n)
		})
	}
	total, failingFor := failures(), time.Since(start)
	t.Logf("%d failed upgrades in %s", total, failingFor.Round(time.Second))

	secrets, err := fixture.ReleaseSecrets(ctx, c, ns, "edge")
	if err != nil || len(secrets) > maxHistory {
		t.Errorf("%d revisions stored after %d failed upgrades (err %v), max %d", len(secrets), total, err, maxHistory)
	}
	mp, err := harness.GetMyProxy(ctx, c, ns, "edge")
	if err != nil {
		t.Fatal(err)
	}
	if st, _, msg := harness.Condition(mp, "Irreconcilable"); st != "True" || !strings.Contains(msg, "nodeSelectorTerms") {
		t.Errorf("Irreconcilable %s %q does not say what is wrong", st, msg)
	}
	// After that many failures the backoff is at its cap (1000 s): no retry comes on its own.
	harness.Consistently(t, 5*time.Second, "no failed upgrade without a change", func(context.Context) (bool, string) {
		n := failures()
		return n <= total+1, fmt.Sprintf("%d more failed upgrades since the last change: retries have not backed off", n-total)
	})

	// The fix deploys from its own event: the backoff is at its cap (1000 s), far beyond the
	// wait, and no failed attempt comes between the fix and the deployment.
	before := failures()
	fixture.PatchSpec(t, c, ns, "edge", `{"affinity":null,"replicas":2}`)
	harness.WaitForCondition(t, c, ns, "edge", "Irreconcilable", "False", fixture.Timeout)
	fixture.WaitDeployment(t, c, ns, "edge", "upgraded after the fix", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 2 })
	if n := failures(); n != before {
		t.Errorf("%d failed upgrades between the fix and its deployment", n-before)
	}
	appendReport(t, "Failing upgrades", fmt.Sprintf("| failed upgrades (operator metric) | in | revisions kept (max %d) | failed attempts between the fix and its deployment |\n"+
		"|---|---|---|---|\n| %d | %s | %d | %d |\n", maxHistory, total, failingFor.Round(time.Second), len(secrets), failures()-before))
}

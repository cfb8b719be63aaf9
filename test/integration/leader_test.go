package integration

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/test/fixture"
	"github.com/example/myproxy-operator/test/harness"
)

// Two replicas with leader election: only the leader reconciles; when it dies, the other takes
// over within the lease duration and carries on; no release is installed twice.
func TestLeaderElectionHandover(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	leaseID := "myproxy-" + ns
	args := leaderElectionArgs(ns, leaseID)
	history := watchLease(t, ns, leaseID)
	ops := []*harness.Operator{startElecting(t, args...), startElecting(t, args...)}

	leader := func() int {
		for i, op := range ops {
			if exited, _ := op.Exited(); !exited && acquired(op) {
				return i
			}
		}
		return -1
	}
	harness.Eventually(t, 30*time.Second, "a leader", func(context.Context) (bool, string) { return leader() >= 0, "no leader yet" })
	first := leader()
	if err := c.Create(ctx, harness.MyProxy(ns, "before", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "before", "Deployed", "True", timeout)
	if n := reconciles(t, ops[1-first]); n != 0 {
		t.Errorf("the replica that is not the leader reconciled %g times", n)
	}

	// The leader dies without releasing its Lease: the other replica takes it over once it
	// expired, as the Lease's own history shows.
	firstHolder := currentHolder(t, c, ns, leaseID)
	ops[first].Kill()
	harness.Eventually(t, timeout, "the other replica takes over", func(context.Context) (bool, string) {
		return acquired(ops[1-first]), "still waiting for the Lease"
	})
	last, next, released, ok := history.handover(firstHolder)
	switch {
	case !ok:
		t.Errorf("the Lease's history shows no handover from %s", firstHolder)
	case released:
		t.Error("a killed leader released its Lease")
	case !next.acquire.After(last.renew):
		// Taken over without a release: the Lease had expired. (Candidates count the duration
		// from when they saw the last renewal, on their own clock, so the two times written in
		// the Lease bound the handover only loosely.)
		t.Errorf("the new leader acquired the Lease at %s, not after the dead one's last renewal %s", next.acquire, last.renew)
	}
	t.Logf("handover: last renewal %s, taken over %s", last.renew.Format(time.StampMilli), next.acquire.Format(time.StampMilli))
	var l coordinationv1.Lease
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: leaseID}, &l); err != nil {
		t.Errorf("the Lease lives in the operator's namespace: %v", err)
	}

	// The new leader reconciles new work, and leaves finished work alone.
	if err := c.Create(ctx, harness.MyProxy(ns, "after", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "after", "Deployed", "True", timeout)
	for _, name := range []string{"before", "after"} {
		secrets, err := releaseSecrets(ctx, c, ns, name)
		if err != nil || len(secrets) != 1 || secrets[0].Labels["version"] != "1" {
			t.Errorf("release %s: %d revisions (err %v), want exactly revision 1", name, len(secrets), err)
		}
		if n := eventCount(t, c, ns, name, "Installed"); n != 1 {
			t.Errorf("release %s installed %d times", name, n)
		}
	}

	// SIGTERM releases the Lease: the standby takes it over from the release (an empty holder
	// written by the stopping leader), before it would have expired.
	standby := startElecting(t, args...)
	secondHolder := currentHolder(t, c, ns, leaseID)
	ops[1-first].Stop(t)
	harness.Eventually(t, timeout, "the standby takes over after SIGTERM", func(context.Context) (bool, string) {
		return acquired(standby), "still waiting for the Lease"
	})
	last, next, released, ok = history.handover(secondHolder)
	switch {
	case !ok:
		t.Errorf("the Lease's history shows no handover from %s", secondHolder)
	case !released:
		t.Error("the Lease was not released on SIGTERM: the standby waited for it to expire")
	case !next.acquire.Before(last.renew.Add(lease)):
		t.Errorf("the standby acquired the Lease at %s, not before it would have expired (renewed %s)", next.acquire, last.renew)
	}
}

// currentHolder returns the Lease's holder.
func currentHolder(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	var l coordinationv1.Lease
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &l); err != nil || l.Spec.HolderIdentity == nil {
		t.Fatalf("Lease %s: %v", name, err)
	}
	return *l.Spec.HolderIdentity
}

// lease is the leader Lease duration of the replicas leaderElectionArgs starts.
const lease = fixture.Lease

var leaderElectionArgs = fixture.LeaderElectionArgs

// A leader that freezes mid-install (SIGSTOP here; a long GC pause, a suspended VM or a stalled
// node in production) loses its Lease without knowing it. The other replica takes over and
// finishes the work. When the frozen one resumes, its in-flight Helm actions go on where they
// stopped; they must not undo the new leader's work: no object deleted or replaced, no release
// record written or removed, no MyProxy set back from Deployed.
func TestFrozenLeaderDoesNotUndoTheNewLeader(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	args := leaderElectionArgs(ns, "myproxy-"+ns)
	frozen := startElecting(t, args...)
	harness.Eventually(t, 30*time.Second, "the first replica leads", func(context.Context) (bool, string) {
		return acquired(frozen), "no leader yet"
	})
	successor := startElecting(t, args...)

	// Freeze the leader the moment its first install has written its pending record: that
	// install, and those of its other workers, are then under way.
	pending, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets(ns).Watch(ctx,
		metav1.ListOptions{LabelSelector: "owner=helm,status=pending-install"})
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Stop()
	const n = 20
	for i := range n {
		if err := c.Create(ctx, harness.MyProxy(ns, fmt.Sprintf("p%d", i), map[string]any{})); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-pending.ResultChan():
	case <-time.After(timeout):
		t.Fatal("no install started")
	}
	frozen.Signal(t, syscall.SIGSTOP)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			frozen.Signal(t, syscall.SIGCONT)
		}
	})
	harness.Eventually(t, 2*lease+5*time.Second, "the other replica takes over", func(context.Context) (bool, string) {
		return acquired(successor), "still waiting for the Lease"
	})
	for i := range n {
		harness.WaitForCondition(t, c, ns, fmt.Sprintf("p%d", i), "Deployed", "True", timeout)
	}
	before := releaseState(t, c, ns)

	frozen.Signal(t, syscall.SIGCONT)
	resumed = true
	harness.Eventually(t, 30*time.Second, "the resumed replica notices it lost the Lease", func(context.Context) (bool, string) {
		return !acquired(frozen), "it has not noticed yet"
	})
	harness.Consistently(t, 5*time.Second, "the new leader's work stays as it was", func(context.Context) (bool, string) {
		after := releaseState(t, c, ns)
		for k, v := range before {
			if after[k] != v {
				return false, fmt.Sprintf("%s was %q, now %q", k, v, after[k])
			}
		}
		return len(after) == len(before), fmt.Sprintf("%d objects, was %d", len(after), len(before))
	})
	if exited, err := frozen.Exited(); exited {
		t.Errorf("the resumed replica exited (%v) instead of campaigning again", err)
	}
	// Otherwise nothing was in flight at the freeze, and the test proved nothing.
	// Its metrics are served again once it campaigns again with a new manager.
	var refused float64
	harness.Eventually(t, 30*time.Second, "the resumed replica's metrics", func(context.Context) (bool, string) {
		v, err := scrapeSum(frozen, "myproxy_operator_fenced_writes_total")
		if err != nil {
			return false, err.Error()
		}
		refused = v
		return true, ""
	})
	if refused == 0 {
		t.Error("the resumed replica had no write to refuse")
	}
	t.Logf("the resumed replica refused %g writes", refused)
}

// releaseState maps every release object, release record and MyProxy in ns to what a stale
// writer would change: the UID of objects (a delete and re-create changes it), the
// resourceVersion of records, the Deployed condition of MyProxies.
func releaseState(t *testing.T, c client.Client, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	state := map[string]string{}
	lists := map[string]client.ObjectList{"Deployment": &appsv1.DeploymentList{}, "Service": &corev1.ServiceList{},
		"ConfigMap": &corev1.ConfigMapList{}}
	for kind, list := range lists {
		if err := c.List(ctx, list, client.InNamespace(ns), client.HasLabels{names.ManagedLabel}); err != nil {
			t.Fatal(err)
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			m := o.(metav1.Object)
			state[kind+"/"+m.GetName()] = string(m.GetUID())
			return nil
		})
	}
	var records corev1.SecretList
	if err := c.List(ctx, &records, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	for _, r := range records.Items {
		state["record/"+r.Name] = r.ResourceVersion
	}
	mps := &unstructured.UnstructuredList{}
	mps.SetGroupVersionKind(harness.MyProxyGVK.GroupVersion().WithKind("MyProxyList"))
	if err := c.List(ctx, mps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range mps.Items {
		st, reason, _ := harness.Condition(&mps.Items[i], "Deployed")
		state["myproxy/"+mps.Items[i].GetName()] = st + "/" + reason
	}
	return state
}

// metricsOf maps an operator started by startElecting to its plain-HTTP metrics address.
var metricsOf sync.Map

// startElecting starts an operator with leader election (args) whose metrics tell whether it
// leads and what it reconciled.
func startElecting(t *testing.T, args ...string) *harness.Operator {
	t.Helper()
	addr := harness.FreeAddr(t)
	op := startOperatorWith(t, append(args, "--metrics-bind-address="+addr)...)
	metricsOf.Store(op, addr)
	return op
}

// acquired reports whether op leads, by its own leader-election gauge (a process that does not
// answer, stopped or gone, does not lead).
func acquired(op *harness.Operator) bool {
	v, err := scrapeSum(op, "leader_election_master_status")
	return err == nil && v == 1
}

// reconciles is how many reconciles op's controllers ran, of any result.
func reconciles(t *testing.T, op *harness.Operator) float64 {
	t.Helper()
	v, err := scrapeSum(op, "controller_runtime_reconcile_total")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// scrapeSum sums the samples of one metric family at the metrics endpoint of op.
func scrapeSum(op *harness.Operator, family string) (float64, error) {
	addr, ok := metricsOf.Load(op)
	if !ok {
		return 0, fmt.Errorf("operator not started by startElecting")
	}
	body, err := harness.ScrapeMetrics(addr.(string))
	if err != nil {
		return 0, err
	}
	return harness.SumSamples(body, family, "")
}

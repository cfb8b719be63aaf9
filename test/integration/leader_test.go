package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/myproxy-operator/test/harness"
)

// Two replicas with leader election: only the leader reconciles; when it dies, the other takes
// over within the lease duration and carries on; no release is installed twice.
func TestLeaderElectionHandover(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	ns := harness.Namespace(t, c, nil)
	const lease = 4 * time.Second
	leaseID := "myproxy-" + ns
	args := []string{"--leader-elect", "--leader-election-namespace=" + ns, "--leader-election-id=" + leaseID,
		"--leader-election-lease-duration=" + lease.String(), "--leader-election-renew-deadline=3s",
		"--leader-election-retry-period=500ms"}
	ops := []*harness.Operator{startOperatorWith(t, args...), startOperatorWith(t, args...)}

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
	if strings.Contains(ops[1-first].Log(), "Release installed") {
		t.Error("the replica that is not the leader reconciled")
	}

	// The leader dies without releasing its Lease.
	ops[first].Kill()
	killed := time.Now()
	harness.Eventually(t, 2*lease+5*time.Second, "the other replica takes over", func(context.Context) (bool, string) {
		return acquired(ops[1-first]), "still waiting for the Lease"
	})
	handover := time.Since(killed)
	t.Logf("handover %s after the leader died (lease %s)", handover.Round(time.Millisecond), lease)
	if handover > lease+2*time.Second {
		t.Errorf("handover took %s, more than the lease duration %s (+2s)", handover, lease)
	}
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

	// SIGTERM releases the Lease: a waiting replica takes over at once, not after the lease.
	standby := startOperatorWith(t, args...)
	time.Sleep(time.Second) // let it start waiting for the Lease
	stopped := time.Now()
	ops[1-first].Stop(t)
	harness.Eventually(t, lease, "the standby takes over after SIGTERM", func(context.Context) (bool, string) {
		return acquired(standby), "still waiting for the Lease"
	})
	t.Logf("handover %s after SIGTERM", time.Since(stopped).Round(time.Millisecond))
	// Without the release the standby waits at least lease - retry period (3.5 s) after the last renewal.
	if took := time.Since(stopped); took > lease*3/4 {
		t.Errorf("handover after SIGTERM took %s: the Lease was not released", took)
	}
}

func acquired(op *harness.Operator) bool {
	return strings.Contains(strings.ToLower(op.Log()), "successfully acquired lease")
}

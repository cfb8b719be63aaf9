package integration

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/example/myproxy-operator/internal/operator"
	"github.com/example/myproxy-operator/internal/options"
	"github.com/example/myproxy-operator/test/harness"
)

// runOptions are the operator's flag defaults with args applied, as cmd/main.go builds them.
func runOptions(t *testing.T, args ...string) options.Options {
	t.Helper()
	var o options.Options
	fs := flag.NewFlagSet("operator", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(append([]string{"--metrics-bind-address=0", "--health-probe-bind-address=0"}, args...)); err != nil {
		t.Fatal(err)
	}
	return o
}

// runInProcess runs operator.Run in this process until the test ends, its log kept for a failure.
func runInProcess(t *testing.T, o options.Options, namespaces map[string]cache.Config) (stop func() error) {
	t.Helper()
	var log harness.SyncBuffer
	ctrl.SetLogger(zap.New(zap.WriteTo(&log), zap.UseDevMode(true)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- operator.Run(ctx, cfg, o, namespaces) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(o.GracefulShutdownTimeout + 30*time.Second):
				err = errors.New("operator.Run did not return after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("operator log:\n%s", log.String())
		}
	})
	return stop
}

// gathered sums the samples of a metric family in this process's controller-runtime registry.
func gathered(t *testing.T, family string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// operator.Run, in process: it reconciles; when another holder takes its Lease (as after an
// outage longer than the renew deadline, or a pause) its manager stops, and Run campaigns again
// with a new one, which takes the Lease once the other holder's expires and reconciles again;
// when its context ends it returns nil and releases the Lease.
func TestRunCampaignsAgainAfterLosingTheLease(t *testing.T) {
	c := harness.NewClient(t, cfg)
	ctx := context.Background()
	ns := newNamespace(t, c, nil)
	const leaseName = "run-in-process"
	o := runOptions(t, "--watches-file="+harness.WriteWatches(t, harness.Watch{}),
		"--leader-elect", "--leader-election-namespace="+ns, "--leader-election-id="+leaseName,
		"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s",
		"--leader-election-retry-period=500ms", "--graceful-shutdown-timeout=10s")
	stop := runInProcess(t, o, options.WatchNamespaces(ns))

	if err := c.Create(ctx, harness.MyProxy(ns, "run", map[string]any{"replicas": 1})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "run", "Deployed", "True", timeout)

	lease := &coordinationv1.Lease{}
	key := types.NamespacedName{Namespace: ns, Name: leaseName}
	if err := c.Get(ctx, key, lease); err != nil {
		t.Fatal(err)
	}
	self := ptr.Deref(lease.Spec.HolderIdentity, "")
	if self == "" {
		t.Fatal("the running operator holds no Lease")
	}
	lostBefore := gathered(t, "myproxy_operator_leader_leases_lost_total")

	// Another holder takes the Lease, valid for one lease duration from now (read again when
	// the operator renewed it in between).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, key, lease); err != nil {
			return err
		}
		now := metav1.NewMicroTime(time.Now())
		lease.Spec.HolderIdentity = ptr.To("another-replica")
		lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
		return c.Update(ctx, lease)
	}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, timeout, "the operator counts the lost Lease", func(context.Context) (bool, string) {
		lost := gathered(t, "myproxy_operator_leader_leases_lost_total") - lostBefore
		return lost >= 1, fmt.Sprintf("lost %g", lost)
	})
	harness.Eventually(t, timeout, "the operator holds the Lease again", func(ctx context.Context) (bool, string) {
		if err := c.Get(ctx, key, lease); err != nil {
			return false, err.Error()
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		// controller-runtime names a holder <hostname>_<uuid>, new for each manager.
		host, _, _ := strings.Cut(self, "_")
		return holder != "another-replica" && strings.HasPrefix(holder, host+"_"), "holder: " + holder
	})

	if lost := gathered(t, "myproxy_operator_leader_leases_lost_total") - lostBefore; lost != 1 {
		t.Errorf("%g Leases lost, want 1", lost)
	}

	// The new manager reconciles.
	patchSpec(t, c, ns, "run", `{"replicas":2}`)
	waitDeployment(t, c, ns, "run", "scaled by the new manager", func(d *appsv1.Deployment) bool {
		return ptr.Deref(d.Spec.Replicas, 0) == 2
	})

	if err := stop(); err != nil {
		t.Fatalf("operator.Run returned %v when its context ended", err)
	}
	if err := c.Get(ctx, key, lease); err != nil {
		t.Fatal(err)
	}
	if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder != "" {
		t.Errorf("the Lease is still held by %q after Run returned (it is released on shutdown)", holder)
	}
}

// A watches file that cannot be read stops Run at once with an error naming it, before any
// manager starts (a configuration error is not retried).
func TestRunReportsAnUnreadableWatchesFile(t *testing.T) {
	o := runOptions(t, "--watches-file=/nonexistent/watches.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := operator.Run(ctx, cfg, o, nil)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/watches.yaml") {
		t.Errorf("operator.Run returned %v, want an error naming the watches file", err)
	}
	if ctx.Err() != nil {
		t.Error("operator.Run waited for its context instead of returning the error")
	}
}

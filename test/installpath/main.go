// Command installpath tells which files of the operator one install and one upgrade of a
// MyProxy run in, once the Helm reconciler's reconcile begins: built with coverage of the
// operator's packages (go build -cover -covermode=atomic -coverpkg=...), it builds the
// operator's manager as the operator ships (operator.NewManager: leader election with its lease
// fence, rollout waves), starts only its cache and rollout gates, takes the Lease through the
// fence, calls the Helm reconciler's Reconcile itself, once for an install and once for an
// upgrade, and writes the coverage counters of each call to a directory of its own:
//
//	KUBECONFIG=K installpath -namespace NS -watches-file W -out DIR   (then DIR/install and DIR/upgrade)
//
// The MyProxy edge of namespace NS is created, then upgraded; the caller removes it. Nothing else
// of the manager runs: no other controller, no renewal of the Lease, so that what ran is the
// reconcile's.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/coverage"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/operator"
	"github.com/example/myproxy-operator/internal/options"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "installpath:", err)
		os.Exit(1)
	}
}

func run() error {
	namespace := flag.String("namespace", "", "the namespace of the MyProxy")
	watches := flag.String("watches-file", "watches.yaml", "the operator's watches.yaml")
	out := flag.String("out", "", "where the coverage of each reconcile goes")
	flag.Parse()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	var o options.Options
	o.BindFlags(flag.NewFlagSet("operator", flag.ContinueOnError)) // the operator's defaults
	o.WatchesFile, o.MetricsBindAddress, o.HealthProbeBindAddress = *watches, "0", "0"
	o.LeaderElect, o.LeaderElectionNamespace = true, *namespace // as config/manager ships it; waves are on by default
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mgr, parts, err := operator.NewManager(ctx, cfg, o, map[string]cache.Config{*namespace: {}}, false)
	if err != nil {
		return err
	}
	go func() { _ = mgr.GetCache().Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("the cache did not sync")
	}
	for _, g := range parts.Kinds.Gates {
		go func() { _ = g.Start(ctx) }()
	}
	if len(parts.Kinds.Reconcilers) != 1 || parts.Fence == nil {
		return fmt.Errorf("want one kind and a lease fence; have %d kinds, fence %v", len(parts.Kinds.Reconcilers), parts.Fence)
	}
	var r reconcile.Reconciler
	var gvk schema.GroupVersionKind
	for gvk, r = range parts.Kinds.Reconcilers {
	}
	key := types.NamespacedName{Namespace: *namespace, Name: "edge"}
	mp := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(1)}}}
	mp.SetGroupVersionKind(gvk)
	mp.SetNamespace(key.Namespace)
	mp.SetName(key.Name)
	direct, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	if err := direct.Create(ctx, mp); err != nil {
		return err
	}
	if err := measure(ctx, mgr.GetClient(), parts.Fence, r, mp, filepath.Join(*out, "install")); err != nil {
		return err
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))
	if err := direct.Patch(ctx, mp, patch); err != nil {
		return err
	}
	return measure(ctx, mgr.GetClient(), parts.Fence, r, mp, filepath.Join(*out, "upgrade"))
}

// measure waits until the cache holds mp at its generation, takes or renews the leader Lease
// through fence, calls r once for it, and writes the coverage of that call to dir.
func measure(ctx context.Context, cached client.Reader, fence *actionclient.Fence, r reconcile.Reconciler, mp *unstructured.Unstructured, dir string) error {
	now := metav1.NewTime(time.Now())
	lease := resourcelock.LeaderElectionRecord{HolderIdentity: fence.Identity(), LeaseDurationSeconds: 60, AcquireTime: now, RenewTime: now}
	write := fence.Create
	if _, _, err := fence.Get(ctx); err == nil {
		write = fence.Update
	}
	if err := write(ctx, lease); err != nil {
		return err
	}
	if !fence.Leading() {
		return fmt.Errorf("the lease fence does not let this process write")
	}
	for {
		u := mp.DeepCopy()
		if err := cached.Get(ctx, client.ObjectKeyFromObject(mp), u); err == nil && u.GetGeneration() == mp.GetGeneration() {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cache never held %s at generation %d", mp.GetName(), mp.GetGeneration())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := coverage.ClearCounters(); err != nil {
		return err
	}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(mp)}); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := coverage.WriteMetaDir(dir); err != nil {
		return err
	}
	return coverage.WriteCountersDir(dir)
}

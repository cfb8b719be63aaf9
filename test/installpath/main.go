// Command installpath tells which files of the operator one install and one upgrade of a
// MyProxy run in, once the Helm reconciler's reconcile begins: built with coverage of the
// operator's packages (go build -cover -covermode=atomic -coverpkg=...), it sets the operator's
// controllers up as the operator does (controller.Setup) with nothing running but the manager's
// cache, calls the Helm reconciler's Reconcile itself, once for an install and once for an
// upgrade, and writes the coverage counters of each call to a directory of its own:
//
//	KUBECONFIG=K installpath -namespace NS -watches-file W -out DIR   (then DIR/install and DIR/upgrade)
//
// The MyProxy edge of namespace NS is created, then upgraded; the caller removes it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/coverage"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/controller"
	"github.com/example/myproxy-operator/internal/options"
	"github.com/example/myproxy-operator/internal/watchesfile"
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
	entries, err := watchesfile.Load(*watches)
	if err != nil {
		return err
	}
	namespaces := map[string]cache.Config{*namespace: {}}
	cacheOpts, newCache := caches.Manager(entries, namespaces, o.Shard, o.FastPaths.On(options.FastBookkeeping))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: cacheOpts, NewCache: newCache, Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		return err
	}
	reconcilers, err := controller.Setup(mgr, entries, o, controller.Process{Unlock: actionclient.SoleWriter{PendingAfter: o.UnlockPendingAfter}}, namespaces)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	go func() { _ = mgr.GetCache().Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("the cache did not sync")
	}
	gvk := entries[0].GroupVersionKind
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
	if err := measure(ctx, mgr.GetClient(), reconcilers[gvk], mp, filepath.Join(*out, "install")); err != nil {
		return err
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`))
	if err := direct.Patch(ctx, mp, patch); err != nil {
		return err
	}
	return measure(ctx, mgr.GetClient(), reconcilers[gvk], mp, filepath.Join(*out, "upgrade"))
}

// measure waits until the cache holds mp at its generation, calls r once for it, and writes the
// coverage of that call to dir.
func measure(ctx context.Context, cached client.Reader, r reconcile.Reconciler, mp *unstructured.Unstructured, dir string) error {
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

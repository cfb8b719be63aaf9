package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

var myProxyGVR = schema.GroupVersionResource{Group: "gateway.example.com", Version: "v1alpha1", Resource: "myproxies"}

const instanceLabel = "app.kubernetes.io/instance"

// tracker follows the custom resources of a fleet (MyProxies, or Flux's HelmReleases) and the
// Deployments of one namespace through watches (no polling, so that measuring costs the
// apiserver next to nothing) and knows, at any moment, which custom resources are Deployed (their
// kind's condition is True) and which instances have an Available Deployment.
type tracker struct {
	mu        sync.Mutex
	condition string               // the kind's condition that says a release is installed
	proxies   map[string]bool      // name -> condition True
	available map[string]bool      // instance -> Deployment available
	deployUID map[string]string    // Deployment name -> UID
	marked    map[string]string    // instance -> its Pod template's rolloutMark annotation
	changed   chan struct{}        // closed and replaced on every change
	seen      map[string]time.Time // name -> when first seen Deployed
}

func newTracker(ctx context.Context, dyn dynamic.Interface, cs kubernetes.Interface, namespace string, k kind) (*tracker, error) {
	t := &tracker{condition: k.condition, proxies: map[string]bool{}, available: map[string]bool{}, deployUID: map[string]string{}, marked: map[string]string{},
		changed: make(chan struct{}), seen: map[string]time.Time{}}

	df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, namespace, nil)
	if _, err := df.ForResource(k.gvr).Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.setProxy(o) },
		UpdateFunc: func(_, o any) { t.setProxy(o) },
		DeleteFunc: func(o any) { t.deleteProxy(o) },
	}); err != nil {
		return nil, err
	}
	kf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	if _, err := kf.Apps().V1().Deployments().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { t.setDeployment(o) },
		UpdateFunc: func(_, o any) { t.setDeployment(o) },
		DeleteFunc: func(o any) { t.deleteDeployment(o) },
	}); err != nil {
		return nil, err
	}
	df.Start(ctx.Done())
	kf.Start(ctx.Done())
	for _, ok := range df.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("the watch of %s did not sync", k.gvr.Resource)
		}
	}
	for _, ok := range kf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("the watch of Deployments did not sync")
		}
	}
	return t, nil
}

func (t *tracker) notify() {
	close(t.changed)
	t.changed = make(chan struct{})
}

func (t *tracker) setProxy(o any) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	deployed := conditionTrue(u, t.condition)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.proxies[u.GetName()] = deployed
	if _, ok := t.seen[u.GetName()]; deployed && !ok {
		t.seen[u.GetName()] = time.Now()
	}
	t.notify()
}

func (t *tracker) deleteProxy(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.proxies, u.GetName())
	delete(t.seen, u.GetName())
	t.notify()
}

func (t *tracker) setDeployment(o any) {
	d, ok := o.(*appsv1.Deployment)
	if !ok {
		return
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	avail := d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= want
	t.mu.Lock()
	defer t.mu.Unlock()
	t.available[d.Labels[instanceLabel]] = avail
	t.deployUID[d.Name] = string(d.UID)
	t.marked[d.Labels[instanceLabel]] = d.Spec.Template.Annotations[rolloutMark]
	t.notify()
}

func (t *tracker) deleteDeployment(o any) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	d, ok := o.(*appsv1.Deployment)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.available, d.Labels[instanceLabel])
	delete(t.deployUID, d.Name)
	delete(t.marked, d.Labels[instanceLabel])
	t.notify()
}

func conditionTrue(u *unstructured.Unstructured, condType string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == condType {
			return m["status"] == "True"
		}
	}
	return false
}

// fleet is a snapshot of what the tracker knows.
type fleet struct {
	Proxies, Deployed, Deployments, Available int
	// Rolled are the available Deployments whose Pod template carries rolloutMark (the chart
	// the rollout bench rolls out).
	Rolled int
}

func (t *tracker) snapshot() (fleet, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := fleet{Proxies: len(t.proxies), Deployments: len(t.available)}
	for _, d := range t.proxies {
		if d {
			f.Deployed++
		}
	}
	for instance, a := range t.available {
		if a {
			f.Available++
			if t.marked[instance] != "" {
				f.Rolled++
			}
		}
	}
	return f, t.changed
}

func (t *tracker) deployedSince(name string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.seen[name]
	return at, ok
}

func (t *tracker) deploymentUID(name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deployUID[name]
}

// waitFor blocks until cond holds for the fleet, printing progress every few seconds, and
// returns when it first held.
func (t *tracker) waitFor(ctx context.Context, what string, timeout time.Duration, cond func(fleet) bool) (time.Time, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	start := time.Now()
	for {
		f, changed := t.snapshot()
		if cond(f) {
			return time.Now(), nil
		}
		select {
		case <-changed:
		case <-tick.C:
			fmt.Fprintf(os.Stderr, "  %-28s %4.0fs  proxies %d, deployed %d, deployments %d, available %d\n",
				what, time.Since(start).Seconds(), f.Proxies, f.Deployed, f.Deployments, f.Available)
		case <-deadline.C:
			return time.Time{}, fmt.Errorf("%s: not reached within %s (proxies %d, deployed %d, deployments %d, available %d)",
				what, timeout, f.Proxies, f.Deployed, f.Deployments, f.Available)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// waitQuiet returns once no custom resource or Deployment of the namespace has changed for quiet.
func (t *tracker) waitQuiet(ctx context.Context, quiet time.Duration) error {
	_, err := t.waitQuietWithin(ctx, quiet, 0)
	return err
}

// waitQuietWithin is waitQuiet for at most limit (none when 0); quiet is false when the limit
// passed first.
func (t *tracker) waitQuietWithin(ctx context.Context, quiet, limit time.Duration) (bool, error) {
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	var deadline <-chan time.Time
	if limit > 0 {
		d := time.NewTimer(limit)
		defer d.Stop()
		deadline = d.C
	}
	for {
		_, changed := t.snapshot()
		select {
		case <-changed:
			timer.Reset(quiet)
		case <-timer.C:
			return true, nil
		case <-deadline:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

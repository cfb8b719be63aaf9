package integration

import (
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/example/myproxy-operator/test/fixture"
)

// leaseState is the Lease as one write left it.
type leaseState struct {
	holder         string
	acquire, renew time.Time
}

// leaseHistory records every state of a Lease, in the order the apiserver stored them, from now
// on. It tells the causes of a handover apart: a Lease released by its holder (an empty holder
// written), or one that expired (the next holder acquired it after renew + duration).
type leaseHistory struct {
	mu     sync.Mutex
	states []leaseState
}

func watchLease(t *testing.T, ns, name string) *leaseHistory {
	t.Helper()
	h := &leaseHistory{}
	cs := kubernetes.NewForConfigOrDie(cfg)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	note := func(obj any) {
		l := obj.(*coordinationv1.Lease)
		s := leaseState{}
		if l.Spec.HolderIdentity != nil {
			s.holder = *l.Spec.HolderIdentity
		}
		if l.Spec.AcquireTime != nil {
			s.acquire = l.Spec.AcquireTime.Time
		}
		if l.Spec.RenewTime != nil {
			s.renew = l.Spec.RenewTime.Time
		}
		if l.Name == name {
			h.mu.Lock()
			h.states = append(h.states, s)
			h.mu.Unlock()
		}
	}
	_, err := factory.Coordination().V1().Leases().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: note, UpdateFunc: func(_, n any) { note(n) },
	})
	if err != nil {
		t.Fatal(err)
	}
	fixture.StartInformers(t, factory)
	return h
}

// handover returns the last state held by from and the first state held by someone else after
// it, and whether the Lease was released (an empty holder) in between.
func (h *leaseHistory) handover(from string) (last, next leaseState, released, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := false
	for _, s := range h.states {
		switch {
		case s.holder == from:
			last, seen, released = s, true, false
		case seen && s.holder == "":
			released = true
		case seen:
			return last, s, released, true
		}
	}
	return last, next, released, false
}

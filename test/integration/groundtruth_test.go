package integration

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/example/myproxy-operator/test/harness"
)

// recorder counts, from the cluster's own objects as they change, what the fault tests report:
// every Deployment created for each MyProxy (by UID), and every release record that went from a
// pending state to failed by the operator's unlocking (its description says so). Events are not
// used: a kill -9 can drop them.
type recorder struct {
	mu          sync.Mutex
	deployments map[types.UID]map[types.UID]bool // MyProxy UID -> Deployment UIDs created for it
	unlocked    int
}

func record(t *testing.T, ns string) *recorder {
	t.Helper()
	r := &recorder{deployments: map[types.UID]map[types.UID]bool{}}
	cs := kubernetes.NewForConfigOrDie(cfg)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	_, err := factory.Apps().V1().Deployments().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			d := obj.(*appsv1.Deployment)
			owner := metav1.GetControllerOf(d)
			if owner == nil {
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.deployments[owner.UID] == nil {
				r.deployments[owner.UID] = map[types.UID]bool{}
			}
			r.deployments[owner.UID][d.UID] = true
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = factory.Core().V1().Secrets().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			before, after := oldObj.(*corev1.Secret), newObj.(*corev1.Secret)
			if before.Labels["owner"] != "helm" || !strings.HasPrefix(before.Labels["status"], "pending") || after.Labels["status"] != "failed" {
				return
			}
			if desc, err := releaseDescription(after); err == nil && strings.HasPrefix(desc, "marked failed by myproxy-operator") {
				r.mu.Lock()
				r.unlocked++
				r.mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	startInformers(t, factory)
	return r
}

// startInformers starts a factory's informers until the test ends, and waits for their caches.
func startInformers(t *testing.T, factory informers.SharedInformerFactory) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
}

// installedTwice counts the MyProxies for which a Deployment was created more than once.
func (r *recorder) installedTwice() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, created := range r.deployments {
		if len(created) > 1 {
			n++
		}
	}
	return n
}

func (r *recorder) unlockedReleases() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unlocked
}

// releaseDescription decodes a Helm release record (base64 of gzipped JSON) for its description.
func releaseDescription(s *corev1.Secret) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(string(s.Data["release"]))
	if err != nil {
		return "", err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return "", err
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		return "", err
	}
	var rel struct {
		Info struct{ Description string } `json:"info"`
	}
	err = json.Unmarshal(plain, &rel)
	return rel.Info.Description, err
}

// killedBySignal reports whether the process ended by SIGKILL (and not, say, by exiting on its
// own before the signal arrived).
func killedBySignal(op *harness.Operator) bool {
	exited, err := op.Exited()
	var exit *exec.ExitError
	if !exited || !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// leftOver counts what remains of deleted MyProxies: release records and objects of their
// releases. envtest runs no garbage collector, so whatever is gone was removed by the operator's
// own uninstall, not through owner references.
func leftOver(ctx context.Context, t *testing.T, ns string, deleted []string) (records, objects int) {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, name := range deleted {
		sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + name}
		secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		records += len(secrets.Items)
		deps, err := cs.AppsV1().Deployments(ns).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		svcs, err := cs.CoreV1().Services(ns).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, sel)
		if err != nil {
			t.Fatal(err)
		}
		objects += len(deps.Items) + len(svcs.Items) + len(cms.Items)
	}
	return records, objects
}

// pendingRecords counts the release records in a pending state.
func pendingRecords(ctx context.Context, t *testing.T, ns string) int {
	t.Helper()
	secrets, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range secrets.Items {
		if strings.HasPrefix(s.Labels["status"], "pending") {
			n++
		}
	}
	return n
}

// waitForNewLeader waits until the leader election Lease is held by someone other than
// previous, and returns the holder.
func waitForNewLeader(t *testing.T, ns, leaseID, previous string) string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	var holder string
	harness.Eventually(t, timeout, "a new leader holds the Lease", func(ctx context.Context) (bool, string) {
		lease, err := cs.CoordinationV1().Leases(ns).Get(ctx, leaseID, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		holder = ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		return holder != "" && holder != previous, "holder " + holder
	})
	return holder
}

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
	startInformers(t, factory)
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

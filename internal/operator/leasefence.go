// A lease fence keeps a replica that lost the leader Lease without knowing it from writing
// to the cluster.
//
// Leader election protects against a leader that dies or loses the apiserver: a live leader that
// cannot renew its Lease gives up leadership after the renew deadline, before any other replica
// may take over (after the lease duration). A leader that is frozen instead (a long GC pause, a
// suspended VM, a stalled node, SIGSTOP) notices nothing: when it resumes, its in-flight Helm
// actions go on from where they stopped, possibly minutes after another replica took over and
// finished the same work. Unfenced, a resumed install then failed on the objects the new leader
// had created, and helm-operator-plugins' uninstall-on-failure deleted them.
//
// A Fence wraps the leader election lock to time every renewal of the Lease by this replica, on
// the boot clock (CLOCK_BOOTTIME), which runs on while the process is stopped and while the
// machine is suspended. Go's monotonic clock (CLOCK_MONOTONIC) stops during a suspend: a VM
// suspended for an hour would find its last renewal a few seconds old. Wrapped around the transport
// of the manager's clients, it refuses every request that writes once the last renewal is older
// than the renew deadline: by then a live leader would have stepped down itself, and the lease
// duration leaves the difference for requests already on the wire.
//
// What it cannot close: a request checked just before the freeze and sent just after. Release
// records are also written with optimistic concurrency (helmconfig.Store), so that such a
// straggler cannot overwrite a newer record.

package operator

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fencedWrites counts the writes refused because this replica may no longer lead.
var fencedWrites = onceCounter("myproxy_operator_fenced_writes_total",
	"Writes to the apiserver refused because this replica's leader Lease may have passed to another.")

// Fence is a leader election lock that knows whether this replica may still act as the leader.
type Fence struct {
	resourcelock.Interface
	validFor time.Duration        // how long writes are allowed after each renewal: the renew deadline
	now      func() time.Duration // BootClock

	mu      sync.Mutex
	leading bool
	renewed time.Duration // when the last successful write of the Lease naming this replica was sent
}

// Create implements resourcelock.Interface.
func (f *Fence) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return f.write(ctx, ler, f.Interface.Create)
}

// Update implements resourcelock.Interface.
func (f *Fence) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	return f.write(ctx, ler, f.Interface.Update)
}

func (f *Fence) write(ctx context.Context, ler resourcelock.LeaderElectionRecord,
	next func(context.Context, resourcelock.LeaderElectionRecord) error) error {
	// The time before sending: the apiserver stores the renewal later, and other replicas count
	// the lease duration from when they see it, later still.
	sent := f.now()
	err := next(ctx, ler)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case ler.HolderIdentity != f.Identity():
		f.leading = false // releasing the Lease (on shutdown), whether or not that succeeded
	case err == nil:
		f.leading, f.renewed = true, sent
	}
	return err
}

// Leading reports whether this replica holds the Lease, renewed within the renew deadline.
func (f *Fence) Leading() bool { return f.Check() == nil }

// Check returns an error unless this replica holds the Lease, renewed within the renew deadline.
func (f *Fence) Check() error {
	f.mu.Lock()
	leading, renewed := f.leading, f.renewed
	f.mu.Unlock()
	if !leading {
		return fmt.Errorf("this replica does not hold the leader Lease %s", f.Describe())
	}
	if age := f.now() - renewed; age >= f.validFor {
		return fmt.Errorf("this replica last renewed the leader Lease %s %s ago, longer than the renew deadline %s: "+
			"another replica may lead now", f.Describe(), age.Round(time.Millisecond), f.validFor)
	}
	return nil
}

// WrapTransport fences the requests of a client that can write: use it as a rest.Config's
// WrapTransport for every client of the manager but the leader election's own.
func (f *Fence) WrapTransport(next http.RoundTripper) http.RoundTripper {
	return promhttp.RoundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if writes(req) {
			if err := f.Check(); err != nil {
				fencedWrites().Inc()
				return nil, fmt.Errorf("refusing to write (%s %s): %w", req.Method, req.URL.Path, err)
			}
		}
		return next.RoundTrip(req)
	})
}

// writes tells whether a request may change the cluster.
func writes(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	// Token and access reviews ask a question and change nothing; the metrics endpoint of every
	// replica, leader or not, asks them of each scraper.
	p := req.URL.Path
	return !strings.Contains(p, "/apis/authentication.k8s.io/") && !strings.Contains(p, "/apis/authorization.k8s.io/")
}

// BootClock returns the time since boot, suspends included (CLOCK_BOOTTIME).
func BootClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// Linux has had CLOCK_BOOTTIME since 2.6.39; keep time moving rather than freeze the fence open.
		return time.Duration(time.Now().UnixNano())
	}
	return time.Duration(ts.Nano())
}

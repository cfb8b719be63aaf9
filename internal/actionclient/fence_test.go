package actionclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// lock is a resourcelock.Interface whose writes succeed unless failing is set.
type lock struct {
	resourcelock.Interface // only Create, Update, Identity and Describe are called
	failing                bool
}

func (l *lock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return l.err() }
func (l *lock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return l.err() }
func (l *lock) Identity() string                                                { return "me" }
func (l *lock) Describe() string                                                { return "ns/lease" }
func (l *lock) err() error {
	if l.failing {
		return errors.New("conflict")
	}
	return nil
}

type clock struct{ t time.Duration }

func (c *clock) now() time.Duration { return c.t }

func testFence() (*Fence, *lock, *clock) {
	l, c := &lock{}, &clock{t: 1000 * time.Second}
	return &Fence{Interface: l, ValidFor: 10 * time.Second, Now: c.now, Refused: func() {}}, l, c
}

func TestCheckFollowsRenewals(t *testing.T) {
	ctx := context.Background()
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: "me"}
	f, l, c := testFence()
	if err := f.Check(); err == nil || !strings.Contains(err.Error(), "does not hold") {
		t.Errorf("before acquiring: %v, want an error saying it does not hold the Lease", err)
	}
	if err := f.Create(ctx, mine); err != nil {
		t.Fatal(err)
	}
	c.t += (9 * time.Second)
	if err := f.Check(); err != nil {
		t.Errorf("9 s after acquiring (renew deadline 10 s): %v", err)
	}
	c.t += (time.Second)
	if err := f.Check(); err == nil || !strings.Contains(err.Error(), "10s ago") {
		t.Errorf("10 s after acquiring: %v, want an error giving the age of the renewal", err)
	}
	if err := f.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Errorf("after a renewal: %v", err)
	}

	// A failed renewal does not extend the Lease.
	c.t += (6 * time.Second)
	l.failing = true
	if err := f.Update(ctx, mine); err == nil {
		t.Fatal("the lock's error was not returned")
	}
	c.t += (5 * time.Second)
	if err := f.Check(); err == nil {
		t.Error("11 s after the last successful renewal, writes are still allowed")
	}

	// Releasing the Lease ends leadership at once, even when the release fails.
	l.failing = false
	if err := f.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	l.failing = true
	_ = f.Update(ctx, resourcelock.LeaderElectionRecord{})
	if err := f.Check(); err == nil {
		t.Error("after releasing the Lease, writes are still allowed")
	}
}

func TestTransportFencesWritesOnly(t *testing.T) {
	f, _, c := testFence()
	var reached []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.Method+" "+r.URL.Path)
	}))
	defer server.Close()
	client := &http.Client{Transport: f.WrapTransport(http.DefaultTransport)}
	do := func(method, path string) error {
		req, err := http.NewRequest(method, server.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	// Not leading: reads and reviews pass, writes are refused.
	requests := []struct {
		method, path string
		write        bool
	}{
		{method: http.MethodGet, path: "/api/v1/namespaces/a/secrets", write: false},
		{method: http.MethodPost, path: "/apis/authorization.k8s.io/v1/subjectaccessreviews", write: false},
		{method: http.MethodPost, path: "/apis/authentication.k8s.io/v1/tokenreviews", write: false},
		{method: http.MethodPost, path: "/api/v1/namespaces/a/configmaps", write: true},
		{method: http.MethodPut, path: "/apis/apps/v1/namespaces/a/deployments/d", write: true},
		{method: http.MethodPatch, path: "/apis/apps/v1/namespaces/a/deployments/d", write: true},
		{method: http.MethodDelete, path: "/api/v1/namespaces/a/services/s", write: true},
	}
	for _, r := range requests {
		err := do(r.method, r.path)
		if r.write && (err == nil || !strings.Contains(err.Error(), "refusing to write ("+r.method+" "+r.path+")")) {
			t.Errorf("%s %s while not leading: %v, want refused", r.method, r.path, err)
		}
		if !r.write && err != nil {
			t.Errorf("%s %s while not leading: %v, want it sent", r.method, r.path, err)
		}
	}
	if len(reached) != 3 {
		t.Errorf("the server got %v, want only the read and the reviews", reached)
	}

	// Leading: everything passes.
	if err := f.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	c.t += (time.Second)
	for _, r := range requests {
		if err := do(r.method, r.path); err != nil {
			t.Errorf("%s %s while leading: %v", r.method, r.path, err)
		}
	}
}

// A suspend of the machine moves the boot clock by its length (the monotonic clock would not
// move): the fence closes on resume.
func TestASuspendClosesTheFence(t *testing.T) {
	f, _, c := testFence()
	if err := f.Create(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me"}); err != nil {
		t.Fatal(err)
	}
	c.t += time.Second
	if !f.Leading() {
		t.Fatal("not leading right after acquiring")
	}
	c.t += time.Hour // suspended
	if f.Leading() {
		t.Error("still leading after a suspend longer than the renew deadline")
	}
}

// BootClock is CLOCK_BOOTTIME: it agrees with /proc/uptime, which counts from boot, suspends
// included.
func TestBootClockIsTheUptime(t *testing.T) {
	raw, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Skip("no /proc/uptime:", err)
	}
	before := BootClock()
	var uptime float64
	if _, err := fmt.Sscan(string(raw), &uptime); err != nil {
		t.Fatal(err)
	}
	after := BootClock()
	up := time.Duration(uptime * float64(time.Second))
	// /proc/uptime has a resolution of 10 ms.
	if up < before-20*time.Millisecond || up > after+20*time.Millisecond {
		t.Errorf("BootClock %s..%s, /proc/uptime %s", before, after, up)
	}
}

package actionclient

import (
	"context"
	"strings"
	"testing"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	"k8s.io/client-go/tools/record"
)

func TestSoleWriter(t *testing.T) {
	leading, notLeading := func() bool { return true }, func() bool { return false }
	cases := []struct {
		name    string
		writer  SoleWriter
		pending time.Duration
		want    string // in the reason, or in the error when errs
		errs    bool
	}{
		{name: "Lease holder, just pending", writer: SoleWriter{Leading: leading, PendingAfter: time.Hour},
			pending: time.Second, want: "this replica holds the leader Lease"},
		{name: "not the Lease holder", writer: SoleWriter{Leading: notLeading, PendingAfter: time.Second},
			pending: time.Hour, want: "does not hold the leader Lease", errs: true},
		{name: "unelected, recent", writer: SoleWriter{PendingAfter: 10 * time.Minute},
			pending: time.Minute, want: "leader election is off, so another process may be acting on it", errs: true},
		{name: "unelected, abandoned", writer: SoleWriter{PendingAfter: 10 * time.Minute},
			pending: 11 * time.Minute, want: "pending for 11m0s, longer than --unlock-pending-after 10m0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			why, err := tc.writer.why(time.Now().Add(-tc.pending))
			got := why
			if err != nil {
				got = err.Error()
			}
			if (err != nil) != tc.errs || !strings.Contains(got, tc.want) {
				t.Errorf("why = %q, %v; want %q (error: %v)", why, err, tc.want, tc.errs)
			}
		})
	}
}

// pendingClient serves a release left pending, through in-memory storage, and counts what it
// is asked.
type pendingClient struct {
	recordingClient
	cfg    *action.Configuration
	writes int
}

func (p *pendingClient) Config() *action.Configuration { return p.cfg }

func (p *pendingClient) Get(name string, _ ...helmclient.GetOption) (*release.Release, error) {
	p.gets++
	return p.cfg.Releases.Last(name)
}

// countingDriver counts the record writes that reach storage.
type countingDriver struct {
	driver.Driver
	updates *int
}

func (c countingDriver) Update(key string, rls *release.Release) error {
	*c.updates++
	return c.Driver.Update(key, rls)
}

// A release left pending is unlocked when the reconcile begins, by this process only when it may
// be its only writer, and the reconciler's reads never write: the release it reads is the failed
// one, as often as it reads it.
func TestAPendingReleaseIsUnlockedWhenTheReconcileBegins(t *testing.T) {
	for _, tc := range []struct {
		name    string
		writer  SoleWriter
		unlocks int
	}{
		{name: "the Lease holder", writer: SoleWriter{Leading: func() bool { return true }}, unlocks: 1},
		{name: "not the Lease holder", writer: SoleWriter{Leading: func() bool { return false }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pendingClient{}
			mem := driver.NewMemory()
			p.cfg = &action.Configuration{Releases: storage.Init(countingDriver{Driver: mem, updates: &p.writes})}
			pendingRel := &release.Release{Name: "p", Namespace: "ns", Version: 2,
				Info: &release.Info{Status: release.StatusPendingUpgrade, LastDeployed: helmtime.Now()}}
			if err := mem.Create("sh.helm.release.v1.p.v2", pendingRel); err != nil {
				t.Fatal(err)
			}
			events := record.NewFakeRecorder(10)
			ac, err := New(getterOf(p), Options{Unlock: tc.writer, Recorder: events}).ActionClientFor(context.Background(), crOwnedBy(""))
			if err != nil {
				t.Fatal(err)
			}
			if p.writes != tc.unlocks {
				t.Errorf("the reconcile began with %d record writes, want %d", p.writes, tc.unlocks)
			}
			for range 3 {
				rel, err := ac.Get("p")
				switch {
				case tc.unlocks == 1 && (err != nil || rel.Info.Status != release.StatusFailed ||
					!strings.HasPrefix(rel.Info.Description, UnlockedDescription)):
					t.Errorf("the reconciler read %v, %v; want the release marked failed", rel, err)
				case tc.unlocks == 0 && (err == nil || !strings.Contains(err.Error(), "is left so")):
					t.Errorf("the reconciler read %v, %v; want an error saying the release is left pending", rel, err)
				}
			}
			if p.writes != tc.unlocks || p.gets != 1 {
				t.Errorf("the reconciler's reads made %d writes and %d storage reads, want %d and 1", p.writes, p.gets, tc.unlocks)
			}
			if tc.unlocks == 1 && len(events.Events) != 1 {
				t.Errorf("%d Events, want the one that says the release was unlocked", len(events.Events))
			}
		})
	}
}

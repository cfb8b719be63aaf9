package actionclient

import (
	"strings"
	"testing"
	"time"
)

func TestSoleWriter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	leading, notLeading := func() bool { return true }, func() bool { return false }
	cases := []struct {
		name    string
		writer  SoleWriter
		pending time.Duration
		want    string // in the reason, or in the error when errs
		errs    bool
	}{
		{name: "Lease holder, just pending", writer: SoleWriter{Leading: leading, PendingAfter: time.Hour, Now: clock},
			pending: time.Second, want: "this replica holds the leader Lease"},
		{name: "not the Lease holder", writer: SoleWriter{Leading: notLeading, PendingAfter: time.Second, Now: clock},
			pending: time.Hour, want: "does not hold the leader Lease", errs: true},
		{name: "unelected, recent", writer: SoleWriter{PendingAfter: 10 * time.Minute, Now: clock},
			pending: time.Minute, want: "leader election is off, so another process may be acting on it", errs: true},
		{name: "unelected, abandoned", writer: SoleWriter{PendingAfter: 10 * time.Minute, Now: clock},
			pending: 11 * time.Minute, want: "pending for 11m0s, longer than --unlock-pending-after 10m0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			why, err := tc.writer.why(now.Add(-tc.pending))
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

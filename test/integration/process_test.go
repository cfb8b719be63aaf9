package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/example/myproxy-operator/test/harness"
)

// The probes answer while the operator runs, and SIGTERM ends it cleanly (exit status 0).
func TestProbesAndGracefulShutdown(t *testing.T) {
	probes := harness.FreeAddr(t)
	op := startOperatorWith(t, "--health-probe-bind-address="+probes)
	for _, path := range []string{"/healthz", "/readyz"} {
		harness.Eventually(t, 30*time.Second, "probe "+path, func(ctx context.Context) (bool, string) {
			resp, err := http.Get("http://" + probes + path)
			if err != nil {
				return false, err.Error()
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, fmt.Sprintf("status %d", resp.StatusCode)
		})
	}
	start := time.Now()
	op.Stop(t)
	exited, err := op.Exited()
	if !exited || err != nil {
		t.Errorf("after SIGTERM: exited=%v err=%v, want a clean exit", exited, err)
	}
	t.Logf("stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}

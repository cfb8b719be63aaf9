package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/example/myproxy-operator/internal/options"
	"github.com/example/myproxy-operator/test/harness"
)

// restartResult is one restart of this operator over a converged fleet whose chart did not
// change: every reconcile finds nothing to do, the work the digests fast path answers.
type restartResult struct {
	Variant       string   `json:"variant"`
	FastPaths     string   `json:"fastPaths"`
	Seconds       float64  `json:"seconds"`    // start to at rest (every resource reconciled, queues empty)
	CPUSeconds    float64  `json:"cpuSeconds"` // the process's CPU from its start to at rest
	Requests      requests `json:"requests"`
	RequestsPerCR float64  `json:"requestsPerCR"`
}

// restartVariants are a build with every fast path and without digests, of the fast paths it
// has (paths).
func restartVariants(paths []string) []variant {
	others := slices.DeleteFunc(slices.Clone(paths), func(o string) bool { return o == options.FastDigests })
	return []variant{{name: "every fast path", fastPaths: "true"}, {name: "without " + options.FastDigests, fastPaths: strings.Join(others, ",")}}
}

// restartRounds is how many times each variant restarts, interleaved.
const restartRounds = 2

// restarts restarts op, which has the fast paths paths, over e's converged fleet of n, each
// variant in turn, restartRounds times.
func restarts(ctx context.Context, s settings, c *cluster, e *env, op operator, paths []string, n int) ([]restartResult, error) {
	var out []restartResult
	for round := range restartRounds {
		for _, v := range restartVariants(paths) {
			o := op
			args := op.args
			o.args = func(m, h string) []string { return append(args(m, h), "--"+options.FastPathsFlag+"="+v.fastPaths) }
			progress("restart over the converged fleet, round %d: %s", round+1, v.name)
			start := time.Now()
			p, err := e.start(s, o, fmt.Sprintf("restart-%d-%s.log", round+1, strings.ReplaceAll(v.name, " ", "-")))
			if err != nil {
				return out, err
			}
			restAt, err := atRest(ctx, fmt.Sprintf("127.0.0.1:%d", s.portBase+90), n, s.convergeLimit())
			if err != nil {
				p.stop()
				return out, err
			}
			u, err := p.usage()
			p.stop()
			if err != nil {
				return out, err
			}
			res := restartResult{Variant: v.name, FastPaths: v.fastPaths, Seconds: restAt.Sub(start).Seconds(), CPUSeconds: u.CPUSeconds}
			if res.Requests, err = countRequests(c.auditLog(), op.user, start, restAt, false); err != nil {
				return out, err
			}
			res.RequestsPerCR = float64(res.Requests.total()) / float64(n)
			progress("restart %s: at rest in %.1fs, %.1f CPU-s, %.2f requests per MyProxy", v.name, res.Seconds, res.CPUSeconds, res.RequestsPerCR)
			out = append(out, res)
		}
	}
	return out, nil
}

// atRest waits until the operator at addr has reconciled every one of n resources since it
// started, its queues are empty and no reconcile ran between two scrapes a second apart.
func atRest(ctx context.Context, addr string, n int, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	last := -1.0
	for time.Now().Before(deadline) {
		body, err := harness.ScrapeMetrics(addr)
		if err == nil {
			done, err1 := harness.SumSamples(body, "controller_runtime_reconcile_total", `controller="myproxy-controller"`)
			depth, err2 := harness.SumSamples(body, "workqueue_depth", "")
			if err1 == nil && err2 == nil && done >= float64(n) && depth == 0 && done == last {
				return time.Now(), nil
			}
			last = done
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return time.Time{}, fmt.Errorf("not at rest within %s", limit)
}

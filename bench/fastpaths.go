package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/example/myproxy-operator/internal/options"
)

// variant is this operator with a choice of fast paths (--fast-paths).
type variant struct {
	name, fastPaths string
}

// fastPathVariants are this operator with every fast path, with none, and with each one
// alone off: what each fast path earns is the difference between "every fast path" and
// "without" it.
func fastPathVariants() []variant {
	out := []variant{{name: "every fast path", fastPaths: "true"}, {name: "no fast path", fastPaths: "false"}}
	for _, p := range options.AllFastPaths {
		others := slices.DeleteFunc(slices.Clone(options.AllFastPaths), func(o string) bool { return o == p })
		out = append(out, variant{name: "without " + p, fastPaths: strings.Join(others, ",")})
	}
	return out
}

// fastPathsReport is every run of every variant, in the order they ran.
type fastPathsReport struct {
	Command string                   `json:"command"`
	Machine string                   `json:"machine"`
	Started time.Time                `json:"started"`
	Rounds  int                      `json:"rounds"`
	Runs    map[string][]fleetResult `json:"runs"` // by variant
}

// benchFastPaths runs the fleet under every variant, interleaved: ROUNDS rounds, each running
// every variant once, in an order rotated by one each round, so that a drift of the machine
// over the run (a warming cache, another process) spreads over every variant instead of
// landing on one. It reports each figure's median and its spread (min to max) per variant.
func benchFastPaths(ctx context.Context, s settings, c *cluster, rounds int) error {
	variants := fastPathVariants()
	rep := fastPathsReport{Command: fmt.Sprintf("make bench-fast-paths N=%d LOOKUPS=%d IDLE=%s SAMPLES=%d ROUNDS=%d",
		s.n, s.lookups, s.idle, s.samples, rounds), Machine: machine(), Started: time.Now(), Rounds: rounds,
		Runs: map[string][]fleetResult{}}
	for round := range rounds {
		for i := range variants {
			v := variants[(i+round)%len(variants)]
			op := ours(s)
			op.name = subjectOurs + ", " + v.name
			args := op.args
			op.args = func(m, h string) []string { return append(args(m, h), "--"+options.FastPathsFlag+"="+v.fastPaths) }
			progress("round %d of %d: %s", round+1, rounds, op.name)
			res, _, err := benchOperator(ctx, s, c, op)
			if err != nil {
				return fmt.Errorf("%s: %w", op.name, err)
			}
			rep.Runs[v.name] = append(rep.Runs[v.name], res)
			if err := rep.write(s.dir, variants); err != nil {
				return err
			}
		}
	}
	return nil
}

// fastPathFigures are the figures the report compares, each read from a run.
var fastPathFigures = []struct {
	name string
	get  func(fleetResult) float64
}{
	{"all Deployed (s)", func(r fleetResult) float64 { return r.DeployedSeconds }},
	{"CPU-s to Deployed", func(r fleetResult) float64 { return r.CPUSeconds }},
	{"peak RSS (MiB)", func(r fleetResult) float64 { return r.PeakRSSMiB }},
	{"requests per CR", func(r fleetResult) float64 { return r.RequestsPerCR }},
	{"idle CPU-s / CR / min", func(r fleetResult) float64 { return r.IdleCPUSecondsPerCRMinute }},
	{"idle requests / CR / min", func(r fleetResult) float64 { return r.IdleRequestsPerCRMinute }},
	{"one more CR to Deployed p50 (s)", func(r fleetResult) float64 { return r.LatencyP50 }},
	{"delete all (s)", func(r fleetResult) float64 { return r.DeleteSeconds }},
}

// spread is the median of values and their range, as "median (min–max)".
func spread(values []float64) string {
	if len(values) == 0 {
		return "—"
	}
	v := slices.Sorted(slices.Values(values))
	median := v[len(v)/2]
	if len(v)%2 == 0 {
		median = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return fmt.Sprintf("%s (%s–%s)", f3(median), f3(v[0]), f3(v[len(v)-1]))
}

func (r fastPathsReport) write(dir string, variants []variant) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "fastpaths.json"), b, 0o644); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Fast-path results\n\nWritten by `make bench-fast-paths`; what each fast path replaces: "+
		"[architecture.md](architecture.md#fast-paths).\n\n`%s` on %s, %s.\n\n", r.Command, r.Machine, r.Started.UTC().Format("2006-01-02"))
	md.WriteString("This operator with every fast path, with none, and with each one alone off (`--fast-paths`), " +
		"the same fleet each time, the variants interleaved round after round. Each cell is the median of the rounds " +
		"and, in brackets, their range: a difference smaller than the ranges is noise.\n\n")
	md.WriteString("| variant | runs |")
	for _, f := range fastPathFigures {
		md.WriteString(" " + f.name + " |")
	}
	md.WriteString("\n|---|---|" + strings.Repeat("---|", len(fastPathFigures)) + "\n")
	for _, v := range variants {
		runs := r.Runs[v.name]
		fmt.Fprintf(&md, "| %s (`--fast-paths=%s`) | %d |", v.name, v.fastPaths, len(runs))
		for _, f := range fastPathFigures {
			values := make([]float64, 0, len(runs))
			for _, run := range runs {
				values = append(values, f.get(run))
			}
			md.WriteString(" " + spread(values) + " |")
		}
		md.WriteString("\n")
	}
	return os.WriteFile(filepath.Join(dir, "fastpaths.md"), []byte(md.String()), 0o644)
}

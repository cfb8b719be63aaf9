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

// variant is this operator (or a build of it, bin) with a choice of fast paths (--fast-paths).
type variant struct {
	name, fastPaths, bin string
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
	for _, b := range s.builds {
		variants = append(variants, variantsOf(b)...)
	}
	rep := fastPathsReport{Command: fmt.Sprintf("make bench-fast-paths N=%d LOOKUPS=%d IDLE=%s SAMPLES=%d ROUNDS=%d",
		s.n, s.lookups, s.idle, s.samples, rounds), Machine: machine(), Started: time.Now(), Rounds: rounds,
		Runs: map[string][]fleetResult{}}
	for round := range rounds {
		for i := range variants {
			v := variants[(i+round)%len(variants)]
			op := ours(s)
			op.name = subjectOurs + ", " + v.name
			if v.bin != "" {
				op.bin, op.pprof = v.bin, ""
			}
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
	names, notes := make([]string, len(variants)), make([]string, len(variants))
	for i, v := range variants {
		names[i], notes[i] = v.name, fmt.Sprintf(" (`--fast-paths=%s`)", v.fastPaths)
	}
	spreadTable(&md, "variant", names, notes, r.Runs)
	return os.WriteFile(filepath.Join(dir, "fastpaths.md"), []byte(md.String()), 0o644)
}

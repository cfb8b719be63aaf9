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

// build is another build of this operator run side by side with the one under measurement (the
// code before a change): BUILDS=name=path[:fast+paths],... The fast paths named are those the
// build has (its fast-path variants are made of them) and takes in a fleet run; unnamed, they
// default to this code's, and a fleet run leaves the build at its own defaults.
type build struct {
	name, bin string
	fastPaths []string
	named     bool // fastPaths were named: a fleet run takes exactly those
}

func parseBuilds(v string) ([]build, error) {
	var out []build
	for _, spec := range strings.Split(v, ",") {
		if spec = strings.TrimSpace(spec); spec == "" {
			continue
		}
		name, rest, ok := strings.Cut(spec, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("BUILDS: %q is not name=path[:fast+paths]", spec)
		}
		b := build{name: name, fastPaths: options.AllFastPaths}
		bin, paths, hasPaths := strings.Cut(rest, ":")
		if b.bin, _ = filepath.Abs(bin); hasPaths {
			b.fastPaths, b.named = strings.Split(paths, "+"), true
		}
		if _, err := os.Stat(b.bin); err != nil {
			return nil, fmt.Errorf("BUILDS: %s: %w", name, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// key is the build's SUBJECTS name; subject, its name in reports.
func (b build) key() string     { return keyOurs + "@" + b.name }
func (b build) subject() string { return subjectOurs + " (" + b.name + ")" }

// operator runs the build as this operator runs, under a user of its own.
func (b build) operator(s settings) operator {
	op := ours(s)
	op.name, op.user, op.bin, op.pprof = b.subject(), "bench-"+b.name, b.bin, ""
	if args := op.args; b.named {
		op.args = func(m, h string) []string {
			return append(args(m, h), "--"+options.FastPathsFlag+"="+strings.Join(b.fastPaths, ","))
		}
	}
	return op
}

// buildOf returns the build of a SUBJECTS name.
func (s settings) buildOf(key string) (build, bool) {
	i := slices.IndexFunc(s.builds, func(b build) bool { return b.key() == key })
	if i < 0 {
		return build{}, false
	}
	return s.builds[i], true
}

// variantsOf are a build's fast-path variants (fastPathVariants), named after the build.
func variantsOf(b build) []variant {
	out := []variant{{name: "every fast path", fastPaths: "true"}, {name: "no fast path", fastPaths: "false"}}
	for _, p := range b.fastPaths {
		others := slices.DeleteFunc(slices.Clone(b.fastPaths), func(o string) bool { return o == p })
		out = append(out, variant{name: "without " + p, fastPaths: strings.Join(others, ",")})
	}
	for i := range out {
		out[i].name, out[i].bin = b.name+": "+out[i].name, b.bin
	}
	return out
}

// restartReport is RESTART=1's: each build's restarts over a fleet it converged itself (a
// release carries the digest of the code that rendered it, so a restart of another build would
// render every release again).
type restartReport struct {
	Command string          `json:"command"`
	Machine string          `json:"machine"`
	Started time.Time       `json:"started"`
	Runs    []restartResult `json:"runs"`
}

// benchRestarts converges the fleet under this operator and each build in turn, each on a fresh
// cluster, and restarts it there with every fast path and without digests (restarts).
func benchRestarts(ctx context.Context, s settings, c *cluster) error {
	rep := restartReport{Command: fmt.Sprintf("make bench RESTART=1 N=%d", s.n), Machine: machine(), Started: time.Now()}
	ops, paths := []operator{ours(s)}, [][]string{options.AllFastPaths}
	for _, b := range s.builds {
		ops, paths = append(ops, b.operator(s)), append(paths, b.fastPaths)
	}
	for i, op := range ops {
		e, t, err := freshTracked(ctx, c, op.name)
		if err != nil {
			return err
		}
		p, err := e.start(s, op, op.user+"-converge.log")
		if err != nil {
			return err
		}
		progress("%s: converging %d MyProxies before the restarts", op.name, s.n)
		if err := parallel(ctx, s.workers, names("fleet", s.n), createProxy(e.dyn, fleetNamespace)); err != nil {
			p.stop()
			return err
		}
		_, err = t.waitFor(ctx, "all Deployed", s.convergeLimit(), allDeployed(s.n))
		p.stop()
		if err != nil {
			return err
		}
		runs, err := restarts(ctx, s, c, e, op, paths[i], s.n)
		for i := range runs {
			runs[i].Variant = op.name + ": " + runs[i].Variant
		}
		rep.Runs = append(rep.Runs, runs...)
		if err != nil {
			return err
		}
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(s.dir, "restarts.json"), b, 0o644); err != nil {
			return err
		}
	}
	var md strings.Builder
	fmt.Fprintf(&md, "`%s` on %s, %s.\n\n| variant | at rest (s) | CPU-s | requests per MyProxy |\n|---|---|---|---|\n",
		rep.Command, rep.Machine, rep.Started.UTC().Format("2006-01-02"))
	for _, r := range rep.Runs {
		fmt.Fprintf(&md, "| %s | %.1f | %.1f | %.2f |\n", r.Variant, r.Seconds, r.CPUSeconds, r.RequestsPerCR)
	}
	fmt.Print(md.String())
	return os.WriteFile(filepath.Join(s.dir, "restarts.md"), []byte(md.String()), 0o644)
}

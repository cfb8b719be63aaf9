// Command bench measures this operator side by side with the stock operator-sdk helm-operator
// (same chart, same watches.yaml) and with a client-go baseline that creates the same objects
// with no operator at all: the physical limit of the machine. Each subject gets a fresh local
// control plane (hack/cluster) with an audit log, which attributes every API request to the
// subject's own user.
//
// Run it with `make bench`; settings come from the environment:
//
//	N=1000          MyProxies in the fleet
//	IDLE=5m         idle window after convergence
//	LOOKUPS=N/10    MyProxies with TLS added to the fleet before the idle window: their
//	                rendering reads the TLS Secret through lookup
//	SAMPLES=20      one-more-MyProxy latency samples
//	STOCK_SAMPLES=5 the same for the stock helm-operator, whose samples take a minute each
//	WORKERS=8       client workers that create and delete
//	UNRELATED=5000  unrelated Secrets and (as many) ConfigMaps for the memory run, 0 to skip
//	SUBJECTS=limit,myproxy-operator,helm-operator,helm-operator-tuned,helm-operator-plugins,helm-controller,helm-controller-tuned
//	                which subjects to run (the stock operator at its defaults and tuned as
//	                this operator runs, helm-operator-plugins' own run command tuned, Flux's
//	                helm-controller on HelmReleases at its defaults and tuned: flux.go)
//	BENCH_DIR=bin/bench   cluster state, operator logs, results.json and results.md
//	PROFILE=1       profile this operator while it converges (CPU, back-to-back profiles) and
//	                at all Deployed (live heap); the report says where both go by package
//	BASELINE=path   results.json of a run at a tenth of N: the goal table compares this
//	                operator's peak RSS with it
//	FLEET=0         skip the fleet runs: only the memory runs of the subjects
//	                (with KEEP=1, every fleet result is kept)
//	ROLLOUT=1       measure a chart rollout over the fleet instead, in waves and all at
//	                once (make bench-rollout); ROLLOUT_REPORT=1 writes its report
//	                again from rollout.json
//	BUILDS=name=path[:fast+paths],...  other builds of this operator (the code before a change),
//	                run as subjects of their own beside it (make bench), their fast-path variants
//	                beside its own (make bench-fast-paths), and restarted over their own fleets
//	                (RESTART=1); the fast paths a build has default to this code's
//	RESTART=1       measure restarts over a converged fleet, with every fast path and without
//	                digests, for this operator and each build
//	ROUNDS=1        run every subject's fleet this many times, interleaved (the order rotated
//	                by one each round); the report takes each subject's median run and shows
//	                the spread of every round
//	KEEP=1          keep the results of the subjects not run this time from the last
//	                results.json (to run one subject again, e.g. after a disturbed run);
//	                the report says which subjects were kept from when
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The names SUBJECTS gives the subjects that are not peers (peers: subjects.go), and every
// name it knows, in the default order.
const (
	keyLimit = "limit"
	keyOurs  = "myproxy-operator"
)

var subjectKeys = []string{keyLimit, keyOurs, "helm-operator", "helm-operator-tuned", "helm-operator-plugins", keyFlux, keyFluxTuned}

const (
	subjectLimit = "client-go limit"
	subjectOurs  = "myproxy-operator"
	subjectStock = "stock helm-operator"
	// subjectStockTuned and subjectPlugins run with this operator's workers and no periodic
	// reconcile (tunedAsOurs).
	subjectStockTuned = "stock helm-operator, tuned"
	subjectPlugins    = "helm-operator-plugins run, tuned"
)

type settings struct {
	root, dir        string
	n, samples       int
	lookups          int // MyProxies whose rendering looks up their TLS Secret
	stockSamples     int
	workers          int
	unrelated        int
	idle             time.Duration
	subjects         []string
	portBase         int
	ourBin, stockBin string
	pluginsBin       string
	fluxBin          string   // Flux's helm-controller
	fluxCRDs         string   // the CRDs it needs (HelmRelease, HelmChart, OCIRepository)
	ourArgs          []string // extra flags for this operator
	keep             bool     // keep the last results of subjects not run
	profile          bool     // profile this operator while it converges
	baseline         string   // results.json of a run at a smaller N
	fleet            bool     // run the fleet of each subject (FLEET=0: only the memory runs)
	rounds           int      // FAST_PATH_ROUNDS > 0: measure the fast paths instead (benchFastPaths)
	fleetRounds      int      // ROUNDS: runs of each subject's fleet, interleaved
	builds           []build  // BUILDS: other builds of this operator, side by side
	restart          bool     // RESTART=1: measure restarts over a converged fleet instead
	rollout          bool     // ROLLOUT=1: measure a chart rollout instead (benchRollout)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func loadSettings() (settings, error) {
	root, err := os.Getwd()
	if err != nil {
		return settings{}, err
	}
	s := settings{root: root, n: envInt("N", 1000), samples: envInt("SAMPLES", 20), stockSamples: envInt("STOCK_SAMPLES", 5), workers: envInt("WORKERS", 8),
		unrelated: envInt("UNRELATED", 5000), idle: 5 * time.Minute, portBase: envInt("BENCH_PORT_BASE", 23400),
		dir: filepath.Join(root, "bin", "bench"), subjects: slices.Clone(subjectKeys),
		ourBin: filepath.Join(root, "bin", "myproxy-operator"), stockBin: filepath.Join(root, "bin", "helm-operator"),
		pluginsBin: filepath.Join(root, "bin", "helm-operator-plugins"), fluxBin: filepath.Join(root, "bin", "helm-controller"),
		fluxCRDs: filepath.Join(root, "bin", "helm-controller-crds.yaml")}
	s.lookups = envInt("LOOKUPS", s.n/10)
	if v := os.Getenv("IDLE"); v != "" {
		if s.idle, err = time.ParseDuration(v); err != nil {
			return s, fmt.Errorf("IDLE: %w", err)
		}
	}
	if v := os.Getenv("SUBJECTS"); v != "" {
		s.subjects = strings.Split(v, ",")
	}
	// e.g. OPERATOR_ARGS=--pprof-bind-address=127.0.0.1:6060 to profile this operator under load
	s.ourArgs = strings.Fields(os.Getenv("OPERATOR_ARGS"))
	s.keep = os.Getenv("KEEP") == "1"
	s.profile = os.Getenv("PROFILE") == "1"
	s.baseline = os.Getenv("BASELINE")
	s.fleet = os.Getenv("FLEET") != "0"
	s.rounds = envInt("FAST_PATH_ROUNDS", 0)
	s.fleetRounds = max(1, envInt("ROUNDS", 1))
	s.rollout = os.Getenv("ROLLOUT") == "1"
	s.restart = os.Getenv("RESTART") == "1"
	if s.builds, err = parseBuilds(os.Getenv("BUILDS")); err != nil {
		return s, err
	}
	if os.Getenv("SUBJECTS") == "" {
		for _, b := range s.builds {
			s.subjects = append(s.subjects, b.key())
		}
	}
	if v := os.Getenv("BENCH_DIR"); v != "" {
		s.dir, _ = filepath.Abs(v)
	}
	if _, err := os.Stat(filepath.Join(root, "watches.yaml")); err != nil {
		return s, fmt.Errorf("run from the repository root: %w", err)
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return s, err
	}
	return s, s.stage()
}

// stage copies every binary the bench runs into the bench directory, and the bench runs the
// copies. How a file was written shows in the peak RSS of a process that runs it: the pages of
// a binary the linker has just written are mapped in larger runs at each fault than those of a
// binary written by a plain copy (docs/performance.md says by how much). Copies written alike
// compare alike, whichever was built last.
func (s *settings) stage() error {
	bins := []*string{&s.ourBin, &s.stockBin, &s.pluginsBin, &s.fluxBin}
	for i := range s.builds {
		bins = append(bins, &s.builds[i].bin)
	}
	dir := filepath.Join(s.dir, "staged")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i, bin := range bins {
		if _, err := os.Stat(*bin); err != nil {
			continue // not built: a subject that needs it says so when it runs
		}
		staged := filepath.Join(dir, fmt.Sprintf("%d-%s", i, filepath.Base(*bin)))
		if err := copyFile(*bin, staged); err != nil {
			return fmt.Errorf("staging %s: %w", *bin, err)
		}
		*bin = staged
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	_ = os.Remove(to) // a running copy keeps its inode
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func run() error {
	s, err := loadSettings()
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	c := &cluster{root: s.root, dir: filepath.Join(s.dir, "cluster"), portBase: s.portBase}
	defer func() { _ = c.down() }()

	if s.rounds > 0 {
		return benchFastPaths(ctx, s, c, s.rounds)
	}
	if s.rollout {
		return benchRollout(ctx, s, c)
	}
	if s.restart {
		return benchRestarts(ctx, s, c)
	}
	rep := &report{Started: time.Now(), Machine: machine(),
		Command: fmt.Sprintf("make bench N=%d LOOKUPS=%d IDLE=%s SAMPLES=%d STOCK_SAMPLES=%d UNRELATED=%d",
			s.n, s.lookups, s.idle, s.samples, s.stockSamples, s.unrelated)}
	if s.keep {
		if err := rep.keepFrom(filepath.Join(s.dir, "results.json"), s.subjects, s.fleet); err != nil {
			return err
		}
	}
	for round := range s.fleetRounds {
		if !s.fleet {
			break
		}
		for i := range s.subjects {
			name := s.subjects[(i+round)%len(s.subjects)]
			progress("round %d of %d: %s", round+1, s.fleetRounds, name)
			started := time.Now()
			res, err := runFleet(ctx, s, c, name, rep)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			res.Started = started
			rep.addRun(res)
			if err := rep.write(s.dir); err != nil {
				return err
			}
		}
	}
	if s.unrelated > 0 {
		for _, name := range s.subjects {
			var op operator
			switch name {
			case keyOurs:
				op = ours(s)
			case "helm-operator": // at its defaults: tuning does not change what it caches
				op = stock(s)
			default:
				continue
			}
			m, err := benchMemory(ctx, s, c, op)
			if err != nil {
				return fmt.Errorf("%s, memory: %w", name, err)
			}
			rep.Memory = slices.DeleteFunc(rep.Memory, func(k memoryResult) bool { return k.Subject == m.Subject })
			rep.Memory = append(rep.Memory, m)
			rep.sortFleet()
			if err := rep.write(s.dir); err != nil {
				return err
			}
		}
	}
	if s.baseline != "" {
		if err := rep.baselineFrom(s.baseline); err != nil {
			return err
		}
	}
	rep.evaluate()
	if err := rep.write(s.dir); err != nil {
		return err
	}
	rep.markdown(os.Stdout)
	fmt.Fprintf(os.Stderr, "bench: results in %s/results.{json,md}\n", s.dir)
	return nil
}

// runFleet runs the fleet of the subject of that SUBJECTS name; this operator's profile, when
// asked for, goes into rep.
func runFleet(ctx context.Context, s settings, c *cluster, name string, rep *report) (fleetResult, error) {
	switch name {
	case keyLimit:
		return benchLimit(ctx, s, c)
	case keyOurs:
		res, prof, err := benchOperator(ctx, s, c, ours(s))
		if prof != nil {
			rep.Profiles = append(rep.Profiles, *prof)
		}
		return res, err
	}
	if b, ok := s.buildOf(name); ok {
		res, _, err := benchOperator(ctx, s, c, b.operator(s))
		return res, err
	}
	peer, ok := peers[name]
	if !ok {
		return fleetResult{}, fmt.Errorf("unknown subject %q (%s)", name, strings.Join(subjectKeys, ", "))
	}
	res, _, err := benchOperator(ctx, s, c, peer(s))
	return res, err
}

// subjectOrder is the order of the report's rows; other builds of this operator follow it.
var subjectOrder = []string{subjectLimit, subjectOurs, subjectStock, subjectStockTuned, subjectPlugins, subjectFlux, subjectFluxTuned}

func rowOrder(subject string) int {
	if i := slices.Index(subjectOrder, subject); i >= 0 {
		return i
	}
	return len(subjectOrder)
}

func (r *report) sortFleet() {
	slices.SortStableFunc(r.Fleet, func(a, b fleetResult) int {
		return rowOrder(a.Subject) - rowOrder(b.Subject)
	})
	slices.SortStableFunc(r.Memory, func(a, b memoryResult) int {
		return slices.Index(subjectOrder, a.Subject) - slices.Index(subjectOrder, b.Subject)
	})
}

// keepFrom takes from the report at path the results of the subjects that will not run now
// (every fleet result when the fleets do not run).
func (r *report) keepFrom(path string, running []string, fleets bool) error {
	last, err := readReport(path)
	if err != nil {
		return fmt.Errorf("KEEP=1: %w", err)
	}
	if last.Command != r.Command {
		return fmt.Errorf("KEEP=1: the last run had other settings (%s), this one: %s", last.Command, r.Command)
	}
	runs := map[string]bool{}
	for _, name := range running {
		switch name {
		case keyLimit:
			runs[subjectLimit] = true
		case keyOurs:
			runs[subjectOurs] = true
		default:
			if strings.HasPrefix(name, keyOurs+"@") {
				runs[subjectOurs+" ("+strings.TrimPrefix(name, keyOurs+"@")+")"] = true
			}
			if peer, ok := peers[name]; ok {
				runs[peer(settings{}).name] = true
			}
		}
	}
	for _, f := range last.Fleet {
		if !runs[f.Subject] || !fleets {
			if f.Started.IsZero() { // written before results carried their own start
				f.Started = last.keptSince(f.Subject)
			}
			r.Fleet = append(r.Fleet, f)
			if runs := last.Runs[f.Subject]; len(runs) > 0 {
				if r.Runs == nil {
					r.Runs = map[string][]fleetResult{}
				}
				r.Runs[f.Subject] = runs
			}
			r.Kept = append(r.Kept, fmt.Sprintf("%s (%s)", f.Subject, f.Started.Format(time.RFC3339)))
		}
	}
	for _, m := range last.Memory {
		if !runs[m.Subject] {
			r.Memory = append(r.Memory, m)
		}
	}
	r.sortFleet()
	return nil
}

// keptSince is when a subject of this report was run: its own Kept entry, if it was kept from
// an earlier run, or this run's start.
func (r *report) keptSince(subject string) time.Time {
	for _, k := range r.Kept {
		if at, ok := strings.CutPrefix(k, subject+" ("); ok {
			if t, err := time.Parse(time.RFC3339, strings.TrimSuffix(at, ")")); err == nil {
				return t
			}
		}
	}
	return r.Started
}

func (r *report) write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "results.md"))
	if err != nil {
		return err
	}
	defer f.Close()
	r.markdown(f)
	return nil
}

// machine describes the machine a run measured on.
func machine() string { return fmt.Sprintf("%d cores", runtime.NumCPU()) }

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// cpuProfileSeconds is the length of each CPU profile taken while a fleet converges: profiles
// are taken back to back, and the last one ends at most this long after convergence.
const cpuProfileSeconds = 20

// profileShare is one package's share of a profile.
type profileShare struct {
	Package string  `json:"package"`
	Flat    float64 `json:"flat"` // share of samples whose innermost frame is in the package
	Cum     float64 `json:"cum"`  // share of samples with a frame in the package
}

// profileResult is where one subject's CPU time (while converging) and live heap (at all
// Deployed) went, by Go package.
type profileResult struct {
	Subject    string         `json:"subject"`
	CPUSeconds float64        `json:"cpuSeconds"` // sampled
	CPU        []profileShare `json:"cpu"`
	HeapMiB    float64        `json:"heapMiB"` // live heap sampled at all Deployed
	Heap       []profileShare `json:"heap"`
	Files      []string       `json:"files"`
}

// cpuProfiler takes CPU profiles of a process through its pprof endpoint, back to back, until
// stopped.
type cpuProfiler struct {
	cancel context.CancelFunc
	done   chan struct{}
	files  []string
	err    error
}

func startCPUProfiles(ctx context.Context, addr, dir string) *cpuProfiler {
	ctx, cancel := context.WithCancel(ctx)
	p := &cpuProfiler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; ctx.Err() == nil; i++ {
			path := filepath.Join(dir, fmt.Sprintf("cpu-%03d.pprof", i))
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, cpuProfileSeconds)
			// A profile in flight when stopped is completed: the request is not tied to ctx.
			if err := download(context.Background(), url, path); err != nil {
				p.err = err
				return
			}
			p.files = append(p.files, path)
		}
	}()
	return p
}

// stop waits for the profile in flight and returns the files taken.
func (p *cpuProfiler) stop() ([]string, error) {
	p.cancel()
	<-p.done
	return p.files, p.err
}

func download(ctx context.Context, url, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*cpuProfileSeconds*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// heapProfile saves the live heap (after a collection, which the endpoint runs when asked).
func heapProfile(ctx context.Context, addr, path string) error {
	return download(ctx, fmt.Sprintf("http://%s/debug/pprof/heap?gc=1", addr), path)
}

// byPackage merges profiles and shares the sample type named index out by Go package; total is
// the sum of that sample type, in its unit.
func byPackage(files []string, index string, top int) (shares []profileShare, total float64, err error) {
	var profiles []*profile.Profile
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, err
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", path, err)
		}
		profiles = append(profiles, p)
	}
	merged, err := profile.Merge(profiles)
	if err != nil {
		return nil, 0, err
	}
	at := -1
	for i, st := range merged.SampleType {
		if st.Type == index {
			at = i
		}
	}
	if at < 0 {
		return nil, 0, fmt.Errorf("no sample type %q in %s", index, strings.Join(files, ", "))
	}
	flat, cum := map[string]float64{}, map[string]float64{}
	for _, s := range merged.Sample {
		v := float64(s.Value[at])
		total += v
		seen := map[string]bool{}
		for i, loc := range s.Location {
			for j, line := range loc.Line {
				pkg := packageOf(line.Function.Name)
				if i == 0 && j == 0 {
					flat[pkg] += v
				}
				if !seen[pkg] {
					seen[pkg] = true
					cum[pkg] += v
				}
			}
		}
	}
	if total == 0 {
		return nil, 0, nil
	}
	for pkg := range cum {
		shares = append(shares, profileShare{Package: pkg, Flat: flat[pkg] / total, Cum: cum[pkg] / total})
	}
	sort.Slice(shares, func(i, j int) bool {
		if shares[i].Flat != shares[j].Flat {
			return shares[i].Flat > shares[j].Flat
		}
		return shares[i].Package < shares[j].Package
	})
	if len(shares) > top {
		shares = shares[:top]
	}
	return shares, total, nil
}

// packageOf is the import path of a function's package: what precedes the first dot after the
// last slash ("k8s.io/client-go/rest.(*Request).Do" is k8s.io/client-go/rest).
// Type parameters and receivers may hold import paths of their own, so the last slash is sought
// before them.
func packageOf(function string) string {
	end := strings.IndexAny(function, "[(")
	if end < 0 {
		end = len(function)
	}
	slash := strings.LastIndex(function[:end], "/")
	if dot := strings.Index(function[slash+1:], "."); dot >= 0 {
		return function[:slash+1+dot]
	}
	return function
}

// summarise reads a subject's profiles into its result.
func summarise(subject string, cpuFiles []string, heapFile string) (profileResult, error) {
	res := profileResult{Subject: subject, Files: append(append([]string{}, cpuFiles...), heapFile)}
	var err error
	var nanos, bytes float64
	if res.CPU, nanos, err = byPackage(cpuFiles, "cpu", profileTop); err != nil {
		return res, err
	}
	if res.Heap, bytes, err = byPackage([]string{heapFile}, "inuse_space", profileTop); err != nil {
		return res, err
	}
	res.CPUSeconds, res.HeapMiB = nanos/1e9, bytes/(1<<20)
	return res, nil
}

// profileTop is how many packages a profile table lists.
const profileTop = 15

func (p profileResult) markdown(w io.Writer) {
	fmt.Fprintf(w, "\n### Where %s's time and memory go\n\n", p.Subject)
	fmt.Fprintf(w, "CPU while converging (%.1f s sampled; flat: in the package itself, cum: with what it calls), "+
		"and the live heap at all Deployed (%.1f MiB sampled), by Go package:\n\n", p.CPUSeconds, p.HeapMiB)
	fmt.Fprintln(w, "| package | CPU flat | CPU cum | | package | heap flat | heap cum |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for i := 0; i < max(len(p.CPU), len(p.Heap)); i++ {
		cells := []string{"", "", "", "", "", "", ""}
		if i < len(p.CPU) {
			cells[0], cells[1], cells[2] = "`"+p.CPU[i].Package+"`", percent(p.CPU[i].Flat), percent(p.CPU[i].Cum)
		}
		if i < len(p.Heap) {
			cells[4], cells[5], cells[6] = "`"+p.Heap[i].Package+"`", percent(p.Heap[i].Flat), percent(p.Heap[i].Cum)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

func percent(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }

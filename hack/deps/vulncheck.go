package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// finding is one known vulnerability the scanned code reaches: govulncheck found a call path
// from this project's code to a vulnerable function.
type finding struct {
	ID, Summary    string
	Module, Found  string // the module that holds the vulnerable code, at the version linked
	Fixed          string // the first version without it; "" when there is none
	Symbol, Caller string // the vulnerable function, and where this project's code reaches it
}

func (f finding) String() string {
	fixed := "no fixed version"
	if f.Fixed != "" {
		fixed = "fixed in " + f.Fixed
	}
	return fmt.Sprintf("%s: %s@%s (%s): %s\n    reached: %s calls, in the end, %s",
		f.ID, f.Module, f.Found, fixed, f.Summary, f.Caller, f.Symbol)
}

// scan runs govulncheck over pkgs with the database in dbDir and returns the vulnerabilities
// the code reaches, one per advisory and module. Vulnerabilities in packages or modules the
// code imports but never calls into are not findings: they cannot run.
func scan(govulncheck, dbDir, dir string, pkgs []string) ([]finding, error) {
	db, err := filepath.Abs(dbDir)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(govulncheck, append([]string{"-db", "file://" + db, "-format", "json"}, pkgs...)...)
	cmd.Dir = dir
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("govulncheck: %v\n%s", err, stderr.String())
	}
	return parseFindings(&out)
}

// govulncheck's JSON stream: one message per value, each with one of these fields set.
type message struct {
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string  `json:"osv"`
		FixedVersion string  `json:"fixed_version"`
		Trace        []frame `json:"trace"`
	} `json:"finding"`
}

type frame struct {
	Module, Version, Package, Function, Receiver string
	Position                                     *struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
	}
}

func (f frame) name() string {
	fn := f.Function
	if f.Receiver != "" {
		fn = strings.TrimPrefix(f.Receiver, "*") + "." + fn
	}
	return f.Package + "." + fn
}

func parseFindings(r io.Reader) ([]finding, error) {
	summaries := map[string]string{}
	var found []finding
	seen := map[string]bool{}
	for dec := json.NewDecoder(r); ; {
		var m message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("reading govulncheck's output: %w", err)
		}
		if m.OSV != nil {
			summaries[m.OSV.ID] = m.OSV.Summary
		}
		// A finding whose first frame names no function is at package or module level.
		if m.Finding == nil || len(m.Finding.Trace) == 0 || m.Finding.Trace[0].Function == "" {
			continue
		}
		vuln, entry := m.Finding.Trace[0], m.Finding.Trace[len(m.Finding.Trace)-1]
		key := m.Finding.OSV + " " + vuln.Module
		if seen[key] {
			continue
		}
		seen[key] = true
		caller := entry.name()
		if entry.Position != nil {
			caller = fmt.Sprintf("%s (%s:%d)", caller, entry.Position.Filename, entry.Position.Line)
		}
		found = append(found, finding{ID: m.Finding.OSV, Module: vuln.Module, Found: vuln.Version,
			Fixed: m.Finding.FixedVersion, Symbol: vuln.name(), Caller: caller})
	}
	for i := range found {
		found[i].Summary = summaries[found[i].ID]
	}
	slices.SortFunc(found, func(a, b finding) int { return strings.Compare(a.ID+a.Module, b.ID+b.Module) })
	return found, nil
}

// acceptance is one entry of the accepted findings file: a vulnerability the project ships
// knowingly, why, and until when.
type acceptance struct {
	ID      string `json:"id"`
	Reason  string `json:"reason"`
	Expires string `json:"expires"` // YYYY-MM-DD: from that day on, the finding fails again
}

func loadAccepted(path string) ([]acceptance, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file struct {
		Accepted []acceptance `json:"accepted"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, a := range file.Accepted {
		if _, err := time.Parse(time.DateOnly, a.Expires); err != nil || a.ID == "" || strings.TrimSpace(a.Reason) == "" {
			return nil, fmt.Errorf("%s: entry %q needs an id, a reason and an expires date (YYYY-MM-DD)", path, a.ID)
		}
	}
	return file.Accepted, nil
}

// judge returns what fails the check: every finding no current acceptance covers, and every
// acceptance that is expired or matches no finding (the file says only what is true today).
func judge(found []finding, accepted []acceptance, today time.Time) []string {
	var failures []string
	current := map[string]acceptance{}
	for _, a := range accepted {
		expires, _ := time.Parse(time.DateOnly, a.Expires)
		if !today.Before(expires) {
			failures = append(failures, fmt.Sprintf("%s: its acceptance expired on %s", a.ID, a.Expires))
			continue
		}
		current[a.ID] = a
	}
	matched := map[string]bool{}
	for _, f := range found {
		if _, ok := current[f.ID]; ok {
			matched[f.ID] = true
			continue
		}
		failures = append(failures, f.String())
	}
	for id := range current {
		if !matched[id] {
			failures = append(failures, fmt.Sprintf("%s: accepted, but no longer found: remove its entry", id))
		}
	}
	return failures
}

// check runs the scan and fails, naming them, on findings no entry of the accepted file covers.
func check(govulncheck, db, accepted string, pkgs []string) error {
	acc, err := loadAccepted(accepted)
	if err != nil {
		return err
	}
	found, err := scan(govulncheck, db, ".", pkgs)
	if err != nil {
		return err
	}
	failures := judge(found, acc, time.Now().UTC())
	if len(failures) == 0 {
		fmt.Printf("vulncheck: no known vulnerability reached from %s (%d accepted)\n", strings.Join(pkgs, " "), len(acc))
		return nil
	}
	return fmt.Errorf("%d known vulnerabilities reached, or acceptances to review (%s):\n  %s",
		len(failures), accepted, strings.Join(failures, "\n  "))
}

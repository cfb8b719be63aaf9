package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/myproxy-operator/internal/options"
	"github.com/example/myproxy-operator/internal/rollout"
)

// rolloutMark is the Pod template annotation that the rollout bench's new chart adds.
const rolloutMark = "bench.example.com/rollout"

// rolloutStateNamespace holds the rollout state, as the operator's namespace does in a cluster.
const rolloutStateNamespace = "myproxy-operator-system"

// rolloutRest is how long the fleet is watched at rest after a rollout.
const rolloutRest = 30 * time.Second

// rolloutMode is how this operator rolls a new chart out.
type rolloutMode struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
}

var rolloutModes = []rolloutMode{
	{"in waves", []string{"--rollout-state-namespace=" + rolloutStateNamespace}},
	{"all at once", []string{"--rollout-waves=false"}},
}

// rolloutResult is one rollout of a new chart over a converged fleet.
type rolloutResult struct {
	Mode       string   `json:"mode"`
	N          int      `json:"n"`
	Seconds    float64  `json:"seconds"`    // operator start to every Deployment on the new chart and available
	CPUSeconds float64  `json:"cpuSeconds"` // operator CPU over that time
	Requests   requests `json:"requests"`   // operator requests over that time, by verb
	// RequestsByResource details Requests by verb and resource.
	RequestsByResource requests `json:"requestsByResource"`
	RequestsPerCR      float64  `json:"requestsPerCR"`
	Waves              int      `json:"waves"` // from the stored rollout state; 0 without waves
	// Revisions per release at the end: each went from revision 1 to 2, none twice.
	MinRevisions, MaxRevisions int
	RestRequests               requests `json:"restRequests"` // over rolloutRest once the fleet is quiet
}

type rolloutReport struct {
	Command string          `json:"command"`
	Machine string          `json:"machine"`
	Started time.Time       `json:"started"`
	Runs    []rolloutResult `json:"runs"`
	// Restarts are restarts over the first mode's converged fleet, before its new chart.
	Restarts []restartResult `json:"restarts"`
}

// benchRollout converges a fleet under this operator with the repository's chart, stops the
// operator, edits the chart (a Pod annotation: every Deployment rolls), and starts it again:
// once per mode, each on a fresh cluster, timing the rollout and counting its requests in the
// audit log, then watching the fleet at rest.
func benchRollout(ctx context.Context, s settings, c *cluster) error {
	if os.Getenv("ROLLOUT_REPORT") == "1" { // the report again from rollout.json, as after a change of its format
		var rep rolloutReport
		raw, err := os.ReadFile(filepath.Join(s.dir, "rollout.json"))
		if err == nil {
			err = json.Unmarshal(raw, &rep)
		}
		if err != nil {
			return err
		}
		return rep.write(s.dir)
	}
	rep := rolloutReport{Command: fmt.Sprintf("make bench-rollout N=%d", s.n), Machine: machine(), Started: time.Now()}
	for i, mode := range rolloutModes {
		res, err := rolloutOnce(ctx, s, c, mode, func(e *env, op operator) error {
			if i > 0 {
				return nil
			}
			var err error
			rep.Restarts, err = restarts(ctx, s, c, e, op, options.AllFastPaths, s.n)
			return err
		})
		if err != nil {
			return fmt.Errorf("rollout %s: %w", mode.Name, err)
		}
		rep.Runs = append(rep.Runs, res)
		if err := rep.write(s.dir); err != nil {
			return err
		}
	}
	return nil
}

// rolloutOnce runs one mode; converged is called once the fleet is converged and the operator
// stopped, before the chart changes.
func rolloutOnce(ctx context.Context, s settings, c *cluster, mode rolloutMode, converged func(*env, operator) error) (rolloutResult, error) {
	res := rolloutResult{Mode: mode.Name, N: s.n}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e, t, err := freshTracked(ctx, c, "rollout "+mode.Name)
	if err != nil {
		return res, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rolloutStateNamespace}}
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return res, err
	}
	chart := filepath.Join(s.dir, "rollout-chart")
	if err := os.RemoveAll(chart); err != nil {
		return res, err
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(s.root, "helm-charts", "myproxy"), chart).CombinedOutput(); err != nil {
		return res, fmt.Errorf("copying the chart: %v: %s", err, out)
	}
	watches := filepath.Join(s.dir, "rollout-watches.yaml")
	if err := os.WriteFile(watches, []byte("- group: gateway.example.com\n  version: v1alpha1\n  kind: MyProxy\n  chart: "+chart+"\n"), 0o644); err != nil {
		return res, err
	}
	op := ours(s)
	args := op.args
	op.args = func(m, h string) []string {
		return append(args(m, h), append([]string{"--watches-file=" + watches}, mode.Args...)...)
	}

	p, err := e.start(s, op, "rollout-install.log")
	if err != nil {
		return res, err
	}
	progress("rollout %s: installing %d MyProxies", mode.Name, s.n)
	if err := parallel(ctx, s.workers, names("fleet", s.n), createProxy(e.dyn, fleetNamespace)); err != nil {
		p.stop()
		return res, err
	}
	if _, err := t.waitFor(ctx, "all Available", s.convergeLimit(), allAvailable(s.n)); err != nil {
		p.stop()
		return res, err
	}
	if err := t.waitQuiet(ctx, settleQuiet); err != nil {
		p.stop()
		return res, err
	}
	p.stop()
	if err := converged(e, op); err != nil {
		return res, err
	}

	deployment := filepath.Join(chart, "templates", "deployment.yaml")
	raw, err := os.ReadFile(deployment)
	if err != nil {
		return res, err
	}
	edited := strings.Replace(string(raw), "      annotations:\n", "      annotations:\n        "+rolloutMark+": \"2\"\n", 1)
	if edited == string(raw) {
		return res, fmt.Errorf("the chart's Deployment template has no Pod annotations to add to")
	}
	if err := os.WriteFile(deployment, []byte(edited), 0o644); err != nil {
		return res, err
	}

	progress("rollout %s: rolling the new chart out", mode.Name)
	start := time.Now()
	if p, err = e.start(s, op, "rollout-"+strings.Fields(mode.Name)[0]+".log"); err != nil {
		return res, err
	}
	defer p.stop()
	before, err := p.usage()
	if err != nil {
		return res, err
	}
	doneAt, err := t.waitFor(ctx, "every Deployment on the new chart", s.convergeLimit(), func(f fleet) bool { return f.Rolled >= s.n })
	if err != nil {
		return res, err
	}
	after, err := p.usage()
	if err != nil {
		return res, err
	}
	res.Seconds, res.CPUSeconds = doneAt.Sub(start).Seconds(), after.CPUSeconds-before.CPUSeconds
	if res.Requests, err = countRequests(c.auditLog(), op.user, start, doneAt, false); err != nil {
		return res, err
	}
	if res.RequestsByResource, err = countRequests(c.auditLog(), op.user, start, doneAt, true); err != nil {
		return res, err
	}
	res.RequestsPerCR = float64(res.Requests.total()) / float64(s.n)
	progress("rollout %s: %.1fs, %.1f CPU-s, %.1f requests per MyProxy", mode.Name, res.Seconds, res.CPUSeconds, res.RequestsPerCR)

	if err := t.waitQuiet(ctx, settleQuiet); err != nil {
		return res, err
	}
	from := time.Now()
	select {
	case <-time.After(rolloutRest):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	if res.RestRequests, err = countRequests(c.auditLog(), op.user, from, time.Now(), true); err != nil {
		return res, err
	}
	if res.MinRevisions, res.MaxRevisions, err = revisionRange(ctx, e); err != nil {
		return res, err
	}
	cm, err := e.cs.CoreV1().ConfigMaps(rolloutStateNamespace).Get(ctx, rollout.StoreName(myProxyGVR.GroupVersion().WithKind("MyProxy"), ""), metav1.GetOptions{})
	if err == nil {
		var st rollout.State
		if err := json.Unmarshal([]byte(cm.Data["state.json"]), &st); err == nil {
			res.Waves = st.Wave + 1
		}
	}
	return res, nil
}

// writes counts the creates, updates, patches and deletes among requests counted by verb and resource.
func writes(r requests) int {
	n := 0
	for key, count := range r {
		switch verb, _, _ := strings.Cut(key, " "); verb {
		case "create", "update", "patch", "delete", "deletecollection":
			n += count
		}
	}
	return n
}

// revisionRange is the fewest and most release records of a MyProxy of the fleet.
func revisionRange(ctx context.Context, e *env) (lo, hi int, err error) {
	list, err := e.cs.CoreV1().Secrets(fleetNamespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil {
		return 0, 0, err
	}
	per := map[string]int{}
	for _, s := range list.Items {
		per[s.Labels["name"]]++
	}
	lo = -1
	for _, n := range per {
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	return lo, hi, nil
}

func (r rolloutReport) write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "rollout.json"), b, 0o644); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Chart rollout results\n\nWritten by `make bench-rollout`; how waves work: "+
		"[deploying.md](deploying.md#waves-health-gate-and-failure-budget).\n\n`%s` on %s, %s.\n\n", r.Command, r.Machine, r.Started.UTC().Format("2006-01-02"))
	md.WriteString("A converged fleet, then this operator restarted with a chart that changes every Deployment's Pods. " +
		"Time runs from the operator's start to every Deployment on the new chart and available; requests are the " +
		"operator's, from the audit log; revisions are the release records per MyProxy at the end (2: upgraded once); " +
		"at rest is every request of the operator over " + rolloutRest.String() + " once the fleet is quiet (a watch its informers " +
		"open again counts; rollout.json names each), and of them the writes.\n\n")
	md.WriteString("| mode | flags | N | waves | rollout (s) | CPU-s | requests per MyProxy | revisions per MyProxy | requests at rest | of them writes |\n")
	md.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	flags := map[string]string{}
	for _, m := range rolloutModes {
		flags[m.Name] = "`" + strings.Join(m.Args, " ") + "`"
	}
	for _, run := range r.Runs {
		fmt.Fprintf(&md, "| %s | %s | %d | %d | %.1f | %.1f | %.2f | %d–%d | %d | %d |\n", run.Mode, flags[run.Mode], run.N, run.Waves,
			run.Seconds, run.CPUSeconds, run.RequestsPerCR, run.MinRevisions, run.MaxRevisions, run.RestRequests.total(), writes(run.RestRequests))
	}
	if len(r.Restarts) > 0 {
		md.WriteString("\n## A restart over the converged fleet\n\nBefore the first mode's new chart, this operator restarted " +
			"over its converged fleet, nothing changed, with every fast path and without `digests`, in turn: each reconcile finds " +
			"nothing to do, which `digests` answers without rendering. Time runs from the start to at rest (every MyProxy reconciled, " +
			"the queues empty); CPU is the process's from its start.\n\n")
		md.WriteString("| variant | `--fast-paths` | at rest (s) | CPU-s | requests per MyProxy |\n|---|---|---|---|---|\n")
		for _, run := range r.Restarts {
			fmt.Fprintf(&md, "| %s | `%s` | %.1f | %.1f | %.2f |\n", run.Variant, run.FastPaths, run.Seconds, run.CPUSeconds, run.RequestsPerCR)
		}
	}
	return os.WriteFile(filepath.Join(dir, "rollout.md"), []byte(md.String()), 0o644)
}

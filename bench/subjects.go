package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/example/myproxy-operator/internal/options"
)

const fleetNamespace = "fleet"

// convergeLimit bounds each wait for the fleet, which fails the run: half an hour, more for
// fleets above 5000.
func (s settings) convergeLimit() time.Duration {
	return max(30*time.Minute, time.Duration(s.n)*360*time.Millisecond)
}

// operator is how to run one operator under measurement.
type operator struct {
	name, user, bin string
	samples         int    // one-more-MyProxy latency samples
	pprof           string // address of its pprof endpoint, to profile it while it converges
	args            func(metricsAddr, healthAddr string) []string
	// kind is what its fleet is made of; unset, MyProxies.
	kind kind
	// settleLimit bounds the wait for its fleet to go quiet before the idle window (none when 0),
	// for an operator that writes its custom resources at rest.
	settleLimit time.Duration
}

// fleetKind is the kind of the operator's fleet.
func (op operator) fleetKind() kind {
	if op.kind.gvr.Resource == "" {
		return myProxies
	}
	return op.kind
}

func ours(s settings) operator {
	op := operator{name: subjectOurs, user: "bench-myproxy-operator", bin: s.ourBin, samples: s.samples}
	if s.profile {
		op.pprof = fmt.Sprintf("127.0.0.1:%d", s.portBase+92)
	}
	op.args = func(m, h string) []string {
		args := []string{"--metrics-bind-address=" + m, "--health-probe-bind-address=" + h}
		if op.pprof != "" {
			args = append(args, "--pprof-bind-address="+op.pprof)
		}
		return append(args, s.ourArgs...)
	}
	return op
}

// stock is operator-sdk's helm-operator at its defaults: as many workers as CPUs, a full
// reconcile of every release each minute.
func stock(s settings) operator {
	return operator{name: subjectStock, user: "bench-helm-operator", bin: s.stockBin, samples: s.stockSamples,
		args: func(m, h string) []string {
			return []string{"run", "--metrics-bind-address=" + m, "--health-probe-bind-address=" + h, "--leader-elect=false"}
		}}
}

// tunedAsOurs are the settings this operator runs with by default, given to a peer so that a
// ratio measures design, not settings.
func tunedAsOurs() []string {
	return []string{fmt.Sprintf("--max-concurrent-reconciles=%d", options.DefaultMaxConcurrentReconciles), "--reconcile-period=0s"}
}

// stockTuned is operator-sdk's helm-operator with this operator's workers and no periodic
// reconcile.
func stockTuned(s settings) operator {
	op := stock(s)
	op.name, op.user, op.samples = subjectStockTuned, "bench-helm-operator-tuned", s.samples
	args := op.args
	op.args = func(m, h string) []string { return append(args(m, h), tunedAsOurs()...) }
	return op
}

// plugins is helm-operator-plugins' own `run` command (the library this operator builds on),
// tuned as stockTuned.
func plugins(s settings) operator {
	return operator{name: subjectPlugins, user: "bench-helm-operator-plugins", bin: s.pluginsBin, samples: s.samples,
		args: func(m, h string) []string {
			return append([]string{"run", "--metrics-bind-address=" + m, "--health-probe-bind-address=" + h, "--leader-elect=false"},
				tunedAsOurs()...)
		}}
}

// peers are the subjects this operator is compared with, by the name SUBJECTS gives them.
var peers = map[string]func(settings) operator{"helm-operator": stock, "helm-operator-tuned": stockTuned, "helm-operator-plugins": plugins,
	keyFlux: flux, keyFluxTuned: fluxTuned}

// env is a fresh cluster with the CRD installed, the fleet namespace, and admin clients.
type env struct {
	c   *cluster
	dyn dynamic.Interface
	cs  kubernetes.Interface
	cfg *rest.Config
	// stops undo, last first, what the kind's install runs in this process.
	stops []func()
}

// close stops what the kind's install started.
func (e *env) close() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
	e.stops = nil
}

func freshEnv(c *cluster) (*env, error) {
	if err := c.fresh(); err != nil {
		return nil, err
	}
	if err := c.kubectl("apply", "--server-side", "-f", filepath.Join("config", "crd", "bases")); err != nil {
		return nil, err
	}
	if err := c.kubectl("wait", "--for=condition=Established", "crd/myproxies.gateway.example.com"); err != nil {
		return nil, err
	}
	cfg, err := c.adminConfig()
	if err != nil {
		return nil, err
	}
	e := &env{c: c, cfg: cfg}
	if e.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if e.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNamespace}}
	if _, err := e.cs.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	return e, nil
}

// start runs the operator as its own user and waits until it is ready.
func (e *env) start(s settings, op operator, logName string) (*operatorProcess, error) {
	kubeconfig, err := e.c.userKubeconfig(op.user)
	if err != nil {
		return nil, err
	}
	metrics, health := fmt.Sprintf("127.0.0.1:%d", s.portBase+90), fmt.Sprintf("127.0.0.1:%d", s.portBase+91)
	p, err := startProcess(s.root, filepath.Join(s.dir, logName), []string{"KUBECONFIG=" + kubeconfig},
		op.bin, op.args(metrics, health)...)
	if err != nil {
		return nil, err
	}
	if err := p.waitHealthy(health, 60*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// freshTracked starts a fresh cluster for a subject and follows the MyProxies of its fleet
// namespace.
func freshTracked(ctx context.Context, c *cluster, subject string) (*env, *tracker, error) {
	return freshTrackedOf(ctx, c, subject, myProxies)
}

// freshTrackedOf starts a fresh cluster for a subject, installs what its fleet's kind needs, and
// follows the custom resources of that kind in the fleet namespace. The caller closes the env.
func freshTrackedOf(ctx context.Context, c *cluster, subject string, k kind) (*env, *tracker, error) {
	progress("%s: starting a fresh cluster", subject)
	e, err := freshEnv(c)
	if err != nil {
		return nil, nil, err
	}
	if k.install != nil {
		stop, err := k.install(ctx, e)
		if err != nil {
			return nil, nil, fmt.Errorf("preparing the cluster for %s: %w", k.gvr.Resource, err)
		}
		e.stops = append(e.stops, stop)
	}
	t, err := newTracker(ctx, e.dyn, e.cs, fleetNamespace, k)
	if err != nil {
		e.close()
	}
	return e, t, err
}

func allDeployed(n int) func(fleet) bool  { return func(f fleet) bool { return f.Deployed >= n } }
func allAvailable(n int) func(fleet) bool { return func(f fleet) bool { return f.Available >= n } }

// benchOperator runs the whole sequence for one operator: converge N, idle, drift, one more
// MyProxy at a time, delete all. An operator with a pprof endpoint is profiled while it
// converges (prof).
func benchOperator(ctx context.Context, s settings, c *cluster, op operator) (fleetResult, *profileResult, error) {
	res := fleetResult{Subject: op.name, N: s.n}
	ctx, cancel := context.WithCancel(ctx) // the watches end with this subject's cluster
	defer cancel()
	k := op.fleetKind()
	e, t, err := freshTrackedOf(ctx, c, op.name, k)
	if err != nil {
		return res, nil, err
	}
	defer e.close()
	p, err := e.start(s, op, op.user+".log")
	if err != nil {
		return res, nil, err
	}
	defer p.stop()

	progress("%s: applying %d %s", op.name, s.n, k.gvr.Resource)
	before, err := p.usage()
	if err != nil {
		return res, nil, err
	}
	var cpu *cpuProfiler
	if op.pprof != "" {
		cpu = startCPUProfiles(ctx, op.pprof, s.dir)
	}
	start := time.Now()
	if err := parallel(ctx, s.workers, names("fleet", s.n), k.create(e.dyn, fleetNamespace, spec)); err != nil {
		return res, nil, err
	}
	deployedAt, err := t.waitFor(ctx, "all Deployed", s.convergeLimit(), allDeployed(s.n))
	if err != nil {
		return res, nil, err
	}
	atDeployed, err := p.usage()
	if err != nil {
		return res, nil, err
	}
	res.DeployedSeconds = deployedAt.Sub(start).Seconds()
	res.CPUSeconds = atDeployed.CPUSeconds - before.CPUSeconds
	var prof *profileResult
	if cpu != nil {
		if prof, err = profileConverged(ctx, cpu, op, s.dir); err != nil {
			return res, nil, err
		}
	}
	availableAt, err := t.waitFor(ctx, "all Available", s.convergeLimit(), allAvailable(s.n))
	if err != nil {
		return res, nil, err
	}
	res.AvailableSeconds = availableAt.Sub(start).Seconds()
	if res.Requests, err = countRequests(c.auditLog(), op.user, start, deployedAt, false); err != nil {
		return res, nil, err
	}
	if res.RequestsByResource, err = countRequests(c.auditLog(), op.user, start, deployedAt, true); err != nil {
		return res, nil, err
	}
	res.RequestsPerCR = float64(res.Requests.total()) / float64(s.n)
	if res.StoredKiBPerCR, err = storedKiBPerCR(ctx, e, k); err != nil {
		return res, nil, err
	}
	if res.ManifestKiBPerCR, err = manifestKiBPerRelease(e); err != nil {
		return res, nil, err
	}
	progress("%s: all Deployed in %.1fs, all Available in %.1fs, %.1f CPU-s, %.1f requests per CR, %.1f KiB per stored CR, %.1f KiB of manifest per release",
		op.name, res.DeployedSeconds, res.AvailableSeconds, res.CPUSeconds, res.RequestsPerCR, res.StoredKiBPerCR, res.ManifestKiBPerCR)

	if s.lookups > 0 {
		if err := addLookupReleases(ctx, s, e, t, k, &res); err != nil {
			return res, nil, err
		}
	}
	if s.idle > 0 {
		if err := idle(ctx, s, c, op, p, t, &res); err != nil {
			return res, nil, err
		}
	}
	if res.DriftSeconds, res.DriftRestored, err = drift(ctx, e, t); err != nil {
		return res, nil, err
	}
	if res.DriftRestored {
		progress("%s: a deleted Deployment was back in %.2fs", op.name, res.DriftSeconds)
	} else {
		progress("%s: a deleted Deployment was not back within %s", op.name, driftWait)
	}
	if err := latency(ctx, op.samples, e, t, k, &res); err != nil {
		return res, nil, err
	}
	if err := deleteAll(ctx, s, op.samples, e, t, &res, k.delete(e.dyn, fleetNamespace)); err != nil {
		return res, nil, err
	}
	final, err := p.usage()
	if err != nil {
		return res, nil, err
	}
	res.PeakRSSMiB = float64(final.PeakBytes) / (1 << 20)
	return res, prof, nil
}

// profileConverged ends the CPU profiles of a converging operator and takes its heap.
func profileConverged(ctx context.Context, cpu *cpuProfiler, op operator, dir string) (*profileResult, error) {
	files, err := cpu.stop()
	if err != nil {
		return nil, fmt.Errorf("CPU profile: %w", err)
	}
	heap := filepath.Join(dir, "heap.pprof")
	if err := heapProfile(ctx, op.pprof, heap); err != nil {
		return nil, fmt.Errorf("heap profile: %w", err)
	}
	p, err := summarise(op.name, files, heap)
	return &p, err
}

// addLookupReleases adds to the fleet releases whose rendering looks up their TLS Secret, so
// that the idle window shows what such releases cost at rest.
func addLookupReleases(ctx context.Context, s settings, e *env, t *tracker, k kind, res *fleetResult) error {
	progress("%s: adding %d %s whose chart looks up their TLS Secret", res.Subject, s.lookups, k.gvr.Resource)
	if err := createTLSSecret(ctx, e.cs, fleetNamespace); err != nil {
		return err
	}
	if err := parallel(ctx, s.workers, names("lookup", s.lookups), k.create(e.dyn, fleetNamespace, lookupSpec)); err != nil {
		return err
	}
	_, err := t.waitFor(ctx, "lookup releases Deployed", s.convergeLimit(), allDeployed(s.n+s.lookups))
	res.LookupReleases = s.lookups
	return err
}

// settleQuiet is how long nothing in the fleet may change before the idle window opens.
const settleQuiet = 10 * time.Second

func idle(ctx context.Context, s settings, c *cluster, op operator, p *operatorProcess, t *tracker, res *fleetResult) error {
	// The window opens once every proxy Pod is ready and the last status writes have landed
	// (no custom resource or Deployment changed for settleQuiet), or at op.settleLimit.
	if _, err := t.waitFor(ctx, "all Available", s.convergeLimit(), allAvailable(s.n+res.LookupReleases)); err != nil {
		return err
	}
	if quiet, err := t.waitQuietWithin(ctx, settleQuiet, op.settleLimit); err != nil {
		return err
	} else if !quiet {
		progress("%s: the fleet still changes %s after all Available (its operator writes it at rest)", op.name, op.settleLimit)
	}
	progress("%s: idle for %s", op.name, s.idle)
	before, err := p.usage()
	if err != nil {
		return err
	}
	from := time.Now()
	select {
	case <-time.After(s.idle):
	case <-ctx.Done():
		return ctx.Err()
	}
	to := time.Now()
	after, err := p.usage()
	if err != nil {
		return err
	}
	res.IdleMinutes = to.Sub(from).Minutes()
	if res.IdleRequests, err = countRequests(c.auditLog(), op.user, from, to, true); err != nil {
		return err
	}
	perCRMinute := float64(s.n+res.LookupReleases) * res.IdleMinutes
	res.IdleRequestsPerCRMinute = float64(res.IdleRequests.total()) / perCRMinute
	res.IdleCPUSecondsPerCRMinute = (after.CPUSeconds - before.CPUSeconds) / perCRMinute
	progress("%s: idle: %.3g requests and %.3g CPU-s per CR per minute", op.name,
		res.IdleRequestsPerCRMinute, res.IdleCPUSecondsPerCRMinute)
	return nil
}

// driftWait is how long drift waits for a deleted Deployment to come back. A subject without
// watches on release objects and without periodic reconciles never restores it.
const driftWait = 2 * time.Minute

// drift deletes the Deployment of the first MyProxy and times its return; restored is false
// when it is not back within driftWait.
func drift(ctx context.Context, e *env, t *tracker) (seconds float64, restored bool, err error) {
	deps, err := e.cs.AppsV1().Deployments(fleetNamespace).List(ctx, metav1.ListOptions{LabelSelector: instanceLabel + "=fleet-0000"})
	if err != nil {
		return 0, false, err
	}
	if len(deps.Items) != 1 {
		return 0, false, fmt.Errorf("want one Deployment of fleet-0000, found %d", len(deps.Items))
	}
	d := deps.Items[0]
	start := time.Now()
	if err := e.cs.AppsV1().Deployments(fleetNamespace).Delete(ctx, d.Name, metav1.DeleteOptions{}); err != nil {
		return 0, false, err
	}
	for time.Since(start) < driftWait {
		if uid := t.deploymentUID(d.Name); uid != "" && uid != string(d.UID) {
			return time.Since(start).Seconds(), true, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return driftWait.Seconds(), false, nil
}

// latency applies one more custom resource at a time and times each to Deployed.
func latency(ctx context.Context, samples int, e *env, t *tracker, k kind, res *fleetResult) error {
	create := k.create(e.dyn, fleetNamespace, spec)
	for _, name := range names("extra", samples) {
		start := time.Now()
		if err := create(ctx, name); err != nil {
			return err
		}
		deadline := time.Now().Add(5 * time.Minute)
		for {
			if at, ok := t.deployedSince(name); ok {
				res.Latencies = append(res.Latencies, at.Sub(start).Seconds())
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not Deployed within 5m", name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	res.LatencyP50, res.LatencyP99 = percentile(res.Latencies, 50), percentile(res.Latencies, 99)
	progress("%s: one more %s to Deployed: p50 %.2fs, p99 %.2fs", res.Subject, k.gvr.Resource, res.LatencyP50, res.LatencyP99)
	return nil
}

// deleteAll deletes every custom resource of the fleet and times until nothing of theirs is left.
func deleteAll(ctx context.Context, s settings, samples int, e *env, t *tracker, res *fleetResult, del func(context.Context, string) error) error {
	all := append(names("fleet", s.n), names("extra", samples)...)
	if res.LookupReleases > 0 {
		all = append(all, names("lookup", res.LookupReleases)...)
	}
	progress("%s: deleting %d custom resources", res.Subject, len(all))
	start := time.Now()
	if err := parallel(ctx, s.workers, all, del); err != nil {
		return err
	}
	if _, err := t.waitFor(ctx, "all deleted", s.convergeLimit(), func(f fleet) bool { return f.Proxies == 0 && f.Deployments == 0 }); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		n, err := leftovers(ctx, e.cs, fleetNamespace)
		if err != nil {
			return err
		}
		res.Leftovers = n
		if n == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	res.DeleteSeconds = time.Since(start).Seconds()
	progress("%s: deleted in %.1fs, %d objects left", res.Subject, res.DeleteSeconds, res.Leftovers)
	return nil
}

// benchLimit creates, with client-go and no operator, what an operator would: each MyProxy and
// the objects the chart renders for it.
func benchLimit(ctx context.Context, s settings, c *cluster) (fleetResult, error) {
	res := fleetResult{Subject: subjectLimit, N: s.n}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e, t, err := freshTracked(ctx, c, res.Subject)
	if err != nil {
		return res, err
	}
	const user = "bench-client-go"
	kubeconfig, err := c.userKubeconfig(user)
	if err != nil {
		return res, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return res, err
	}
	cfg.QPS, cfg.Burst = -1, 0 // the limit is the apiserver's, not a client-side rate limiter's
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return res, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return res, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	chrt, err := loader.Load(filepath.Join(s.root, "helm-charts", "myproxy"))
	if err != nil {
		return res, err
	}
	r := renderer{chart: chrt}
	if _, err := r.render(fleetNamespace, "warm-up"); err != nil {
		return res, err
	}

	progress("%s: creating %d MyProxies and their objects", res.Subject, s.n)
	start := time.Now()
	if err := parallel(ctx, s.workers, names("fleet", s.n), createRendered(dyn, mapper, r, fleetNamespace)); err != nil {
		return res, err
	}
	createdAt := time.Now()
	res.DeployedSeconds = createdAt.Sub(start).Seconds()
	availableAt, err := t.waitFor(ctx, "all Available", s.convergeLimit(), allAvailable(s.n))
	if err != nil {
		return res, err
	}
	res.AvailableSeconds = availableAt.Sub(start).Seconds()
	if res.Requests, err = countRequests(c.auditLog(), user, start, createdAt, false); err != nil {
		return res, err
	}
	res.RequestsPerCR = float64(res.Requests.total()) / float64(s.n)
	progress("%s: all created in %.1fs, all Available in %.1fs", res.Subject, res.DeployedSeconds, res.AvailableSeconds)

	one := createRendered(dyn, mapper, r, fleetNamespace)
	for _, name := range names("extra", s.samples) {
		start := time.Now()
		if err := one(ctx, name); err != nil {
			return res, err
		}
		res.Latencies = append(res.Latencies, time.Since(start).Seconds())
	}
	res.LatencyP50, res.LatencyP99 = percentile(res.Latencies, 50), percentile(res.Latencies, 99)
	return res, deleteAll(ctx, s, s.samples, e, t, &res, deleteRendered(dyn, mapper, r, fleetNamespace))
}

// benchMemory measures an operator's resident memory with 10 MyProxies, then again after
// filling other namespaces with unrelated Secrets and ConfigMaps of 10 KiB. Both runs start the
// operator on the same, already deployed, MyProxies.
func benchMemory(ctx context.Context, s settings, c *cluster, op operator) (memoryResult, error) {
	const proxies, sizeKiB, settle = 10, 10, 20 * time.Second
	m := memoryResult{Subject: op.name, Unrelated: s.unrelated, UnrelatedKiB: sizeKiB}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e, t, err := freshTracked(ctx, c, op.name+", memory")
	if err != nil {
		return m, err
	}
	if err := parallel(ctx, s.workers, names("fleet", proxies), createProxy(e.dyn, fleetNamespace)); err != nil {
		return m, err
	}
	p, err := e.start(s, op, op.user+"-memory-install.log")
	if err != nil {
		return m, err
	}
	_, err = t.waitFor(ctx, "all Deployed", 5*time.Minute, allDeployed(proxies))
	p.stop()
	if err != nil {
		return m, err
	}
	peak := func(logName string) (float64, error) {
		p, err := e.start(s, op, logName)
		if err != nil {
			return 0, err
		}
		defer p.stop()
		time.Sleep(settle)
		u, err := p.usage()
		return float64(u.PeakBytes) / (1 << 20), err
	}
	if m.WithoutMiB, err = peak(op.user + "-memory-without.log"); err != nil {
		return m, err
	}
	progress("%s, memory: creating %d unrelated Secrets and ConfigMaps", op.name, s.unrelated)
	if err := unrelated(ctx, e.cs, s.unrelated, sizeKiB<<10, s.workers); err != nil {
		return m, err
	}
	if m.WithMiB, err = peak(op.user + "-memory-with.log"); err != nil {
		return m, err
	}
	m.ChangePercent = (m.WithMiB - m.WithoutMiB) / m.WithoutMiB * 100
	progress("%s, memory: %.1f MiB without, %.1f MiB with unrelated objects (%+.1f%%)", op.name, m.WithoutMiB, m.WithMiB, m.ChangePercent)
	return m, nil
}

// storedKiBPerCR is the mean size, in KiB, of the fleet's custom resources as the apiserver
// serves them in JSON (the status their operator writes included).
func storedKiBPerCR(ctx context.Context, e *env, k kind) (float64, error) {
	list, err := e.dyn.Resource(k.gvr).Namespace(fleetNamespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		return 0, err
	}
	var total int
	for _, item := range list.Items {
		raw, err := item.MarshalJSON()
		if err != nil {
			return 0, err
		}
		total += len(raw)
	}
	return float64(total) / float64(len(list.Items)) / 1024, nil
}

// manifestKiBPerRelease is the mean size, in KiB, of the manifest of the fleet's deployed
// releases, decoded from their records.
func manifestKiBPerRelease(e *env) (float64, error) {
	rels, err := driver.NewSecrets(e.cs.CoreV1().Secrets(fleetNamespace)).List(func(r *release.Release) bool {
		return r.Info != nil && r.Info.Status == release.StatusDeployed
	})
	if err != nil || len(rels) == 0 {
		return 0, err
	}
	var total int
	for _, r := range rels {
		total += len(r.Manifest)
	}
	return float64(total) / float64(len(rels)) / 1024, nil
}

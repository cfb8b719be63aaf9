package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/rollout"
	"github.com/example/myproxy-operator/internal/shard"
	"github.com/example/myproxy-operator/test/harness"
)

// shardingProxies is how many MyProxies the sharding test spreads over three shards.
const shardingProxies = 300

// shardedEnv is a control plane of the sharding test's own, whose audit log records every
// request, and one client certificate per operator process so that the log tells them apart.
type shardedEnv struct {
	env      *envtest.Environment
	auditLog string
	admin    client.Client
}

func startShardedEnv(t *testing.T) *shardedEnv {
	// Creates carry their object, for its name; everything else its URL.
	return startAuditedEnv(t, `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [get, list, watch]
- level: Request
  verbs: [create]
  resources: [{group: "", resources: [secrets, configmaps, services]}, {group: apps, resources: [deployments]}]
- level: Metadata
`)
}

// startAuditedEnv starts a control plane of the test's own, whose apiserver audits by policy.
func startAuditedEnv(t *testing.T, auditPolicy string) *shardedEnv {
	t.Helper()
	dir := t.TempDir()
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &shardedEnv{auditLog: filepath.Join(dir, "audit.log"), env: &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(harness.RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}}
	e.env.ControlPlane.GetAPIServer().Configure().
		Set("audit-log-path", e.auditLog).Set("audit-policy-file", policy).
		Set("service-cluster-ip-range", "10.0.0.0/16")
	restCfg, err := e.env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.env.Stop() })
	e.admin = harness.NewClient(t, restCfg)
	return e
}

// kubeconfigFor is a kubeconfig of user name, a cluster admin.
func (e *shardedEnv) kubeconfigFor(t *testing.T, name string) string {
	t.Helper()
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// shardProcess is one operator process of the test, with the user it acts as.
type shardProcess struct {
	user           string
	op             *harness.Operator
	pprof, metrics string
}

// start runs an operator as user; args are flags, or NAME=value for its environment.
func (e *shardedEnv) start(t *testing.T, user string, args ...string) *shardProcess {
	t.Helper()
	var env, flags []string
	for _, a := range args {
		if strings.HasPrefix(a, "--") {
			flags = append(flags, a)
		} else {
			env = append(env, a)
		}
	}
	p := &shardProcess{user: user, pprof: harness.FreeAddr(t), metrics: harness.FreeAddr(t)}
	p.op = harness.StartOperator(t, operatorBin, e.kubeconfigFor(t, user), append([]string{
		"--watches-file=" + harness.WriteWatches(t, harness.Watch{}), "--pprof-bind-address=" + p.pprof,
		"--metrics-bind-address=" + p.metrics}, flags...), env...)
	return p
}

// liveHeap is the process's heap in use right after a garbage collection (the Go runtime's
// own figure, read through its pprof endpoint, which collects first when asked), once the
// process is at rest: its work queues empty and no reconcile for a second. The least of three
// readings: what a collection leaves also depends on buffers and pools of the moment.
func (p *shardProcess) liveHeap(t *testing.T) float64 {
	t.Helper()
	var last float64 = -1
	harness.Eventually(t, timeout, p.user+" at rest", func(context.Context) (bool, string) {
		body, err := harness.ScrapeMetrics(p.metrics)
		if err != nil {
			return false, err.Error()
		}
		depth, err1 := harness.SumSamples(body, "workqueue_depth", "")
		done, err2 := harness.SumSamples(body, "controller_runtime_reconcile_total", "")
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		quiet := depth == 0 && done == last
		last = done
		if !quiet {
			time.Sleep(time.Second)
		}
		return quiet, fmt.Sprintf("queued %g, %g reconciles", depth, done)
	})
	least := p.heapAfterGC(t)
	for range 2 {
		least = min(least, p.heapAfterGC(t))
	}
	return least
}

func (p *shardProcess) heapAfterGC(t *testing.T) float64 {
	t.Helper()
	var body []byte
	harness.Eventually(t, timeout, p.user+"'s heap profile", func(context.Context) (bool, string) {
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Get("http://" + p.pprof + "/debug/pprof/heap?debug=1&gc=1")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK, resp.Status
	})
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no HeapAlloc in %s's heap profile", p.user)
	return 0
}

// Three shards over one fleet of 300 MyProxies, a third labelled for shard a, a third for b, a
// third for none: the default shard, a (with a standby replica) and b. Checked from the
// apiserver's audit log, the cluster and the processes: every release is written by exactly
// the shard its label names; each shard's heap grows by about a third of what an unsharded
// operator's grows by over the same fleet; a MyProxy moved from a to b is handed over (a stops,
// b relabels its objects in place: same Deployment, same revision) and never written by both
// at once; when a's leader dies, its standby takes over a's MyProxies; stale claims (naming a
// shard that no longer picks the MyProxy, or no shard of the fleet) are resolved; and no write
// of a release carries the short request timeout of the leader election's own client.
func TestShardsDivideTheFleet(t *testing.T) {
	ctx := context.Background()
	e := startShardedEnv(t)
	c := e.admin
	users := []string{"shard-default", "shard-a", "shard-b"}
	owner := map[string]string{"shard-default": shard.DefaultID, "shard-a": "a", "shard-b": "b"}
	managed := map[string]string{"shard-default": names.ManagedValue, "shard-a": "a", "shard-b": "b"}

	// The unsharded operator over a fleet of its own namespace: its heap once the first release
	// of each shard label is deployed (every informer exists), and with the whole fleet.
	nsU := newNamespace(t, c, nil)
	unsharded := e.start(t, "unsharded", "WATCH_NAMESPACE="+nsU)
	createFleet(t, c, nsU, 0, len(users))
	waitFleet(t, c, nsU, len(users), func(mp *unstructured.Unstructured) (bool, string) { return deployed(mp), "not deployed" })
	warmU := unsharded.liveHeap(t)
	createFleet(t, c, nsU, len(users), shardingProxies)
	waitFleet(t, c, nsU, shardingProxies, func(mp *unstructured.Unstructured) (bool, string) { return deployed(mp), "not deployed" })
	whole := unsharded.liveHeap(t) - warmU
	t.Logf("unsharded: %.1f MiB with one MyProxy of each shard label, %.1f MiB more with %d", warmU/(1<<20), whole/(1<<20), shardingProxies)
	unsharded.op.Stop(t)

	// The same fleet in another namespace, under three shards, each electing its leader on a
	// Lease of its own.
	ns := newNamespace(t, c, nil)
	sharded := time.Now()
	elect := []string{"--shards=a,b", "--leader-elect", "--leader-election-namespace=" + ns,
		"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms"}
	scope := "WATCH_NAMESPACE=" + ns
	shards := map[string][]*shardProcess{
		"shard-default": {e.start(t, "shard-default", append(elect, scope)...)},
		"shard-a":       {e.start(t, "shard-a", append(elect, scope, "--shard=a")...), e.start(t, "shard-a", append(elect, scope, "--shard=a")...)},
		"shard-b":       {e.start(t, "shard-b", append(elect, scope, "--shard=b")...)},
	}
	shardOf := map[string]string{} // MyProxy -> the user of its shard
	for i := range shardingProxies {
		shardOf[fmt.Sprintf("p%03d", i)] = users[i%len(users)]
	}
	labelsOf := deploymentLabels(c, ns)
	handedOver := func(mp *unstructured.Unstructured) (bool, string) {
		user := shardOf[mp.GetName()]
		if got := shard.Owner(mp); got != owner[user] {
			return false, "claimed by " + got
		}
		if !deployed(mp) {
			return false, "not deployed"
		}
		if got := labelsOf(t)[mp.GetName()][names.ManagedLabel]; got != managed[user] {
			return false, "Deployment labelled managed=" + got
		}
		return true, ""
	}
	createFleet(t, c, ns, 0, len(users))
	waitFleet(t, c, ns, len(users), handedOver)
	warm := map[string]float64{}
	for _, user := range users {
		warm[user] = leaderOf(t, shards[user]).liveHeap(t)
	}
	createFleet(t, c, ns, len(users), shardingProxies)
	waitFleet(t, c, ns, shardingProxies, handedOver)
	for _, user := range users {
		part := leaderOf(t, shards[user]).liveHeap(t) - warm[user]
		t.Logf("%s: %.1f MiB more with its third of the fleet (%.2f of the unsharded operator's growth)", user, part/(1<<20), part/whole)
		if part > whole/2 {
			t.Errorf("%s grew by %.1f MiB with its third of the fleet, the unsharded operator by %.1f MiB with all of it",
				user, part/(1<<20), whole/(1<<20))
		}
	}
	for _, name := range []string{"", "-a", "-b"} {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "myproxy-operator.gateway.example.com" + name}, &coordinationv1.Lease{}); err != nil {
			t.Errorf("the Lease of shard %q: %v", name, err)
		}
	}

	// p001 moves from a to b: a hands it over, b relabels its objects in place.
	const moved = "p001"
	before := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: moved}, before); err != nil {
		t.Fatal(err)
	}
	revision, err := latestRevision(ctx, c, ns, moved)
	if err != nil {
		t.Fatal(err)
	}
	// As `kubectl label --overwrite` does: the shard label alone changes, the claim stays.
	relabel := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+shard.Label+`":"b"}}}`))
	if err := c.Patch(ctx, harness.MyProxy(ns, moved, nil), relabel); err != nil {
		t.Fatal(err)
	}
	shardOf[moved] = "shard-b"
	// b relabels the objects (waitFleet waits for the Deployment's label) by a drift correction:
	// the chart renders what the release holds, so the release keeps its revision.
	waitFleet(t, c, ns, shardingProxies, handedOver)
	harness.WaitForEvent(t, c, ns, moved, "ShardHandedOver", timeout)
	after := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: moved}, after); err != nil {
		t.Fatal(err)
	}
	if after.UID != before.UID {
		t.Error("the moved MyProxy's Deployment was replaced")
	}
	if got, err := latestRevision(ctx, c, ns, moved); err != nil || got != revision {
		t.Errorf("the moved MyProxy's release is at revision %d, was %d: want its objects relabelled in place, no upgrade (%v)", got, revision, err)
	}

	// a's leader dies: its standby takes its Lease over and acts on a's MyProxies.
	a := leaderOf(t, shards["shard-a"])
	a.op.Kill()
	patchSpec(t, c, ns, "p004", `{"replicas":2}`)
	waitDeployment(t, c, ns, "p004", "scaled by a's standby", func(d *appsv1.Deployment) bool { return ptr.Deref(d.Spec.Replicas, 0) == 2 })

	// Stale claims: one names a (running) but is labelled for b, as after a move while a was
	// down: a hands it over, b installs it. One names a shard no longer in the fleet: its
	// shard takes it as unclaimed.
	stale := map[string]struct{ label, claim, user string }{
		"stale-b":       {label: "b", claim: "a", user: "shard-b"},
		"stale-default": {label: "", claim: "removed", user: "shard-default"},
	}
	for name, st := range stale {
		mp := harness.MyProxy(ns, name, map[string]any{"replicas": 1})
		l := map[string]string{shard.OwnerLabel: st.claim}
		if st.label != "" {
			l[shard.Label] = st.label
		}
		mp.SetLabels(l)
		if err := c.Create(ctx, mp); err != nil {
			t.Fatal(err)
		}
		shardOf[name] = st.user
	}
	for name := range stale {
		harness.Eventually(t, timeout, name+" claimed by its shard and deployed", func(ctx context.Context) (bool, string) {
			mp, err := harness.GetMyProxy(ctx, c, ns, name)
			if err != nil {
				return false, err.Error()
			}
			return handedOver(mp)
		})
	}
	harness.WaitForEvent(t, c, ns, "stale-b", "ShardHandedOver", timeout)

	// A claim naming a shard outside the fleet whose Lease is held: that shard runs with other
	// --shards, and taking its MyProxy over would give it two owners. The default shard refuses
	// with a condition that says so, and takes it once that shard's Lease is gone.
	const rogue = "rogue-claimed"
	rogueLease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: shard.Shard{Name: "rogue"}.LeaseName("myproxy-operator.gateway.example.com")},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("rogue-0"), LeaseDurationSeconds: ptr.To(int32(3600)),
			RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))},
	}
	if err := c.Create(ctx, rogueLease); err != nil {
		t.Fatal(err)
	}
	mp := harness.MyProxy(ns, rogue, map[string]any{"replicas": 1})
	mp.SetLabels(map[string]string{shard.OwnerLabel: "rogue"})
	if err := c.Create(ctx, mp); err != nil {
		t.Fatal(err)
	}
	shardOf[rogue] = "shard-default"
	harness.Eventually(t, timeout, rogue+" refused while its claiming shard runs", func(ctx context.Context) (bool, string) {
		mp, err := harness.GetMyProxy(ctx, c, ns, rogue)
		if err != nil {
			return false, err.Error()
		}
		status, _, message := harness.Condition(mp, "Irreconcilable")
		return status == "True" && strings.Contains(message, "every shard must run with the same --shards"), "Irreconcilable: " + message
	})
	if got, err := harness.GetMyProxy(ctx, c, ns, rogue); err != nil || shard.Owner(got) != "rogue" {
		t.Fatalf("the claim of the running shard was taken over (%v)", err)
	}
	if err := c.Delete(ctx, rogueLease); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, timeout, rogue+" claimed by the default shard once the other is gone", func(ctx context.Context) (bool, string) {
		mp, err := harness.GetMyProxy(ctx, c, ns, rogue)
		if err != nil {
			return false, err.Error()
		}
		return handedOver(mp)
	})

	// The audit log: who wrote what of each release since the shards started.
	writes := releaseWrites(t, e.auditLog, ns, sharded)
	for name, ws := range writes {
		want := shardOf[name]
		if name == moved || name == "stale-b" { // a hands it over, then b acts
			checkHandover(t, name, ws)
			continue
		}
		for _, w := range ws {
			if w.user != want {
				t.Errorf("%s wrote %s of %s, which is %s's", w.user, w.what, name, want)
			}
		}
	}
	perUser := map[string]int{}
	for name, ws := range writes {
		for _, w := range ws {
			perUser[w.user]++
			if w.timeout != "" {
				// Only the leader election's own client cuts its requests short (at half the
				// renew deadline): a slow apply would fail half done.
				t.Errorf("%s sent %s of %s with a request timeout of %s", w.user, w.what, name, w.timeout)
			}
		}
	}
	t.Logf("audited writes to %d releases: %v", len(writes), perUser)
	if len(writes) != len(shardOf) {
		t.Errorf("the audit log shows writes to %d releases, want %d (every one was installed)", len(writes), len(shardOf))
	}
}

// checkHandover checks that shard a wrote name's release until it handed the resource over and
// shard b only after: a's last write is the handover (the update of the custom resource that
// clears a's claim), every other write of a had completed when the handover was received, and
// every write of b was received after it. b acts on the watch event of the handover's commit,
// which may reach it before the apiserver completes the handover's response, so b's writes are
// compared with the handover's receipt, not its completion.
func checkHandover(t *testing.T, name string, ws []releaseWrite) {
	t.Helper()
	handover := -1
	for i, w := range ws {
		switch w.user {
		case "shard-a":
			handover = i
		case "shard-b":
		default:
			t.Errorf("%s wrote %s of %s", w.user, w.what, name)
		}
	}
	if handover < 0 || ws[handover].what != "update myproxies" {
		t.Errorf("%s: shard a's last write is not the handover (an update of the MyProxy): %v", name, ws)
		return
	}
	h := ws[handover]
	for i, w := range ws {
		switch {
		case w.user == "shard-a" && i != handover && w.done.After(h.received):
			t.Errorf("%s: shard a's %s completed at %s, after its handover was received at %s", name, w.what, w.done, h.received)
		case w.user == "shard-b" && w.received.Before(h.received):
			t.Errorf("%s: shard b's %s was received at %s, before a's handover at %s", name, w.what, w.received, h.received)
		}
	}
	if !slices.ContainsFunc(ws[handover:], func(w releaseWrite) bool { return w.user == "shard-b" }) {
		t.Errorf("%s: shard b never wrote it after the handover", name)
	}
}

// leaderOf is the replica of a shard that holds its Lease, by its own leader-election gauge.
func leaderOf(t *testing.T, replicas []*shardProcess) *shardProcess {
	t.Helper()
	var leader *shardProcess
	harness.Eventually(t, timeout, "a leader of "+replicas[0].user, func(context.Context) (bool, string) {
		for _, p := range replicas {
			body, err := harness.ScrapeMetrics(p.metrics)
			if err != nil {
				continue
			}
			if v, err := harness.SumSamples(body, "leader_election_master_status", ""); err == nil && v == 1 {
				leader = p
				return true, ""
			}
		}
		return false, "none leads"
	})
	return leader
}

// deploymentLabels returns a function that lists the Deployments of ns: name -> labels.
func deploymentLabels(c client.Client, ns string) func(t *testing.T) map[string]map[string]string {
	var at time.Time
	var cached map[string]map[string]string
	return func(t *testing.T) map[string]map[string]string {
		if time.Since(at) < 100*time.Millisecond {
			return cached
		}
		list := &appsv1.DeploymentList{}
		if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		cached = map[string]map[string]string{}
		for _, d := range list.Items {
			cached[d.Name] = d.Labels
		}
		at = time.Now()
		return cached
	}
}

// releaseWrite is one write the audit log records to a release's objects, records or custom
// resource.
type releaseWrite struct {
	user           string
	what           string
	received, done time.Time
	// timeout is the request's own timeout (its timeout parameter), which a client sends when
	// its config sets one.
	timeout string
}

// releaseWrites reads the writes of operator users (shard-*) in ns since from, by release.
func releaseWrites(t *testing.T, path, ns string, from time.Time) map[string][]releaseWrite {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]releaseWrite{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e struct {
			Verb      string    `json:"verb"`
			Received  time.Time `json:"requestReceivedTimestamp"`
			Done      time.Time `json:"stageTimestamp"`
			Stage     string    `json:"stage"`
			User      struct{ Username string }
			ObjectRef *struct {
				Resource, Namespace, Name, Subresource string
			} `json:"objectRef"`
			RequestObject *struct {
				Metadata struct{ Name string }
			} `json:"requestObject"`
			ResponseStatus *struct{ Code int } `json:"responseStatus"`
			RequestURI     string              `json:"requestURI"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		if e.Stage != "ResponseComplete" || !strings.HasPrefix(e.User.Username, "shard-") || e.Received.Before(from) ||
			e.ObjectRef == nil || e.ObjectRef.Namespace != ns {
			continue
		}
		switch e.Verb {
		case "create", "update", "patch", "delete":
		default:
			continue
		}
		name := e.ObjectRef.Name
		if name == "" && e.RequestObject != nil {
			name = e.RequestObject.Metadata.Name
		}
		switch e.ObjectRef.Resource {
		case "secrets":
			rest, ok := strings.CutPrefix(name, "sh.helm.release.v1.")
			if !ok {
				continue
			}
			name = rest[:strings.LastIndex(rest, ".v")]
		case "configmaps":
			if strings.HasPrefix(name, rollout.StorePrefix) {
				continue // a shard's rollout state, beside its Lease
			}
		case "deployments", "services", "myproxies":
		default:
			continue // Events, Leases
		}
		what := e.Verb + " " + e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			what += "/" + e.ObjectRef.Subresource
		}
		uri, err := url.Parse(e.RequestURI)
		if err != nil {
			t.Fatalf("audit log: %v", err)
		}
		out[name] = append(out[name], releaseWrite{user: e.User.Username, what: what, received: e.Received, done: e.Done,
			timeout: uri.Query().Get("timeout")})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, ws := range out {
		sort.Slice(ws, func(i, j int) bool { return ws[i].received.Before(ws[j].received) })
	}
	return out
}

// deployed reports whether a MyProxy's release is deployed.
func deployed(mp *unstructured.Unstructured) bool {
	s, _, _ := harness.Condition(mp, "Deployed")
	return s == "True"
}

// createFleet creates MyProxies p<from>..p<to-1> in ns, labelled in turn for no shard, a and b.
func createFleet(t *testing.T, c client.Client, ns string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		mp := harness.MyProxy(ns, fmt.Sprintf("p%03d", i), map[string]any{"replicas": 1})
		if label := []string{"", "a", "b"}[i%3]; label != "" {
			mp.SetLabels(map[string]string{shard.Label: label})
		}
		if err := c.Create(context.Background(), mp); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFleet waits until ns holds n MyProxies, each satisfying ok.
func waitFleet(t *testing.T, c client.Client, ns string, n int, ok func(*unstructured.Unstructured) (bool, string)) {
	t.Helper()
	harness.Eventually(t, 5*time.Minute, "every MyProxy", func(ctx context.Context) (bool, string) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(harness.MyProxyGVK.GroupVersion().WithKind(harness.MyProxyGVK.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		if len(list.Items) != n {
			return false, fmt.Sprintf("%d MyProxies", len(list.Items))
		}
		waiting := 0
		var first string
		for i := range list.Items {
			if good, why := ok(&list.Items[i]); !good {
				if waiting++; first == "" {
					first = list.Items[i].GetName() + ": " + why
				}
			}
		}
		return waiting == 0, fmt.Sprintf("%d waiting, e.g. %s", waiting, first)
	})
}

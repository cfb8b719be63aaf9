package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/test/harness"
)

// fixedObjects are the objects the FixedNames chart renders whatever the release is called.
var fixedObjects = []struct {
	kind string
	obj  client.Object
}{
	{"ConfigMap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cd-cm"}}},
	{"Secret", &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cd-secret"}}},
	{"ServiceAccount", &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "cd-server"}}},
	{"Service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "cd-server"}}},
}

// A release never touches another release's objects. Two custom resources of a chart that names
// its objects without the release's name, created at the same moment, many times over: one
// installs; the other's install writes none of the first release's objects (their ownership,
// identity and what the application wrote into them stay), and its condition names an object
// and the release that owns it, while the first release sees nothing of it. The second does not
// retry in a tight loop: its attempts back off, as every failing reconcile's do; once the first
// is deleted, the second installs.
func TestAReleaseNeverTouchesAnotherReleasesObjects(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	watches, managerRole := corpusProject(t, c)
	const rounds = 8
	for round := range rounds {
		ns := newNamespace(t, c, nil)
		asManager := harness.ServiceAccountKubeconfig(t, c, cfg, ns, operatorAccount, managerRole)
		op := harness.StartOperator(t, operatorBin, asManager, []string{"--watches-file=" + watches}, "WATCH_NAMESPACE="+ns)
		a, b := corpusCR("FixedNames", ns, "alpha"), corpusCR("FixedNames", ns, "bravo")
		for _, u := range []*unstructured.Unstructured{a, b} {
			u.Object["spec"] = map[string]any{}
		}
		created := make(chan error, 2)
		for _, u := range []*unstructured.Unstructured{a, b} {
			go func() { created <- c.Create(ctx, u.DeepCopy()) }()
		}
		for range 2 {
			if err := <-created; err != nil {
				t.Fatal(err)
			}
		}
		// One of them deploys: the winner.
		var winner, loser string
		harness.Eventually(t, timeout, "one of the two deployed", func(ctx context.Context) (bool, string) {
			for _, name := range []string{"alpha", "bravo"} {
				u := corpusCR("FixedNames", ns, name)
				if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
					return false, err.Error()
				}
				if status, _, _ := harness.Condition(u, names.ConditionDeployed); status == "True" {
					winner, loser = name, map[string]string{"alpha": "bravo", "bravo": "alpha"}[name]
					return true, ""
				}
			}
			return false, "neither is Deployed"
		})
		// What the application writes into its Secret at run time.
		secret := &corev1.Secret{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cd-secret"}, secret); err != nil {
			t.Fatal(err)
		}
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data["server.secretkey"] = []byte(fmt.Sprintf("written at run time, round %d", round))
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		before := ownedBy(t, c, ns, winner)
		// The loser reports the conflict, naming an object and the owner.
		var message string
		harness.Eventually(t, timeout, loser+" reports the conflict", func(ctx context.Context) (bool, string) {
			u := corpusCR("FixedNames", ns, loser)
			if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
				return false, err.Error()
			}
			status, _, msg := harness.Condition(u, names.ConditionReleaseFailed)
			message = msg
			names := strings.Contains(msg, `current value is "`+winner+`"`) || strings.Contains(msg, "belongs to release "+winner+" ")
			return status == "True" && strings.Contains(msg, `"cd-`) && names, status + " " + msg
		})
		// Give the loser's retries time to run; none may touch the winner's objects, and they back
		// off: a retry every few milliseconds would be a thousand in this time.
		failures, watch := installFailures(t, c, ns, loser), 3*time.Second
		if round == 0 {
			watch = 20 * time.Second
		}
		time.Sleep(watch)
		retries := installFailures(t, c, ns, loser) - failures
		after := ownedBy(t, c, ns, winner)
		if !maps.Equal(before, after) {
			t.Errorf("round %d: the objects of %s changed while %s tried to install:\nbefore %v\nafter  %v", round, winner, loser, before, after)
		}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cd-secret"}, secret); err != nil || !strings.HasPrefix(string(secret.Data["server.secretkey"]), "written at run time") {
			t.Errorf("round %d: what the application wrote into cd-secret is gone (%v)", round, err)
		}
		if retries > 16 {
			t.Errorf("round %d: %s failed to install %d more times in %s: a tight loop", round, loser, retries, watch)
		}
		u := corpusCR("FixedNames", ns, winner)
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			t.Fatal(err)
		}
		if status, _, msg := harness.Condition(u, names.ConditionIrreconcilable); status == "True" {
			t.Errorf("round %d: %s noticed: Irreconcilable %s", round, winner, msg)
		}
		if round == 0 {
			t.Logf("%s says: %s", loser, message)
			// Once the winner is gone, the loser is woken (by the deletion of the object it
			// waited for, or of the winner's records) and installs.
			if err := c.Delete(ctx, corpusCR("FixedNames", ns, winner)); err != nil {
				t.Fatal(err)
			}
			harness.Eventually(t, timeout, loser+" installs once "+winner+" is gone", func(ctx context.Context) (bool, string) {
				u := corpusCR("FixedNames", ns, loser)
				if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
					return false, err.Error()
				}
				status, _, msg := harness.Condition(u, names.ConditionDeployed)
				return status == "True", status + " " + msg
			})
		}
		op.Stop(t)
	}
}

// ownedBy returns, for each fixed object, its UID, ownership annotations and content, which must
// stay as release rls of ns left them.
func ownedBy(t *testing.T, c client.Client, ns, rls string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range fixedObjects {
		obj := f.obj.DeepCopyObject().(client.Object)
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: f.obj.GetName()}, obj); err != nil {
			t.Fatalf("%s %s: %v", f.kind, f.obj.GetName(), err)
		}
		a := obj.GetAnnotations()
		if a[names.HelmReleaseNameAnnotation] != rls || a[names.HelmReleaseNamespaceAnnotation] != ns {
			t.Errorf("%s %s is not release %s's: annotations %v", f.kind, obj.GetName(), rls, a)
		}
		content := ""
		switch o := obj.(type) {
		case *corev1.ConfigMap:
			content = fmt.Sprint(o.Data)
		case *corev1.Secret:
			content = fmt.Sprint(o.Data)
		}
		out[f.kind+"/"+obj.GetName()] = fmt.Sprintf("uid %s rv %s owner %s content %s", obj.GetUID(), obj.GetResourceVersion(),
			a[names.HelmReleaseNameAnnotation], content)
	}
	return out
}

// installFailures counts the InstallFailed Events of ns/name.
func installFailures(t *testing.T, c client.Client, ns, name string) int {
	t.Helper()
	var events corev1.EventList
	if err := c.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Reason == names.ReasonInstallFailed {
			n += int(max(e.Count, 1))
		}
	}
	return n
}

// The first releases a process installs are checked from the cache of release objects as every
// later one is: the first ownership check of a kind starts following it, so no object of theirs
// is read from the apiserver before it is created (counted in the audit log, which records every
// get of those kinds in the namespace).
func TestTheFirstReleasesOfAProcessAreCheckedFromTheCache(t *testing.T) {
	const ns, releases = "first-wave", 3
	e := startAuditedEnv(t, `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [get]
  namespaces: [`+ns+`]
  resources: [{group: "", resources: [configmaps, services]}, {group: apps, resources: [deployments]}]
- level: None
`)
	ctx := context.Background()
	if err := e.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	e.start(t, "first")
	for i := range releases {
		if err := e.admin.Create(ctx, harness.MyProxy(ns, fmt.Sprintf("p%d", i), map[string]any{})); err != nil {
			t.Fatal(err)
		}
	}
	for i := range releases {
		harness.WaitForCondition(t, e.admin, ns, fmt.Sprintf("p%d", i), names.ConditionDeployed, "True", timeout)
	}
	if err := e.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p0"}, &appsv1.Deployment{}); err != nil {
		t.Fatal(err)
	}
	var byReleases, all int
	for _, ev := range auditedGets(t, e.auditLog) {
		all++
		if strings.Contains(ev, " release "+ns+"/") {
			byReleases++
			t.Logf("read from the apiserver: %s", ev)
		}
	}
	if all == 0 {
		t.Fatal("the audit log recorded no get, not even the test's own: it cannot tell")
	}
	if byReleases != 0 {
		t.Errorf("the releases' actions read %d objects from the apiserver, want none", byReleases)
	}
}

// auditedGets returns, for each get the audit log recorded, the user agent and object that sent it.
func auditedGets(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		var ev struct {
			Verb, UserAgent, Stage string
			ObjectRef              struct{ Resource, Name string }
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		if ev.Stage == "ResponseComplete" && ev.Verb == "get" {
			out = append(out, fmt.Sprintf("%s %s/%s by %s", ev.Verb, ev.ObjectRef.Resource, ev.ObjectRef.Name, ev.UserAgent))
		}
	}
	return out
}

// contestNamespace is where TestTwoProcessesNeverShareAnObject's releases contend (its audit
// policy names it).
const contestNamespace = "contest"

// Two operator processes without leader election, both acting on every custom resource, over
// many custom resources of a chart whose objects have fixed names, created at once: each object
// is only ever one release's (every successful write of it, under one UID, names one release),
// none is deleted but by the release that owns it, one release deploys, and every other's
// condition names it. Counted from the apiserver's audit log, which records each write of the
// fixed objects with its request and response, and the release that sent it (the User-Agent of
// every release's requests names it), and which process wrote each custom resource's status:
// both must have acted on the fleet. Whether a second writer is stopped by a precondition or,
// before it writes, by Helm's ownership check against its cache depends on timing; the test
// needs neither, only that no object ever changes hands.
func TestTwoProcessesNeverShareAnObject(t *testing.T) {
	const contenders = 200
	e := startAuditedEnv(t, `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: RequestResponse
  verbs: [create, update, patch, delete]
  namespaces: [`+contestNamespace+`]
  resources: [{group: "", resources: [configmaps, secrets, serviceaccounts, services], resourceNames: [cd-cm, cd-secret, cd-server]}]
- level: Metadata
  verbs: [update, patch]
  namespaces: [`+contestNamespace+`]
  resources: [{group: `+corpusGroup+`}]
- level: None
`)
	ctx := context.Background()
	watches, _ := corpusProject(t, e.admin)
	if err := e.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: contestNamespace}}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"proc-a", "proc-b"} {
		harness.StartOperator(t, operatorBin, e.kubeconfigFor(t, p), []string{"--watches-file=" + watches,
			"--unlock-pending-after=24h"}, "WATCH_NAMESPACE="+contestNamespace)
	}
	created := make(chan error, contenders)
	for i := range contenders {
		go func() {
			u := corpusCR("FixedNames", contestNamespace, fmt.Sprintf("r%03d", i))
			u.Object["spec"] = map[string]any{}
			created <- e.admin.Create(ctx, u)
		}()
	}
	for range contenders {
		if err := <-created; err != nil {
			t.Fatal(err)
		}
	}
	// One deploys; every other fails, naming it.
	var winner string
	harness.Eventually(t, 5*time.Minute, "one release deployed, every other naming it", func(ctx context.Context) (bool, string) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk(corpusGroup, "v1", "FixedNamesList"))
		if err := e.admin.List(ctx, list, client.InNamespace(contestNamespace)); err != nil {
			return false, err.Error()
		}
		var deployed, named []string
		messages, conditions := map[string]string{}, map[string]any{}
		for _, u := range list.Items {
			if s, _, _ := harness.Condition(&u, names.ConditionDeployed); s == "True" {
				deployed = append(deployed, u.GetName())
			}
			if s, _, msg := harness.Condition(&u, names.ConditionReleaseFailed); s == "True" {
				messages[u.GetName()] = msg
			}
			conditions[u.GetName()], _, _ = unstructured.NestedSlice(u.Object, "status", "conditions")
		}
		if len(deployed) != 1 {
			return false, fmt.Sprintf("deployed: %v", deployed)
		}
		winner = deployed[0]
		for name, msg := range messages {
			if strings.Contains(msg, "belongs to release "+winner+" ") || strings.Contains(msg, `current value is "`+winner+`"`) {
				named = append(named, name)
			}
		}
		var others []string // what the losers that do not name the winner say
		for _, u := range list.Items {
			if n := u.GetName(); n != winner && !slices.Contains(named, n) && len(others) < 3 {
				others = append(others, fmt.Sprintf("%s: %v", n, conditions[n]))
			}
		}
		return len(named) == contenders-1, fmt.Sprintf("%d of %d losers name %s; others: %s", len(named), contenders-1, winner, strings.Join(others, "; "))
	})

	// The audit log: each object (by UID) is one release's; each delete is its owner's.
	owner := map[types.UID]string{} // the release each object's writes named
	var writes, deletes, failed int
	evs, actors := auditedWrites(t, e.auditLog)
	for _, ev := range evs {
		if ev.code >= 300 {
			failed++
			continue
		}
		if ev.verb == "delete" {
			deletes++
			if ev.uid == "" || owner[ev.uid] == "" {
				t.Errorf("%s deleted %s %s without a precondition of an object the audit log saw written (uid %q)", ev.release, ev.resource, ev.name, ev.uid)
			} else if owner[ev.uid] != ev.release {
				t.Errorf("%s deleted %s %s (uid %s), which is release %s's", ev.release, ev.resource, ev.name, ev.uid, owner[ev.uid])
			}
			continue
		}
		writes++
		if first, ok := owner[ev.uid]; ok && first != ev.owner {
			t.Errorf("%s %s (uid %s), release %s's, was written by %s as release %s's", ev.resource, ev.name, ev.uid, first, ev.release, ev.owner)
		}
		if ev.owner != ev.release {
			t.Errorf("%s wrote %s %s (uid %s) as release %s's", ev.release, ev.resource, ev.name, ev.uid, ev.owner)
		}
		owner[ev.uid] = ev.owner
	}
	t.Logf("winner %s; the audit log holds %d successful writes of %d objects, %d deletes, %d refused writes; custom resources written by %v",
		winner, writes, len(owner), deletes, failed, slices.Sorted(maps.Keys(actors)))
	if writes == 0 || !actors["proc-a"] || !actors["proc-b"] {
		t.Errorf("%d writes, custom resources written by %v: the contest did not happen", writes, actors)
	}
}

// auditedWrite is one write of a fixed object, as the audit log records it: the release that
// sent it (from its User-Agent), the release the object it left names (owner), its UID (a
// delete's precondition).
type auditedWrite struct {
	verb, resource, name, release, owner string
	uid                                  types.UID
	code                                 int
}

// auditedWrites reads the writes of the releases' actions, in the order the apiserver answered,
// and the users that wrote custom resources of the corpus.
func auditedWrites(t *testing.T, path string) ([]auditedWrite, map[string]bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditedWrite
	actors := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev struct {
			Verb, UserAgent, Stage string
			User                   struct{ Username string }
			ObjectRef              struct{ APIGroup, Resource, Name string }
			RequestObject          *struct {
				Preconditions *struct{ UID types.UID }
			}
			ResponseObject *metav1.PartialObjectMetadata
			ResponseStatus struct{ Code int }
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		if ev.ObjectRef.APIGroup == corpusGroup && ev.Stage == "ResponseComplete" && ev.ResponseStatus.Code < 300 {
			actors[ev.User.Username] = true
			continue
		}
		_, release, ok := strings.Cut(ev.UserAgent, " release "+contestNamespace+"/")
		if ev.Stage != "ResponseComplete" || !ok || ev.ObjectRef.APIGroup != "" {
			continue
		}
		w := auditedWrite{verb: ev.Verb, resource: ev.ObjectRef.Resource, name: ev.ObjectRef.Name, release: release, code: ev.ResponseStatus.Code}
		switch {
		case ev.Verb == "delete" && ev.RequestObject != nil && ev.RequestObject.Preconditions != nil:
			w.uid = ev.RequestObject.Preconditions.UID
		case ev.Verb != "delete" && ev.ResponseObject != nil:
			w.uid, w.owner = ev.ResponseObject.UID, ev.ResponseObject.Annotations[names.HelmReleaseNameAnnotation]
		}
		out = append(out, w)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out, actors
}

// driftNamespace is where TestDriftCorrectionWritesOnlyWhatDrifted's release lives (its audit
// policy names it).
const driftNamespace = "drift"

// Drift correction writes an object only when it drifted: a NetworkPolicy whose ports the
// apiserver completes (each port's protocol) and a Secret the chart writes as stringData (the
// apiserver stores it as data) are sent no write, whatever other object drifts (a Deployment
// deleted by hand), until one of them changes; then it alone is written, once. Counted from the
// audit log: every write of the two, dry runs told apart.
func TestDriftCorrectionWritesOnlyWhatDrifted(t *testing.T) {
	e := startAuditedEnv(t, `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch]
  namespaces: [`+driftNamespace+`]
  resources: [{group: networking.k8s.io, resources: [networkpolicies]}, {group: "", resources: [secrets], resourceNames: [cd-secret]}]
- level: None
`)
	ctx := context.Background()
	watches, _ := corpusProject(t, e.admin)
	if err := e.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: driftNamespace}}); err != nil {
		t.Fatal(err)
	}
	harness.StartOperator(t, operatorBin, e.kubeconfigFor(t, "drift"), []string{"--watches-file=" + watches}, "WATCH_NAMESPACE="+driftNamespace)
	cr := corpusCR("FixedNames", driftNamespace, "argo")
	cr.Object["spec"] = map[string]any{"configs": map[string]any{"secret": map[string]any{"extra": map[string]any{"token": "from the chart"}}}}
	if err := e.admin.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, timeout, "argo deployed", func(ctx context.Context) (bool, string) {
		u := corpusCR("FixedNames", driftNamespace, "argo")
		if err := e.admin.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return false, err.Error()
		}
		status, _, msg := harness.Condition(u, names.ConditionDeployed)
		return status == "True", msg
	})
	// Every object is corrected twice, once per Deployment deleted by hand.
	deployment := types.NamespacedName{Namespace: driftNamespace, Name: "cd-server"}
	for range 2 {
		d := &appsv1.Deployment{}
		if err := e.admin.Get(ctx, deployment, d); err != nil {
			t.Fatal(err)
		}
		if err := e.admin.Delete(ctx, d); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, timeout, "the Deployment back", func(ctx context.Context) (bool, string) {
			back := &appsv1.Deployment{}
			err := e.admin.Get(ctx, deployment, back)
			return err == nil && back.UID != d.UID, fmt.Sprint(err)
		})
	}
	writes := func() (real, dryRuns map[string]int) {
		real, dryRuns = map[string]int{}, map[string]int{}
		for _, w := range auditedOperatorWrites(t, e.auditLog, "drift") {
			if w.dryRun {
				dryRuns[w.resource]++
			} else {
				real[w.resource]++
			}
		}
		return real, dryRuns
	}
	real, dryRuns := writes()
	t.Logf("after the install and two drift corrections: writes %v, dry runs %v", real, dryRuns)
	if real["networkpolicies"] != 1 || real["secrets"] != 1 {
		t.Errorf("writes %v: want one of each (its creation), nothing written that did not drift", real)
	}
	if dryRuns["networkpolicies"] == 0 || dryRuns["secrets"] == 0 {
		t.Errorf("dry runs %v: the corrections did not look at the two objects", dryRuns)
	}
	// The NetworkPolicy drifts: it alone is written, once.
	np := &networkingv1.NetworkPolicy{}
	if err := e.admin.Get(ctx, types.NamespacedName{Namespace: driftNamespace, Name: "cd-server"}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Ingress[0].Ports[0].Port = ptr.To(intstr.FromInt32(9999))
	if err := e.admin.Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, timeout, "the NetworkPolicy's port set back", func(ctx context.Context) (bool, string) {
		if err := e.admin.Get(ctx, client.ObjectKeyFromObject(np), np); err != nil {
			return false, err.Error()
		}
		return np.Spec.Ingress[0].Ports[0].Port.IntValue() == 8080, np.Spec.Ingress[0].Ports[0].Port.String()
	})
	if after, _ := writes(); after["networkpolicies"] != 2 || after["secrets"] != 1 {
		t.Errorf("writes after the NetworkPolicy drifted: %v, want it written once more and the Secret not", after)
	}
}

// operatorWrite is a write by the operator (user) to an object, as the audit log records it.
type operatorWrite struct {
	resource string
	dryRun   bool
}

// auditedOperatorWrites reads the successful writes of user.
func auditedOperatorWrites(t *testing.T, path, user string) []operatorWrite {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []operatorWrite
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var ev struct {
			Stage, RequestURI string
			User              struct{ Username string }
			ObjectRef         struct{ Resource string }
			ResponseStatus    struct{ Code int }
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		if ev.Stage != "ResponseComplete" || ev.User.Username != user || ev.ResponseStatus.Code >= 300 {
			continue
		}
		out = append(out, operatorWrite{resource: ev.ObjectRef.Resource, dryRun: strings.Contains(ev.RequestURI, "dryRun=All")})
	}
	return out
}

// kubeClients returns a client, a new namespace, and the Helm configurations whose kube clients
// the tests below drive by hand, as an action would.
func kubeClients(t *testing.T) (client.Client, string, *helmconfig.Configs) {
	t.Helper()
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	configs, err := helmconfig.New(cfg, c.RESTMapper(), helmconfig.Settings{Managed: names.ManagedValue, Records: helmconfig.NewRecords(nil)})
	if err != nil {
		t.Fatal(err)
	}
	return c, ns, configs
}

// storedMyProxy is MyProxy namespace/name as if stored, with a UID, for a kube client to point
// the objects it builds at (none is stored: nothing here reconciles it).
func storedMyProxy(namespace, name string) *unstructured.Unstructured {
	mp := harness.MyProxy(namespace, name, nil)
	mp.SetUID(types.UID("uid-" + name))
	return mp
}

// An upgrade writes an object its release keeps (the last revision names it) only while it is
// that release's, whatever the cache of release objects knows of it: the object another release
// holds is not written, and its owner is named, when the cache holds it, when the cache does not
// follow its kind, and when the cache follows the kind but has not heard of the object yet (in
// both, the object is read). Two processes acting on one release's failed install, whose
// manifest names objects it never created, meet the last case. Server-side and client-side.
func TestAnUpgradeNeverWritesAKeptObjectAnotherReleaseHolds(t *testing.T) {
	ctx := context.Background()
	c, ns, configs := kubeClients(t)
	// apply sends release's ConfigMap "shared" through its kube client: an Update whose last
	// revision had it when upgrade, else a Create.
	apply := func(release string, serverSide, upgrade bool) error {
		cfg, _, err := configs.For(ctx, storedMyProxy(ns, release), logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		manifest := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\n  annotations: {%s: %s, %s: %s}\ndata: {by: %s}\n",
			names.HelmReleaseNameAnnotation, release, names.HelmReleaseNamespaceAnnotation, ns, release)
		build := func() kube.ResourceList {
			objs, err := cfg.KubeClient.Build(strings.NewReader(manifest), false)
			if err != nil {
				t.Fatal(err)
			}
			return objs
		}
		defer helmconfig.SetAction(cfg, helmconfig.Action{ServerSide: serverSide})()
		if !upgrade {
			_, err = cfg.KubeClient.Create(build(), kube.ClientCreateOptionServerSideApply(serverSide, false))
			return err
		}
		_, err = cfg.KubeClient.Update(build(), build(), kube.ClientUpdateOptionServerSideApply(serverSide, false),
			kube.ClientUpdateOptionThreeWayMergeForUnstructured(!serverSide))
		return err
	}
	if err := apply("winner", true, false); err != nil {
		t.Fatal(err)
	}
	shared := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "shared"}, shared); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cache  string
		cached func(schema.GroupVersionKind, types.NamespacedName) (client.Object, bool)
	}{
		{"holds it", func(schema.GroupVersionKind, types.NamespacedName) (client.Object, bool) {
			return shared.DeepCopy(), true
		}},
		{"does not follow ConfigMaps", nil},
		{"follows ConfigMaps but has not heard of it", func(schema.GroupVersionKind, types.NamespacedName) (client.Object, bool) { return nil, true }},
	} {
		for _, serverSide := range []bool{true, false} {
			configs.Cached = tc.cached
			err := apply("loser", serverSide, true)
			if taken := helmconfig.Taken(err); taken == nil || taken.Release != "winner" {
				t.Errorf("the cache %s, server-side %v: the upgrade's error %v, want one naming release winner", tc.cache, serverSide, err)
			}
			after := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(shared), after); err != nil {
				t.Fatal(err)
			}
			if after.UID != shared.UID || after.ResourceVersion != shared.ResourceVersion {
				t.Fatalf("the cache %s, server-side %v: the winner's ConfigMap was written: %v, data %v", tc.cache, serverSide,
					after.Annotations, after.Data)
			}
		}
	}
}

// An upgrade deletes an object its chart no longer renders only while it is its release's: one
// deleted and made again by another release since stays (as it was: same UID), as does one that
// asks Helm to keep it; the release's own goes. Helm's own upgrade deletes each it finds, without
// asking whose it is.
func TestAnUpgradeDeletesOnlyWhatItsReleaseHolds(t *testing.T) {
	ctx := context.Background()
	c, ns, configs := kubeClients(t)
	// configMaps builds release's ConfigMaps of these names through its kube client.
	configMaps := func(release string, kept []string, objects ...string) (*action.Configuration, kube.ResourceList) {
		cfg, _, err := configs.For(ctx, storedMyProxy(ns, release), logr.Discard())
		if err != nil {
			t.Fatal(err)
		}
		var manifest strings.Builder
		for _, name := range objects {
			policy := ""
			if slices.Contains(kept, name) {
				policy = ", helm.sh/resource-policy: keep"
			}
			fmt.Fprintf(&manifest, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  annotations: {%s: %s, %s: %s%s}\n",
				name, names.HelmReleaseNameAnnotation, release, names.HelmReleaseNamespaceAnnotation, ns, policy)
		}
		objs, err := cfg.KubeClient.Build(strings.NewReader(manifest.String()), false)
		if err != nil {
			t.Fatal(err)
		}
		return cfg, objs
	}
	for _, serverSide := range []bool{true, false} {
		prefix := map[bool]string{true: "ssa-", false: "csa-"}[serverSide]
		own, taken, kept, stays := prefix+"own", prefix+"taken", prefix+"kept", prefix+"stays"
		cfg, original := configMaps("a", []string{kept}, own, taken, kept, stays)
		if _, err := cfg.KubeClient.Create(original, kube.ClientCreateOptionServerSideApply(serverSide, false)); err != nil {
			t.Fatal(err)
		}
		// taken changes hands: deleted, and made again by release b.
		if err := c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: taken}}); err != nil {
			t.Fatal(err)
		}
		bCfg, bObjs := configMaps("b", nil, taken)
		if _, err := bCfg.KubeClient.Create(bObjs, kube.ClientCreateOptionServerSideApply(serverSide, false)); err != nil {
			t.Fatal(err)
		}
		before := &corev1.ConfigMap{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: taken}, before); err != nil {
			t.Fatal(err)
		}
		_, target := configMaps("a", nil, stays)
		done := helmconfig.SetAction(cfg, helmconfig.Action{ServerSide: serverSide})
		_, err := cfg.KubeClient.Update(original, target, kube.ClientUpdateOptionServerSideApply(serverSide, false),
			kube.ClientUpdateOptionThreeWayMergeForUnstructured(!serverSide))
		done()
		if err != nil {
			t.Fatalf("server-side %v: the upgrade failed: %v", serverSide, err)
		}
		for name, want := range map[string]bool{own: false, taken: true, kept: true, stays: true} {
			got := &corev1.ConfigMap{}
			err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, got)
			if want != (err == nil) {
				t.Errorf("server-side %v: ConfigMap %s: %v, want present %v", serverSide, name, err, want)
			}
			if name == taken && err == nil && got.UID != before.UID {
				t.Errorf("server-side %v: release b's ConfigMap %s was made again", serverSide, name)
			}
		}
	}
}

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// contestNamespace is where TestTwoProcessesNeverShareAnObject's releases contend (its audit
// policy names it).
const contestNamespace = "contest"

// Two operator processes without leader election, both acting on every custom resource, over
// many custom resources of a chart whose objects have fixed names, created at once: each object
// is only ever one release's (every successful write of it, under one UID, names one release),
// none is deleted but by the release that owns it, one release deploys, and every other's
// condition names it. Counted from the apiserver's audit log, which records each write of the
// fixed objects with its request and response, and the release that sent it (the User-Agent of
// every release's requests names it).
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
		messages := map[string]string{}
		for _, u := range list.Items {
			if s, _, _ := harness.Condition(&u, names.ConditionDeployed); s == "True" {
				deployed = append(deployed, u.GetName())
			}
			if s, _, msg := harness.Condition(&u, names.ConditionReleaseFailed); s == "True" {
				messages[u.GetName()] = msg
			}
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
		return len(named) == contenders-1, fmt.Sprintf("%d of %d losers name %s", len(named), contenders-1, winner)
	})

	// The audit log: each object (by UID) is one release's; each delete is its owner's.
	owner := map[types.UID]string{} // the release each object's writes named
	var writes, deletes, failed int
	for _, ev := range auditedWrites(t, e.auditLog) {
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
	t.Logf("winner %s; the audit log holds %d successful writes of %d objects, %d deletes, %d refused writes", winner, writes, len(owner), deletes, failed)
	if writes == 0 || failed == 0 {
		t.Errorf("%d writes, %d refused: the contest did not happen", writes, failed)
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

// auditedWrites reads the writes of the releases' actions, in the order the apiserver answered.
func auditedWrites(t *testing.T, path string) []auditedWrite {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditedWrite
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev struct {
			Verb, UserAgent, Stage string
			ObjectRef              struct{ Resource, Name string }
			RequestObject          *struct {
				Preconditions *struct{ UID types.UID }
			}
			ResponseObject *metav1.PartialObjectMetadata
			ResponseStatus struct{ Code int }
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		_, release, ok := strings.Cut(ev.UserAgent, " release "+contestNamespace+"/")
		if ev.Stage != "ResponseComplete" || !ok {
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
	return out
}

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/tenancy"
	"github.com/example/myproxy-operator/test/certs"
	"github.com/example/myproxy-operator/test/fixture"
	"github.com/example/myproxy-operator/test/harness"
)

// A new chart, before it ships: `make preview` (hack/preview) names the releases it would change,
// replace (an immutable field) or have refused by the apiserver, and leaves the rest unchanged;
// its exit status says that some would fail; it writes nothing (every write it sends in the
// audit log is a dry run, and the releases stay as they were).
func TestPreviewNamesWhatANewChartWouldDoAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	watches := harness.WriteWatches(t, harness.Watch{})
	startOperator(t, harness.Watch{}, "WATCH_NAMESPACE="+ns)
	// The new chart breaks the releases by their replicas: 2 renders a label the apiserver
	// refuses, 3 changes the Deployment's selector (immutable), 4 only adds a Pod annotation.
	fleet := map[string]struct {
		replicas int64
		want     previewOutcome
	}{
		"same":     {1, previewUnchanged},
		"refused":  {2, previewRefused},
		"replaced": {3, previewReplaced},
		"changed":  {4, previewChanged},
	}
	replicas := map[string]int64{}
	for name, p := range fleet {
		replicas[name] = p.replicas
	}
	deployFleet(t, c, ns, replicas)
	chart, deployment, raw := chartCopy(t)
	broken := strings.Replace(raw, `      {{- include "myproxy.selectorLabels" . | nindent 6 }}`,
		`      {{- include "myproxy.selectorLabels" . | nindent 6 }}
      {{- if eq (int .Values.replicas) 3 }}
      tier: big
      {{- end }}`, 1)
	broken = strings.Replace(broken, `        {{- include "myproxy.labels" . | nindent 8 }}`,
		`        {{- include "myproxy.labels" . | nindent 8 }}
        {{- if eq (int .Values.replicas) 3 }}
        tier: big
        {{- end }}
        {{- if eq (int .Values.replicas) 2 }}
        broken: "not a label value!"
        {{- end }}`, 1)
	broken = strings.Replace(broken, `      annotations:
`, `      annotations:
        {{- if eq (int .Values.replicas) 4 }}
        preview.example.com/new: "yes"
        {{- end }}
`, 1)
	if strings.Count(broken, "replicas) ") != 4 {
		t.Fatal("the chart's Deployment template changed: the test's edits no longer apply")
	}
	if err := os.WriteFile(deployment, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) (string, int) {
		t.Helper()
		return runPreview(t, watches, ns, args...)
	}

	// The chart that runs: every release unchanged, nothing fails.
	out, code := run()
	if code != previewNothingFails || !strings.Contains(out, "4 releases: 4 unchanged, 0 changed, 0 replaced, 0 refused") {
		t.Errorf("the deployed chart previewed with exit status %d:\n%s", code, out)
	}

	out, code = run("--chart-dir="+chart, "-o", "json")
	if code != previewSomeFail {
		t.Errorf("exit status %d, want %d (some upgrades would fail)", code, previewSomeFail)
	}
	var rep previewReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(rep.Releases) != len(fleet) {
		t.Fatalf("%d releases previewed, want %d: %+v", len(rep.Releases), len(fleet), rep.Releases)
	}
	for _, rel := range rep.Releases {
		want := fleet[rel.Name].want
		if rel.Outcome != want || rel.Namespace != ns {
			t.Errorf("%s/%s: %s (%s), want %s: %+v", rel.Namespace, rel.Name, rel.Outcome, rel.Message, want, rel.Objects)
		}
		if want == previewUnchanged {
			continue
		}
		if len(rel.Objects) != 1 || rel.Objects[0].Name != rel.Name || !strings.HasSuffix(rel.Objects[0].Kind, "Deployment") {
			t.Errorf("%s: objects %+v, want its Deployment alone", rel.Name, rel.Objects)
		}
		if want.Fails() && !strings.Contains(rel.Objects[0].Refused, map[previewOutcome]string{
			previewRefused: "not a label value", previewReplaced: "field is immutable"}[want]) {
			t.Errorf("%s: the apiserver's answer %q does not say why", rel.Name, rel.Objects[0].Refused)
		}
	}
	text, _ := run("--chart-dir="+chart, "--diff")
	for _, line := range []string{"MyProxy " + ns + "/changed: changed", "  changed Deployment changed",
		"MyProxy " + ns + "/replaced: replaced", "MyProxy " + ns + "/refused: refused", "MyProxy " + ns + "/same: unchanged",
		`preview.example.com/new`, "4 releases: 1 unchanged, 1 changed, 1 replaced, 1 refused"} {
		if !strings.Contains(text, line) {
			t.Errorf("the text output lacks %q:\n%s", line, text)
		}
	}

	// Nothing written: every write the preview sent was a dry run, and no release moved.
	writes, dryRuns := previewWrites(t, ns)
	if writes == 0 || writes != dryRuns {
		t.Errorf("the preview sent %d writes in %s, %d of them dry runs: want some, all dry runs", writes, ns, dryRuns)
	}
	for name := range fleet {
		if secrets, err := releaseSecrets(ctx, c, ns, name); err != nil || len(secrets) != 1 {
			t.Errorf("%s: %d release records (err %v) after the previews, want its one revision", name, len(secrets), err)
		}
	}
}

// The install or upgrade a preview stands for runs the chart's hooks of that action: the
// preview dry-runs the creation of each hook object and names it, and a hook object the
// apiserver refuses, or one outside the release's reach, fails the release as it would fail the
// upgrade. Hooks of other events (a test hook) are left out, as is every hook of a release that
// would not change; nothing of a hook is stored.
func TestPreviewDryRunsTheHooksOfTheUpgrade(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	watches := harness.WriteWatches(t, harness.Watch{})
	startOperator(t, harness.Watch{}, "WATCH_NAMESPACE="+ns)
	deployFleet(t, c, ns, map[string]int64{"fine": 1, "broken": 2, "same": 3, "astray": 4})
	// The new chart changes every release's Pods but those of 3 replicas, and brings a
	// pre-upgrade hook (whose label the apiserver refuses at 2 replicas, and which goes outside
	// the release's namespace at 4) and a test hook that the apiserver would refuse everywhere.
	chart, deployment, raw := chartCopy(t)
	changed := strings.Replace(raw, `      annotations:
`, `      annotations:
        {{- if ne (int .Values.replicas) 3 }}
        preview.example.com/new: "yes"
        {{- end }}
`, 1)
	if changed == raw {
		t.Fatal("the chart's Deployment template changed: the test's edit no longer applies")
	}
	hooks := `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-migrate
  {{- if eq (int .Values.replicas) 4 }}
  namespace: kube-public
  {{- end }}
  annotations:
    helm.sh/hook: pre-upgrade
    helm.sh/hook-delete-policy: hook-succeeded
  {{- if eq (int .Values.replicas) 2 }}
  labels:
    broken: "not a label value!"
  {{- end }}
data: {}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-smoke
  annotations:
    helm.sh/hook: test
  labels:
    broken: "not a label value!"
data: {}
`
	for path, content := range map[string]string{deployment: changed, filepath.Join(chart, "templates", "hooks.yaml"): hooks} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	out, code := runPreview(t, watches, ns, "--chart-dir="+chart, "-o", "json")
	if code != previewSomeFail {
		t.Errorf("exit status %d, want %d (the broken hook fails an upgrade)", code, previewSomeFail)
	}
	var rep previewReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	want := map[string]previewOutcome{"fine": previewChanged, "broken": previewRefused, "same": previewUnchanged, "astray": previewRefused}
	refusal := map[string]string{"fine": "", "broken": "not a label value", "astray": "outside namespace " + ns}
	if len(rep.Releases) != len(want) {
		t.Fatalf("%d releases previewed, want %d: %+v", len(rep.Releases), len(want), rep.Releases)
	}
	for _, rel := range rep.Releases {
		if rel.Outcome != want[rel.Name] {
			t.Errorf("%s: %s (%s), want %s: %+v", rel.Name, rel.Outcome, rel.Message, want[rel.Name], rel.Objects)
		}
		var hooked []previewObject
		for _, o := range rel.Objects {
			if strings.HasPrefix(o.Change, "hook") {
				hooked = append(hooked, o)
			}
		}
		if rel.Name == "same" {
			if len(hooked) != 0 {
				t.Errorf("same: hooks %+v previewed for a release that would not be upgraded", hooked)
			}
			continue
		}
		if len(hooked) != 1 || hooked[0].Name != rel.Name+"-migrate" || hooked[0].Change != "hook pre-upgrade" {
			t.Errorf("%s: hooks %+v, want its pre-upgrade ConfigMap alone", rel.Name, hooked)
			continue
		}
		if refused := hooked[0].Refused; (refusal[rel.Name] == "") != (refused == "") || !strings.Contains(refused, refusal[rel.Name]) {
			t.Errorf("%s: the hook was refused with %q, want %q", rel.Name, refused, refusal[rel.Name])
		}
	}
	// Nothing of the hooks stored.
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if strings.HasSuffix(cm.Name, "-migrate") || strings.HasSuffix(cm.Name, "-smoke") {
			t.Errorf("the preview stored hook object %s", cm.Name)
		}
	}
}

// deployFleet creates a MyProxy of each name and number of replicas in ns and waits until every
// one is Deployed.
func deployFleet(t *testing.T, c client.Client, ns string, replicas map[string]int64) {
	t.Helper()
	for name, n := range replicas {
		if err := c.Create(context.Background(), harness.MyProxy(ns, name, map[string]any{"replicas": n})); err != nil {
			t.Fatal(err)
		}
	}
	for name := range replicas {
		harness.WaitForCondition(t, c, ns, name, "Deployed", "True", timeout)
	}
}

// chartCopy copies the MyProxy chart for a test to change: its directory, the path of its
// Deployment template and that template's text.
func chartCopy(t *testing.T) (dir, deployment, text string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "myproxy")
	harness.CopyDir(t, filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"), dir)
	deployment = filepath.Join(dir, "templates", "deployment.yaml")
	raw, err := os.ReadFile(deployment)
	if err != nil {
		t.Fatal(err)
	}
	return dir, deployment, string(raw)
}

// runPreview runs the preview command (hack/preview) as the preview user over the custom resources of
// namespaces (comma-separated) and returns its output and exit status.
func runPreview(t *testing.T, watches, namespaces string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(env.PreviewBin, append([]string{"--watches-file=" + watches}, args...)...)
	cmd.Dir = harness.RepoRoot()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.PreviewKubeconfig, "WATCH_NAMESPACE="+namespaces)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if stderr.Len() > 0 {
		t.Logf("preview %v said on stderr:\n%s", args, stderr.String())
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// A kind whose releases run as a ServiceAccount is previewed as that ServiceAccount: the chart's
// checks read Secrets as it and the objects are dry-run as it, so the preview refuses what the
// operator's own install or upgrade would be refused, where the preview user's rights (any)
// would let it pass.
func TestPreviewActsAsTheWatchsServiceAccount(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	const account = "deployer"
	watches := harness.WriteWatches(t, harness.Watch{Extra: tenancy.ServiceAccountKey + ": " + account})
	// narrow's ServiceAccount may not create Deployments nor read Secrets; broad's has the
	// generated deployer role.
	narrow, broad := newNamespace(t, c, nil), newNamespace(t, c, nil)
	harness.GrantServiceAccount(t, c, narrow, account, append(deployerRules(t, without("deployments", "secrets")), rbacv1.PolicyRule{
		APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "update", "patch", "delete"}}))
	harness.GrantServiceAccount(t, c, broad, account, deployerRules(t, func(rbacv1.PolicyRule) bool { return true }))
	pair := certs.Valid(t, "edge")
	secured := map[string]any{"tls": map[string]any{"secretName": "tls"}}
	for _, ns := range []string{narrow, broad} {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: pair.Cert, corev1.TLSPrivateKeyKey: pair.Key}}); err != nil {
			t.Fatal(err)
		}
		for name, spec := range map[string]map[string]any{"plain": {}, "secured": secured} {
			if err := c.Create(ctx, harness.MyProxy(ns, name, spec)); err != nil {
				t.Fatal(err)
			}
		}
	}

	out, code := runPreview(t, watches, narrow+","+broad, "-o", "json")
	if code != previewSomeFail {
		t.Errorf("exit status %d, want %d (the narrow namespace's releases would fail)", code, previewSomeFail)
	}
	var rep previewReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	user := serviceaccount.MakeUsername(narrow, account)
	want := map[string]struct {
		outcome previewOutcome
		says    []string // in the release's message and its objects' refusals
	}{
		narrow + "/plain":   {previewRefused, []string{user, `cannot create resource "deployments"`}},
		narrow + "/secured": {previewRefused, []string{"spec.tls.secretName", user, `cannot get resource "secrets"`}},
		broad + "/plain":    {previewChanged, nil},
		broad + "/secured":  {previewChanged, nil},
	}
	if len(rep.Releases) != len(want) {
		t.Fatalf("%d releases previewed, want %d: %+v", len(rep.Releases), len(want), rep.Releases)
	}
	for _, rel := range rep.Releases {
		key := rel.Namespace + "/" + rel.Name
		w := want[key]
		said := rel.Message
		for _, o := range rel.Objects {
			said += "\n" + o.Refused
		}
		if rel.Outcome != w.outcome {
			t.Errorf("%s: %s, want %s: %s", key, rel.Outcome, w.outcome, said)
		}
		for _, s := range w.says {
			if !strings.Contains(said, s) {
				t.Errorf("%s: %q does not name %q", key, said, s)
			}
		}
	}
}

// previewWrites counts the writes (create, update, patch, delete) the preview user sent for
// objects in ns, and of them the dry runs, from the audit log.
func previewWrites(t *testing.T, ns string) (writes, dryRuns int) {
	t.Helper()
	f, err := os.Open(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			Verb, Stage, RequestURI string
			User                    struct{ Username string }
			ObjectRef               *struct{ Namespace string } `json:"objectRef"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		if e.Stage != "ResponseComplete" || e.User.Username != fixture.PreviewUser || e.ObjectRef == nil || e.ObjectRef.Namespace != ns {
			continue
		}
		switch e.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			writes++
			if strings.Contains(e.RequestURI, "dryRun=All") {
				dryRuns++
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return writes, dryRuns
}

// What the preview command (hack/preview) prints with -o json, and its exit statuses.
type (
	previewOutcome string
	previewObject  struct {
		Kind, Name, Change, Refused string
	}
	previewReport struct {
		Releases []struct {
			Namespace, Name, Message string
			Outcome                  previewOutcome
			Objects                  []previewObject
		}
	}
)

const (
	previewUnchanged, previewChanged, previewReplaced, previewRefused previewOutcome = "unchanged", "changed", "replaced", "refused"
	previewNothingFails, previewSomeFail                                             = 0, 1
)

// Fails reports whether the upgrade of a release with this outcome would fail.
func (o previewOutcome) Fails() bool { return o == previewReplaced || o == previewRefused }

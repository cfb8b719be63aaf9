package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/rollout"
	"github.com/example/myproxy-operator/test/fixture"
	"github.com/example/myproxy-operator/test/harness"
)

// neverReady is the readiness probe path that the local cluster's kwok keeps failing
// (hack/cluster/kwok-stages.yaml).
const neverReady = "/kwok-never-ready"

// A new chart whose readiness probe never passes for MyProxies with 3 replicas: the preview
// names exactly those releases' probe change beforehand; the rollout upgrades the canaries,
// halts when one stays unready past the timeout, leaves the rest of the fleet on the old chart
// and says so (a condition on each held MyProxy naming the failed release, an Event, a metric);
// an administrator's annotation upgrades one regardless; an administrator's resume on the same
// chart (not a tenant's look-alike in the fleet's namespace) judges the failed release again and
// halts again; a fixed chart restarts the rollout from the canaries and takes it to the end,
// across a SIGKILL of the operator, upgrading no release twice.
func TestChartRolloutGoesInWavesAndHaltsOnFailure(t *testing.T) {
	installCRD(t)
	ctx := context.Background()
	c := harness.NewClient(t, harness.ConfigFromKubeconfig(t, kubeconfig))
	ns := harness.Namespace(t, c, nil)
	stateNS := harness.Namespace(t, c, nil)
	stateName := rollout.StoreName(harness.MyProxyGVK, "")
	chart := filepath.Join(t.TempDir(), "myproxy")
	harness.CopyDir(t, filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"), chart)
	watches := harness.WriteWatches(t, harness.Watch{Chart: chart,
		Extra: "rollout: {canarySelector: {matchLabels: {rollout: canary}}, timeout: 20s}"})
	metrics := harness.FreeAddr(t)
	start := func() *harness.Operator {
		// Leader election (its Lease beside the rollout state) lets a restarted operator repair at
		// once a release that the SIGKILL below left pending.
		return harness.StartOperator(t, operatorBin, kubeconfig, []string{"--watches-file=" + watches,
			"--leader-elect", "--leader-election-namespace=" + stateNS, "--leader-election-id=rollout",
			"--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s", "--leader-election-retry-period=500ms",
			"--metrics-bind-address=" + metrics}, "WATCH_NAMESPACE="+ns)
	}

	// The fleet: p2 and p6 have 3 replicas (the value the new chart breaks), p1 and p2 are the canaries.
	fleet := []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"}
	broken := []string{"p2", "p6"}
	op := start()
	for _, name := range fleet {
		mp := harness.MyProxy(ns, name, map[string]any{"replicas": map[bool]int64{true: 3, false: 1}[slices.Contains(broken, name)]})
		if name == "p1" || name == "p2" {
			mp.SetLabels(map[string]string{"rollout": "canary"})
		}
		if err := c.Create(ctx, mp); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range fleet {
		harness.WaitForCondition(t, c, ns, name, names.ConditionReady, "True", 120*time.Second)
	}
	op.Stop(t)

	// Chart 2: every Pod is annotated with the chart's version; with 3 replicas the readiness
	// probe asks for a path that never answers.
	writeChart(t, chart, "2", `{{ if eq (int .Values.replicas) 3 }}`+neverReady+`{{ else }}/healthz{{ end }}`)

	// The preview, before anything runs: every release changes; exactly the broken ones' probe.
	rep := previewReport(t, watches, ns, chart)
	var probed []string
	for _, rel := range rep.Releases {
		if rel.Outcome != "changed" {
			t.Errorf("preview: %s is %s, want changed", rel.Name, rel.Outcome)
		}
		for _, o := range rel.Objects {
			if strings.Contains(o.Diff, neverReady) {
				probed = append(probed, rel.Name)
			}
		}
	}
	sort.Strings(probed)
	if !slices.Equal(probed, broken) {
		t.Errorf("the preview shows the never-ready probe for %v, want exactly %v", probed, broken)
	}

	op = start()
	// Halted: p2 (a canary) stays unready past the timeout; every other release waits.
	for _, name := range fleet[2:] {
		mp := harness.WaitForCondition(t, c, ns, name, names.ConditionRolloutHeld, "True", 180*time.Second)
		if _, _, msg := harness.Condition(mp, names.ConditionRolloutHeld); !strings.Contains(msg, ns+"/p2: not Ready within 20s") {
			t.Errorf("%s: RolloutHeld says %q, want it to name %s/p2", name, msg, ns)
		}
	}
	st := rolloutState(t, c, stateNS)
	if st.Halted == "" || st.Members[ns+"/p2"].Phase != rollout.PhaseFailed || st.Members[ns+"/p1"].Phase != rollout.PhaseReady {
		t.Errorf("stored state: %+v, want halted with p2 failed and p1 ready", st)
	}
	for _, name := range fleet {
		want := map[bool]string{true: "2", false: ""}[name == "p1" || name == "p2"]
		if got := chartVersion(t, c, ns, name); got != want {
			t.Errorf("%s: its Pods are of chart version %q, want %q (only the canaries upgraded)", name, got, want)
		}
	}
	out := kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=p2,reason="+names.ReasonRolloutHalted, "-o", "name")
	if strings.TrimSpace(out) == "" {
		t.Errorf("no %s Event on p2", names.ReasonRolloutHalted)
	}
	if body, err := harness.ScrapeMetrics(metrics); err != nil || !strings.Contains(body, `myproxy_operator_rollout_halted{kind="MyProxy"} 1`) {
		t.Errorf("the halted metric is not 1 (err %v)", err)
	}
	// An administrator upgrades p3 regardless.
	kubectl(t, "annotate", "-n", ns, "myproxy/p3", rollout.UpgradeNowAnnotation+"=true")
	harness.Eventually(t, 120*time.Second, "p3 upgraded by the annotation", func(context.Context) (bool, string) {
		v := chartVersion(t, c, ns, "p3")
		return v == "2", "chart version " + v
	})
	kubectl(t, "annotate", "-n", ns, "myproxy/p3", rollout.UpgradeNowAnnotation+"-")

	// A tenant, who may edit anything in the fleet's namespace, asks for a resume the only way
	// their rights allow: a ConfigMap of the state's name in their own namespace. Only the state
	// namespace's ConfigMap is read, so the request below is the one resume handled.
	bindTenant(t, ns)
	waitCanI(t, tenantUser, "patch", "configmaps", stateNS, "no")
	kubectl(t, "--as", tenantUser, "create", "configmap", "-n", ns, stateName)
	kubectl(t, "--as", tenantUser, "annotate", "-n", ns, "configmap/"+stateName, rollout.ResumeAnnotation+"=tenant")

	// An administrator resumes the rollout on the same chart: p2 is admitted again, judged again
	// and, still unready, halts it again; no release of a later wave moves.
	resumedAt := time.Now().Truncate(time.Second)
	kubectl(t, "annotate", "-n", stateNS, "configmap/"+stateName, rollout.ResumeAnnotation+"=first")
	harness.Eventually(t, 120*time.Second, "the resume request handled", func(context.Context) (bool, string) {
		st := rolloutState(t, c, stateNS)
		return st.Resumed == "first", fmt.Sprintf("resumed %q", st.Resumed)
	})
	harness.Eventually(t, 60*time.Second, "a "+names.ReasonRolloutResumed+" Event on p2", func(context.Context) (bool, string) {
		out := kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=p2,reason="+names.ReasonRolloutResumed, "-o", "name")
		return strings.TrimSpace(out) != "", "none"
	})
	harness.Eventually(t, 180*time.Second, "the rollout halted again by p2", func(context.Context) (bool, string) {
		st := rolloutState(t, c, stateNS)
		m := st.Members[ns+"/p2"]
		return st.Halted != "" && m.Phase == rollout.PhaseFailed && !m.Since.Time.Before(resumedAt),
			fmt.Sprintf("halted %q, p2 %s since %s", st.Halted, m.Phase, m.Since)
	})
	for _, name := range fleet[3:] {
		if got := chartVersion(t, c, ns, name); got != "" {
			t.Errorf("%s: chart version %q after the resumed rollout halted again, want the old chart", name, got)
		}
	}
	resumes := kubectl(t, "get", "events", "-n", ns, "--field-selector", "reason="+names.ReasonRolloutResumed,
		"-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
	if strings.Contains(resumes, `"tenant"`) || !strings.Contains(resumes, `"first"`) {
		t.Errorf("the resumes handled, by their Events: %q; want the administrator's alone", resumes)
	}
	op.Stop(t)

	// Chart 3, the fix: the rollout starts again from the canaries. The operator is killed once
	// the canaries are through, and resumes.
	writeChart(t, chart, "3", `/healthz`)
	op = start()
	var atKill rollout.State
	harness.Eventually(t, 180*time.Second, "the fixed chart's canaries through", func(context.Context) (bool, string) {
		atKill = rolloutState(t, c, stateNS)
		return atKill.Wave >= 1 && atKill.Halted == "", fmt.Sprintf("wave %d, halted %q", atKill.Wave, atKill.Halted)
	})
	op.Kill()
	start()
	for _, name := range fleet {
		harness.Eventually(t, 180*time.Second, name+" on chart 3 and Ready", func(ctx context.Context) (bool, string) {
			v := chartVersion(t, c, ns, name)
			mp, err := harness.GetMyProxy(ctx, c, ns, name)
			if err != nil {
				return false, err.Error()
			}
			ready, _, _ := harness.Condition(mp, names.ConditionReady)
			held, _, _ := harness.Condition(mp, names.ConditionRolloutHeld)
			return v == "3" && ready == "True" && held == "", fmt.Sprintf("chart %q, Ready %q, RolloutHeld %q", v, ready, held)
		})
	}
	st = rolloutState(t, c, stateNS)
	if st.Halted != "" || len(st.Members) != len(fleet) {
		t.Errorf("stored state at the end: %+v, want every release a member, not halted", st)
	}
	// The restart lost nothing: every release admitted before the kill kept its wave.
	for k, m := range atKill.Members {
		if st.Members[k].Wave != m.Wave {
			t.Errorf("%s: wave %d before the kill, %d at the end", k, m.Wave, st.Members[k].Wave)
		}
	}
	// No release upgraded twice: one revision per chart it went through, besides an upgrade the
	// SIGKILL interrupted (left pending, then marked failed by the restarted operator, which
	// upgrades again; Helm may mark it superseded after that upgrade).
	for _, name := range fleet {
		want := 2 // chart 1, chart 3
		if name == "p1" || name == "p2" || name == "p3" {
			want = 3 // and chart 2
		}
		var secrets corev1.SecretList
		if err := c.List(ctx, &secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": name}); err != nil {
			t.Fatal(err)
		}
		completed := 0
		for _, s := range secrets.Items {
			description, err := fixture.ReleaseDescription(&s)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(description, actionclient.UnlockedDescription) {
				t.Logf("%s: revision %s was interrupted: %s", name, s.Labels["version"], description)
				continue
			}
			completed++
		}
		if completed != want {
			t.Errorf("%s: %d revisions ran to their end, want %d", name, completed, want)
		}
	}
}

// writeChart sets the chart's version annotation on every Pod and its readiness probe's path
// (a template expression).
func writeChart(t *testing.T, chart, version, probePath string) {
	t.Helper()
	path := filepath.Join(chart, "templates", "deployment.yaml")
	orig := filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy", "templates", "deployment.yaml")
	raw, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(raw), "      annotations:\n", "      annotations:\n        rollout.example.com/chart: \""+version+"\"\n", 1)
	s = strings.Replace(s, "          readinessProbe:\n            httpGet: {path: /healthz, port: http}",
		"          readinessProbe:\n            httpGet: {path: "+probePath+", port: http}", 1)
	if strings.Count(s, "rollout.example.com/chart") != 1 || !strings.Contains(s, "path: "+probePath) {
		t.Fatal("the chart's Deployment template changed: the test's edits no longer apply")
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// chartVersion is the chart version annotation of a MyProxy's Deployment's Pods.
func chartVersion(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	var d appsv1.Deployment
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Annotations["rollout.example.com/chart"]
}

func rolloutState(t *testing.T, c client.Client, ns string) rollout.State {
	t.Helper()
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: ns, Name: rollout.StoreName(harness.MyProxyGVK, "")}
	if err := c.Get(context.Background(), key, &cm); err != nil {
		return rollout.State{Wave: -1}
	}
	var st rollout.State
	if err := json.Unmarshal([]byte(cm.Data["state.json"]), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// previewReport runs the preview (hack/preview) of chart over the releases of ns, and returns
// what it says with -o json.
func previewReport(t *testing.T, watches, ns, chart string) (rep struct {
	Releases []struct {
		Name, Outcome string
		Objects       []struct{ Diff string }
	}
}) {
	t.Helper()
	bin, err := harness.Build(t.TempDir(), "preview", "./hack/preview")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--watches-file="+watches, "--chart-dir="+chart, "--diff", "-o", "json")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "WATCH_NAMESPACE="+ns)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("preview -o json: %v\n%s", err, out)
	}
	return rep
}

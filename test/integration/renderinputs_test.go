package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/test/harness"
)

// probeTemplate reads the cluster as charts do: a lookup whose kind is a variable (no literal
// `lookup "` in the text), and a test for an API version.
const probeTemplate = `{{- $kind := "ConfigMap" }}
{{- $settings := lookup "v1" $kind .Release.Namespace "shared-settings" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "myproxy.fullname" . }}-probe
  labels:
    {{- include "myproxy.labels" . | nindent 4 }}
data:
  greeting: {{ dig "data" "greeting" "none" $settings | quote }}
  widgets: {{ .Capabilities.APIVersions.Has "widgets.example.com/v1" | quote }}
`

// probingChart is the repository chart plus probeTemplate.
func probingChart(t *testing.T) string {
	t.Helper()
	chart := filepath.Join(t.TempDir(), "myproxy")
	harness.Run(t, nil, "cp", "-r", filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"), chart)
	if err := os.WriteFile(filepath.Join(chart, "templates", "probe.yaml"), []byte(probeTemplate), 0o600); err != nil {
		t.Fatal(err)
	}
	return chart
}

// metric sums the samples of a metric whose labels contain every one of match.
func metric(ctx context.Context, addr, name string, match ...string) (float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(line, m)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, sc.Err()
}

// checks counts the reconciler's upgrade checks that rendered (dry runs not answered by a digest).
func checks(t *testing.T, addr string) float64 {
	t.Helper()
	var n float64
	harness.Eventually(t, timeout, "metrics of "+addr, func(ctx context.Context) (bool, string) {
		var err error
		n, err = metric(ctx, addr, "myproxy_operator_helm_action_duration_seconds_count", `action="check"`)
		return err == nil, fmt.Sprint(err)
	})
	return n
}

func latestRevision(ctx context.Context, c client.Client, ns, name string) (int, error) {
	secrets, err := releaseSecrets(ctx, c, ns, name)
	latest := 0
	for _, s := range secrets {
		if v, _ := strconv.Atoi(s.Labels["version"]); v > latest {
			latest = v
		}
	}
	return latest, err
}

func waitProbe(t *testing.T, c client.Client, ns, name, key, want string) {
	t.Helper()
	harness.Eventually(t, timeout, fmt.Sprintf("%s/%s-probe %s=%s", ns, name, key, want), func(ctx context.Context) (bool, string) {
		var cm corev1.ConfigMap
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name + "-probe"}, &cm); err != nil {
			return false, err.Error()
		}
		return cm.Data[key] == want, fmt.Sprintf("data %v", cm.Data)
	})
}

func setGreeting(t *testing.T, c client.Client, ns, greeting string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared-settings"}}
	err := c.Get(context.Background(), client.ObjectKeyFromObject(cm), cm)
	cm.Data = map[string]string{"greeting": greeting}
	if err == nil {
		err = c.Update(context.Background(), cm)
	} else {
		err = c.Create(context.Background(), cm)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// What a rendering reads of the cluster is part of its digest: a change to a looked-up object
// re-renders the releases that read it and no other, a new API reaches the charts that test for
// it without a restart, and at rest nothing renders.
func TestLookupsAndCapabilitiesReachOnlyTheReleasesThatReadThem(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	readerNS, otherNS, plainNS := newNamespace(t, c, nil), newNamespace(t, c, nil), newNamespace(t, c, nil)
	probing, plain := harness.FreeAddr(t), harness.FreeAddr(t)
	watches := harness.WriteWatches(t, harness.Watch{Chart: probingChart(t)})
	startProbing := func() *harness.Operator {
		return harness.StartOperator(t, operatorBin, kubeconfig,
			[]string{"--watches-file=" + watches, "--metrics-bind-address=" + probing}, "WATCH_NAMESPACE="+readerNS+","+otherNS)
	}
	op := startProbing()
	harness.StartOperator(t, operatorBin, kubeconfig, []string{"--watches-file=" + harness.WriteWatches(t, harness.Watch{}),
		"--metrics-bind-address=" + plain}, "WATCH_NAMESPACE="+plainNS)

	setGreeting(t, c, readerNS, "hello")
	for _, mp := range []struct{ ns, name string }{{readerNS, "reader"}, {otherNS, "other"}, {plainNS, "plain"}} {
		if err := c.Create(ctx, harness.MyProxy(mp.ns, mp.name, map[string]any{})); err != nil {
			t.Fatal(err)
		}
		harness.WaitForCondition(t, c, mp.ns, mp.name, "Deployed", "True", timeout)
		harness.WaitForSettled(t, c, mp.ns, mp.name, 2*time.Second, timeout)
	}
	waitProbe(t, c, readerNS, "reader", "greeting", "hello")
	waitProbe(t, c, otherNS, "other", "greeting", "none")

	// At rest a lookup chart renders nothing.
	before := checks(t, probing)
	harness.Consistently(t, 3*time.Second, "no rendering at rest", func(context.Context) (bool, string) {
		n := checks(t, probing)
		return n == before, fmt.Sprintf("checks went from %v to %v", before, n)
	})

	// The looked-up ConfigMap changes: its reader upgrades; the release in the other namespace,
	// which looked up another (absent) ConfigMap, does not.
	otherRev, _ := latestRevision(ctx, c, otherNS, "other")
	readerRev, _ := latestRevision(ctx, c, readerNS, "reader")
	setGreeting(t, c, readerNS, "hi")
	waitProbe(t, c, readerNS, "reader", "greeting", "hi")
	if rev, _ := latestRevision(ctx, c, readerNS, "reader"); rev != readerRev+1 {
		t.Errorf("reader: revision %d after the looked-up ConfigMap changed, want %d", rev, readerRev+1)
	}
	if rev, _ := latestRevision(ctx, c, otherNS, "other"); rev != otherRev {
		t.Errorf("other: revision %d, want %d: a release that did not read the ConfigMap was upgraded", rev, otherRev)
	}

	// A CRD installed now: the probing chart sees widgets.example.com/v1 without a restart; the
	// operator whose chart reads no capabilities sees the change and renders nothing.
	plainReconciles := func() float64 {
		n, err := metric(ctx, plain, "controller_runtime_reconcile_total", `controller="myproxy-controller"`)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	plainBefore := plainReconciles()
	if plainBefore == 0 {
		t.Fatal("the plain operator's reconciles are not counted: the metric's name or labels changed")
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "widgets.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					XPreserveUnknownFields: ptrTo(true)}}}},
		},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), crd) })
	waitProbe(t, c, readerNS, "reader", "widgets", "true")
	waitProbe(t, c, otherNS, "other", "widgets", "true")
	harness.Eventually(t, timeout, "the plain operator saw the API change", func(ctx context.Context) (bool, string) {
		n, err := metric(ctx, plain, "myproxy_operator_api_changes_total")
		return err == nil && n > 0, fmt.Sprintf("api changes %v, %v", n, err)
	})
	if after := plainReconciles(); after != plainBefore {
		t.Errorf("the plain chart's MyProxy was reconciled %v times after the API changed; its chart reads no capabilities", after-plainBefore)
	}

	// A restart knows nothing of what was looked up: each lookup release renders once, and is
	// not upgraded; then a change is followed again.
	op.Stop(t)
	readerRev, _ = latestRevision(ctx, c, readerNS, "reader")
	startProbing()
	harness.Eventually(t, timeout, "one check per lookup release after the restart", func(context.Context) (bool, string) {
		n := checks(t, probing)
		return n >= 2, fmt.Sprintf("checks %v", n)
	})
	harness.WaitForSettled(t, c, readerNS, "reader", 2*time.Second, timeout)
	if rev, _ := latestRevision(ctx, c, readerNS, "reader"); rev != readerRev {
		t.Errorf("reader: revision %d after a restart, want %d", rev, readerRev)
	}
	setGreeting(t, c, readerNS, "welcome back")
	waitProbe(t, c, readerNS, "reader", "greeting", "welcome back")
}

func ptrTo[T any](v T) *T { return &v }

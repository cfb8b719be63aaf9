package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/test/certs"
	"github.com/example/myproxy-operator/test/fixture"
	"github.com/example/myproxy-operator/test/harness"
)

// Passes the schema, but the apiserver refuses the Deployment: a node affinity needs a term.
const (
	badAffinityValue = fixture.BadAffinityValue
	badAffinity      = `{"affinity":` + badAffinityValue + `}`
)

// A missing TLS Secret is named in a condition and an Event; creating it recovers at once.
func TestMissingTLSSecretRecoversWhenCreated(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	spec := map[string]any{"tls": map[string]any{"secretName": "edge-cert"}}
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", spec)); err != nil {
		t.Fatal(err)
	}
	mp := harness.WaitForCondition(t, c, ns, "edge", "Irreconcilable", "True", timeout)
	if _, _, msg := harness.Condition(mp, "Irreconcilable"); !strings.Contains(msg, `spec.tls.secretName: Secret "edge-cert" not found`) {
		t.Errorf("Irreconcilable message %q does not name the field and Secret", msg)
	}
	harness.WaitForEvent(t, c, ns, "edge", "InvalidSpec", timeout)
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "edge"}, &appsv1.Deployment{}); err == nil {
		t.Error("a release was installed without its TLS Secret")
	}

	// Let the backoff grow (its ninth retry is seconds away), then create the Secret: the watch on
	// Secrets retries at once.
	harness.Eventually(t, timeout, "nine failed attempts", func(context.Context) (bool, string) {
		n := eventCount(t, c, ns, "edge", "InvalidSpec")
		return n >= 9, fmt.Sprintf("%d attempts", n)
	})
	created := time.Now()
	pair := certs.Valid(t, "edge")
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-cert", Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": pair.Cert, "tls.key": pair.Key},
	}); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", 10*time.Second)
	t.Logf("deployed %s after the Secret appeared", time.Since(created).Round(time.Millisecond))
	harness.WaitForCondition(t, c, ns, "edge", "Irreconcilable", "False", timeout)
}

// An install the apiserver refuses leaves no release behind, says why, and a fixed spec installs.
func TestInstallErrorThenFix(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	// A deployed release first: its reconcile starts the watches on the chart's kinds, which
	// also see the objects a failing install creates and rolls back.
	if err := c.Create(ctx, harness.MyProxy(ns, "healthy", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "healthy", "Deployed", "True", timeout)
	var spec map[string]any
	if err := json.Unmarshal([]byte(badAffinity), &spec); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, harness.MyProxy(ns, "broken", spec)); err != nil {
		t.Fatal(err)
	}
	got := harness.WaitForCondition(t, c, ns, "broken", "ReleaseFailed", "True", timeout)
	if _, reason, msg := harness.Condition(got, "ReleaseFailed"); reason != "InstallError" || !strings.Contains(msg, "nodeSelectorTerms") {
		t.Errorf("ReleaseFailed %s: %q, want InstallError naming nodeSelectorTerms", reason, msg)
	}
	harness.WaitForEvent(t, c, ns, "broken", "InstallFailed", timeout)
	// Retries back off exponentially (5 ms doubling): the 11th attempt comes at least 5 s after
	// the first. Events of the attempts' own objects (release records, rolled-back Services)
	// must not re-trigger them, or the retries run back to back (11 within a second).
	first := time.Now()
	harness.Eventually(t, timeout, "11 install attempts", func(context.Context) (bool, string) {
		n := eventCount(t, c, ns, "broken", "InstallFailed")
		return n >= 11, fmt.Sprintf("%d attempts", n)
	})
	if took := time.Since(first); took < 4*time.Second {
		t.Errorf("11 install attempts within %s: retries do not back off", took.Round(time.Millisecond))
	} else {
		t.Logf("11 install attempts in %s", took.Round(time.Millisecond))
	}
	// Each attempt writes a pending revision and removes it on rollback: none lingers.
	harness.Eventually(t, timeout, "no release revision left by failed installs", func(ctx context.Context) (bool, string) {
		secrets, err := releaseSecrets(ctx, c, ns, "broken")
		return err == nil && len(secrets) == 0, fmt.Sprintf("%d revisions (err %v)", len(secrets), err)
	})

	patchSpec(t, c, ns, "broken", `{"affinity":null}`)
	harness.WaitForCondition(t, c, ns, "broken", "Deployed", "True", timeout)
	harness.WaitForCondition(t, c, ns, "broken", "ReleaseFailed", "False", timeout)
}

// Upgrades that keep failing never grow the release history past its maximum, the condition
// says why, and fixing the spec recovers at once.
func TestFailingUpgradeKeepsHistoryBounded(t *testing.T) {
	const maxHistory = 3
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperatorWith(t, fmt.Sprintf("--max-release-history=%d", maxHistory))
	ns := newNamespace(t, c, nil)
	if err := c.Create(ctx, harness.MyProxy(ns, "edge", map[string]any{})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "edge", "Deployed", "True", timeout)
	// Successful upgrades past the maximum are pruned too.
	for replicas := 2; replicas <= 6; replicas++ {
		patchSpec(t, c, ns, "edge", fmt.Sprintf(`{"replicas":%d}`, replicas))
		want := int32(replicas)
		waitDeployment(t, c, ns, "edge", "upgraded", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == want })
	}

	patchSpec(t, c, ns, "edge", badAffinity)
	harness.WaitForCondition(t, c, ns, "edge", "Irreconcilable", "True", timeout)
	harness.Consistently(t, 15*time.Second, "release history bounded while failing", func(ctx context.Context) (bool, string) {
		secrets, err := releaseSecrets(ctx, c, ns, "edge")
		return err == nil && len(secrets) <= maxHistory, fmt.Sprintf("%d revisions stored (err %v)", len(secrets), err)
	})
	mp, err := harness.GetMyProxy(ctx, c, ns, "edge")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, msg := harness.Condition(mp, "Irreconcilable"); !strings.Contains(msg, "nodeSelectorTerms") {
		t.Errorf("Irreconcilable message %q does not say what is wrong", msg)
	}

	fixed := time.Now()
	patchSpec(t, c, ns, "edge", `{"affinity":null,"replicas":2}`)
	waitDeployment(t, c, ns, "edge", "upgraded after the fix", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 2 })
	harness.WaitForCondition(t, c, ns, "edge", "Irreconcilable", "False", timeout)
	t.Logf("recovered %s after the fix", time.Since(fixed).Round(time.Millisecond))
	if secrets, _ := releaseSecrets(ctx, c, ns, "edge"); len(secrets) > maxHistory {
		t.Errorf("%d revisions stored, max %d", len(secrets), maxHistory)
	}
}

// eventCount adds up the count of the (aggregated) Events with the reason about an object.
func eventCount(t *testing.T, c client.Client, ns, name, reason string) int32 {
	t.Helper()
	var list corev1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			n += max(e.Count, 1)
		}
	}
	return n
}

// helmFailures scrapes the operator's metrics at addr for the failures of an action.
var helmFailures = fixture.HelmFailures

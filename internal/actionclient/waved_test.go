package actionclient

import (
	"context"
	"errors"
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// gateCalls records what a reconcile asks and tells a gate.
type gateCalls struct {
	hold               bool
	asked              []bool // specChanged of each Hold
	upToDate, upgraded int
	lastUpgradeErr     error
}

func (g *gateCalls) Hold(_ client.Object, specChanged bool) bool {
	g.asked = append(g.asked, specChanged)
	return g.hold
}
func (g *gateCalls) UpToDate(client.Object) { g.upToDate++ }
func (g *gateCalls) Upgraded(_ client.Object, err error) {
	g.upgraded++
	g.lastUpgradeErr = err
}

func wavedOver(t *testing.T, fake *recordingClient, gate WaveGate) helmclient.ActionInterface {
	t.Helper()
	getter := New(getterOf(fake), Options{Waves: gate, Recorder: record.NewFakeRecorder(100)})
	ac, err := getter.ActionClientFor(context.Background(), crOwnedBy(""))
	if err != nil {
		t.Fatal(err)
	}
	return ac
}

func TestAHeldCheckIsAnsweredWithTheDeployedRelease(t *testing.T) {
	deployed := &release.Release{Name: "p", Version: 1, Manifest: "deployed", Config: map[string]any{"replicas": float64(2)},
		Info: &release.Info{Status: release.StatusDeployed}}
	gate := &gateCalls{hold: true}
	fake := &recordingClient{rel: deployed, dryRunManifest: "new chart"}
	ac := wavedOver(t, fake, gate)
	if _, err := ac.Get("p"); err != nil {
		t.Fatal(err)
	}
	rel, err := ac.Upgrade("p", "ns", nil, map[string]any{"replicas": int64(2)}, dryRun)
	if err != nil || rel != deployed {
		t.Fatalf("held check answered %v, %v; want the deployed release", rel, err)
	}
	if len(gate.asked) != 1 || gate.asked[0] {
		t.Errorf("Hold asked %v, want once with specChanged=false (values equal as JSON)", gate.asked)
	}
	// The reconciler upgrades a failed release whatever the check says: still held.
	if _, err := ac.Upgrade("p", "ns", nil, map[string]any{"replicas": int64(2)}); !errors.Is(err, ErrHeld) || fake.upgrades != 0 {
		t.Errorf("a held upgrade ran (err %v, %d upgrades)", err, fake.upgrades)
	}
	if _, err := ac.Upgrade("p", "ns", nil, map[string]any{"replicas": int64(3)}, dryRun); err != nil || !gate.asked[1] {
		t.Errorf("a change of values was not reported as a spec change (err %v)", err)
	}

	// A failed release whose check renders the deployed manifest is retried, not held.
	fake.dryRunManifest = "deployed"
	if _, err := ac.Get("p"); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Upgrade("p", "ns", nil, map[string]any{"replicas": int64(2)}, dryRun); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Upgrade("p", "ns", nil, map[string]any{"replicas": int64(2)}); err != nil || fake.upgrades != 1 {
		t.Errorf("the retry of a failed release was held (err %v, %d upgrades)", err, fake.upgrades)
	}
	fake.dryRunManifest = "new chart"
	fake.rel = deployed

	gate.hold = false
	if _, err := ac.Get("p"); err != nil {
		t.Fatal(err)
	}
	rel, _ = ac.Upgrade("p", "ns", nil, map[string]any{"replicas": int64(2)}, dryRun)
	if rel == deployed {
		t.Error("an admitted check was answered with the deployed release")
	}
	if _, err := ac.Upgrade("p", "ns", nil, map[string]any{"replicas": int64(2)}); err != nil || gate.upgraded != 2 || gate.lastUpgradeErr != nil {
		t.Errorf("admitted upgrade: err %v, Upgraded told %d times", err, gate.upgraded)
	}

	fake.dryRunManifest = "upgraded" // what the release now is
	if _, err := ac.Get("p"); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Upgrade("p", "ns", nil, map[string]any{"replicas": int64(2)}, dryRun); err != nil || gate.upToDate != 2 {
		t.Errorf("a check that renders the deployed manifest: err %v, UpToDate told %d times, want twice", err, gate.upToDate)
	}
}

// An install decides its resource for the gate: the first wave waits for every resource of the
// fleet to be decided, and one installed since the start may not be reconciled again.
func TestAnInstallTellsTheGateItIsUpToDate(t *testing.T) {
	gate := &gateCalls{}
	ac := wavedOver(t, &recordingClient{}, gate)
	if _, err := ac.Install("p", "ns", nil, nil); err != nil {
		t.Fatal(err)
	}
	if gate.upToDate != 1 || len(gate.asked) != 0 || gate.upgraded != 0 {
		t.Errorf("after an install the gate was told: UpToDate %d, Hold %d, Upgraded %d; want UpToDate once only",
			gate.upToDate, len(gate.asked), gate.upgraded)
	}
}

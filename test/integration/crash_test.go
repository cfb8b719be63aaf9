package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/example/myproxy-operator/test/harness"
)

func releaseKey(name string, version int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, version)
}

// A process killed mid-action leaves its release pending-install or pending-upgrade; an install
// that failed and whose uninstall then failed too (an apiserver that timed out) leaves it
// uninstalling, part of its objects deleted. Helm then refuses every action on it but an
// uninstall. These are forged here exactly as Helm's storage holds them. Without leader election
// another process may be acting on them, so the operator leaves them and says why; as the Lease
// holder it unlocks them and brings the three MyProxies back to Deployed with no manual step.
func TestPendingReleasesLeftByACrashAreRecovered(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	secrets := driver.NewSecrets(kubernetes.NewForConfigOrDie(cfg).CoreV1().Secrets(ns))
	truth := env.Record(t, ns)

	op := startOperator(t, harness.Watch{})
	for _, name := range []string{"upgrading", "cleaning"} {
		if err := c.Create(ctx, harness.MyProxy(ns, name, map[string]any{})); err != nil {
			t.Fatal(err)
		}
		harness.WaitForCondition(t, c, ns, name, "Deployed", "True", timeout)
	}
	op.Stop(t)

	// The uninstall of a failed install, interrupted after it deleted the Deployment.
	cleaning, err := secrets.Get(releaseKey("cleaning", 1))
	if err != nil {
		t.Fatal(err)
	}
	cleaning.Info.Status = release.StatusUninstalling
	if err := secrets.Update(releaseKey("cleaning", 1), cleaning); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cleaning"}}); err != nil {
		t.Fatal(err)
	}

	// Killed while upgrading: revision 2 is pending-upgrade.
	deployed, err := secrets.Get(releaseKey("upgrading", 1))
	if err != nil {
		t.Fatal(err)
	}
	upgrading := *deployed
	info := *deployed.Info
	upgrading.Info, upgrading.Version = &info, 2
	upgrading.Info.Status = release.StatusPendingUpgrade
	if err := secrets.Create(releaseKey("upgrading", 2), &upgrading); err != nil {
		t.Fatal(err)
	}
	// Killed while installing: revision 1 is pending-install, its manifest what Helm rendered.
	manifest := harness.Run(t, nil, harness.Tool(t, "HELM", "helm"), "template", "installing",
		filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"), "--namespace", ns)
	installing := release.Release{Name: "installing", Namespace: ns, Version: 1, Chart: deployed.Chart,
		Config: map[string]any{}, Manifest: manifest,
		Info: &release.Info{Status: release.StatusPendingInstall, FirstDeployed: info.FirstDeployed, LastDeployed: info.LastDeployed}}
	if err := secrets.Create(releaseKey("installing", 1), &installing); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, harness.MyProxy(ns, "installing", map[string]any{})); err != nil {
		t.Fatal(err)
	}

	unelected := startOperator(t, harness.Watch{})
	for name, status := range map[string]string{"installing": "pending-install", "cleaning": "uninstalling"} {
		mp := harness.WaitForCondition(t, c, ns, name, "Irreconcilable", "True", timeout)
		if _, _, msg := harness.Condition(mp, "Irreconcilable"); !strings.Contains(msg, "is "+status+" and is left so: leader election is off") {
			t.Errorf("Irreconcilable message %q does not say why the %s release is left", msg, status)
		}
	}
	unelected.Stop(t)

	startOperatorWith(t, leaderElectionArgs(ns, "crash-test")...)
	for _, name := range []string{"upgrading", "installing", "cleaning"} {
		harness.Eventually(t, timeout, "release "+name+" deployed again", func(context.Context) (bool, string) {
			history, err := secrets.Query(map[string]string{"name": name, "owner": "helm"})
			if err != nil {
				return false, err.Error()
			}
			latest := history[0]
			for _, r := range history {
				if r.Info.Status.IsPending() || r.Info.Status == release.StatusUninstalling {
					return false, fmt.Sprintf("revision %d is still %s", r.Version, r.Info.Status)
				}
				if r.Version > latest.Version {
					latest = r
				}
			}
			return latest.Info.Status == release.StatusDeployed,
				fmt.Sprintf("latest revision %d is %s", latest.Version, latest.Info.Status)
		})
		harness.WaitForCondition(t, c, ns, name, "Deployed", "True", timeout)
		harness.WaitForCondition(t, c, ns, name, "Irreconcilable", "False", timeout)
		if ev := harness.WaitForEvent(t, c, ns, name, "ReleaseUnlocked", timeout); !strings.Contains(ev, "this replica holds the leader Lease") {
			t.Errorf("ReleaseUnlocked Event %q does not say why unlocking was safe", ev)
		}
	}
	waitDeploymentExists(t, ns, "installing")
	waitDeploymentExists(t, ns, "cleaning")
	// The chaos test counts unlocked releases this way: from the records, not the Events.
	if n := truth.UnlockedReleases(); n != 3 {
		t.Errorf("%d records seen going from pending or uninstalling to failed by unlocking, want 3", n)
	}
}

func waitDeploymentExists(t *testing.T, ns, name string) {
	t.Helper()
	c := harness.NewClient(t, cfg)
	waitDeployment(t, c, ns, name, "created by the recovered release", func(*appsv1.Deployment) bool { return true })
}

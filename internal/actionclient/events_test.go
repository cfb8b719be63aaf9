package actionclient

import (
	"errors"
	"strings"
	"testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	"github.com/example/myproxy-operator/internal/names"
)

func TestEventsPerAction(t *testing.T) {
	chrt := &chart.Chart{Metadata: &chart.Metadata{Name: "myproxy", Version: "0.1.0"}}
	rel := &release.Release{Name: "p", Version: 2}
	boom := errors.New("boom")
	cases := []struct {
		name    string
		outcome Outcome
		want    string // "" means no Event
	}{
		{name: "install", outcome: Outcome{Action: ActionInstall, Result: rel, Chart: chrt},
			want: "Normal Installed installed release p revision 2 (chart myproxy-0.1.0)"},
		{name: "install fails", outcome: Outcome{Action: ActionInstall, Chart: chrt, Err: boom},
			want: "Warning InstallFailed install of chart myproxy-0.1.0 failed: boom"},
		{name: "upgrade", outcome: Outcome{Action: ActionUpgrade, Result: rel, Chart: chrt},
			want: "Normal Upgraded upgraded release p to revision 2 (chart myproxy-0.1.0)"},
		{name: "upgrade fails", outcome: Outcome{Action: ActionUpgrade, Chart: chrt, Err: boom},
			want: "Warning UpgradeFailed upgrade to chart myproxy-0.1.0 failed: boom"},
		{name: "a check is silent", outcome: Outcome{Action: ActionCheck, Result: rel, Chart: chrt}},
		{name: "a check fails", outcome: Outcome{Action: ActionCheck, Chart: chrt, Err: boom},
			want: "Warning ReleaseCheckFailed cannot render chart myproxy-0.1.0 for the current spec: boom"},
		{name: "uninstall", outcome: Outcome{Action: ActionUninstall, Release: "p", Result: rel},
			want: "Normal Uninstalled uninstalled release p"},
		{name: "uninstall of nothing is silent", outcome: Outcome{Action: ActionUninstall, Release: "p", Err: driver.ErrReleaseNotFound}},
		{name: "uninstall fails", outcome: Outcome{Action: ActionUninstall, Release: "p", Err: boom},
			want: "Warning UninstallFailed uninstall of release p failed: boom"},
		{name: "uninstall waits for the objects", outcome: Outcome{Action: ActionUninstall, Release: "p",
			Err: &WaitingForDeletionError{Release: "p", Remaining: []string{"ConfigMap c"}}},
			want: "Normal UninstallWaiting " + (&WaitingForDeletionError{Release: "p", Remaining: []string{"ConfigMap c"}}).Error()},
		{name: "get of missing release is silent", outcome: Outcome{Action: ActionGet, Release: "p", Err: driver.ErrReleaseNotFound}},
		{name: "get fails", outcome: Outcome{Action: ActionGet, Release: "p", Err: boom},
			want: "Warning ReleaseLookupFailed cannot read Helm release p: boom"},
		{name: "drift correction fails", outcome: Outcome{Action: ActionReconcile, Release: "p", Result: &release.Release{Name: "p", Version: 3}, Err: boom},
			want: "Warning DriftCorrectionFailed cannot restore the objects of release p revision 3: boom"},
		{name: "a client that cannot be made", outcome: Outcome{Action: ActionClient, Err: errors.New("no mapping")},
			want: "Warning ActionClientFailed cannot create a Helm client: no mapping"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recorder := record.NewFakeRecorder(10)
			c.outcome.Object = &unstructured.Unstructured{}
			recordEvent(recorder, c.outcome)
			var got string
			select {
			case got = <-recorder.Events:
			default:
			}
			if got != c.want {
				t.Errorf("event %q, want %q", got, c.want)
			}
		})
	}
}

func TestAnnotationFallsBackWhenAbsent(t *testing.T) {
	u := &unstructured.Unstructured{}
	if !annotation(u, names.RollbackForce, true) {
		t.Error("rollback-force: want true by default")
	}
	u.SetAnnotations(map[string]string{names.RollbackForce: "false"})
	if annotation(u, names.RollbackForce, true) {
		t.Error("rollback-force: want false when set so")
	}
}

func TestInEffectListsTheAnnotationsOfTheAction(t *testing.T) {
	obj := &unstructured.Unstructured{}
	obj.SetAnnotations(map[string]string{names.UpgradeForce: "true", names.InstallDescription: "first", names.RollbackForce: "false", "other": "x"})
	if got := strings.Join(inEffect(obj, names.ForUpgrade), " "); got != names.RollbackForce+"=false "+names.UpgradeForce+"=true" {
		t.Errorf("upgrade: %q", got)
	}
	if got := strings.Join(inEffect(obj, names.ForInstall), " "); got != names.InstallDescription+"=first" {
		t.Errorf("install: %q", got)
	}
	if got := inEffect(obj, names.ForUninstall); len(got) != 0 {
		t.Errorf("uninstall: %q", got)
	}
}

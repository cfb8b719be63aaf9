package actionclient

import (
	"context"
	"errors"
	"strings"
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// stubActions answers every Helm action with the configured error (pure unit test of the wrapper).
type stubActions struct {
	helmclient.ActionInterface
	err error
}

func (s stubActions) rel(name string) *release.Release {
	return &release.Release{Name: name, Version: 2}
}

func (s stubActions) Get(name string, _ ...helmclient.GetOption) (*release.Release, error) {
	return s.rel(name), s.err
}
func (s stubActions) Install(name, _ string, _ *chart.Chart, _ map[string]any, _ ...helmclient.InstallOption) (*release.Release, error) {
	return s.rel(name), s.err
}
func (s stubActions) Upgrade(name, _ string, _ *chart.Chart, _ map[string]any, _ ...helmclient.UpgradeOption) (*release.Release, error) {
	return s.rel(name), s.err
}
func (s stubActions) Uninstall(name string, _ ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	return &release.UninstallReleaseResponse{Release: s.rel(name)}, s.err
}
func (s stubActions) Reconcile(*release.Release) error { return s.err }

func dryRun(u *action.Upgrade) error { u.DryRun = true; return nil }

func TestEventsPerAction(t *testing.T) {
	chrt := &chart.Chart{Metadata: &chart.Metadata{Name: "myproxy", Version: "0.1.0"}}
	boom := errors.New("boom")
	cases := []struct {
		name string
		err  error
		call func(helmclient.ActionInterface) error
		want string // "" means no Event
	}{
		{name: "install", err: nil, call: func(c helmclient.ActionInterface) error { _, err := c.Install("p", "ns", chrt, nil); return err },
			want: "Normal Installed installed release p revision 2 (chart myproxy-0.1.0)"},
		{name: "install fails", err: boom, call: func(c helmclient.ActionInterface) error { _, err := c.Install("p", "ns", chrt, nil); return err },
			want: "Warning InstallFailed install of chart myproxy-0.1.0 failed: boom"},
		{name: "upgrade", err: nil, call: func(c helmclient.ActionInterface) error { _, err := c.Upgrade("p", "ns", chrt, nil); return err },
			want: "Normal Upgraded upgraded release p to revision 2 (chart myproxy-0.1.0)"},
		{name: "upgrade fails", err: boom, call: func(c helmclient.ActionInterface) error { _, err := c.Upgrade("p", "ns", chrt, nil); return err },
			want: "Warning UpgradeFailed upgrade to chart myproxy-0.1.0 failed: boom"},
		{name: "dry run is silent", err: nil, call: func(c helmclient.ActionInterface) error {
			_, err := c.Upgrade("p", "ns", chrt, nil, dryRun)
			return err
		},
			want: ""},
		{name: "dry run fails", err: boom, call: func(c helmclient.ActionInterface) error {
			_, err := c.Upgrade("p", "ns", chrt, nil, dryRun)
			return err
		},
			want: "Warning ReleaseCheckFailed cannot render chart myproxy-0.1.0 for the current spec: boom"},
		{name: "uninstall", err: nil, call: func(c helmclient.ActionInterface) error { _, err := c.Uninstall("p"); return err },
			want: "Normal Uninstalled uninstalled release p"},
		{name: "uninstall of nothing is silent", err: driver.ErrReleaseNotFound, call: func(c helmclient.ActionInterface) error { _, err := c.Uninstall("p"); return err },
			want: ""},
		{name: "uninstall fails", err: boom, call: func(c helmclient.ActionInterface) error { _, err := c.Uninstall("p"); return err },
			want: "Warning UninstallFailed uninstall of release p failed: boom"},
		{name: "get of missing release is silent", err: driver.ErrReleaseNotFound, call: func(c helmclient.ActionInterface) error { _, err := c.Get("p"); return err },
			want: ""},
		{name: "get fails", err: boom, call: func(c helmclient.ActionInterface) error { _, err := c.Get("p"); return err },
			want: "Warning ReleaseLookupFailed cannot read Helm release p: boom"},
		{name: "drift correction fails", err: boom, call: func(c helmclient.ActionInterface) error { return c.Reconcile(&release.Release{Name: "p", Version: 3}) },
			want: "Warning DriftCorrectionFailed cannot restore the objects of release p revision 3: boom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			recorder := record.NewFakeRecorder(10)
			getter := Observed(helmclient.ActionClientGetterFunc(func(context.Context, client.Object) (helmclient.ActionInterface, error) {
				return stubActions{err: c.err}, nil
			}), Events{Recorder: recorder})
			ac, err := getter.ActionClientFor(context.Background(), &unstructured.Unstructured{})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.call(ac); !errors.Is(err, c.err) {
				t.Fatalf("error %v was not passed through (want %v)", err, c.err)
			}
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

func TestActionClientFailureIsAnEvent(t *testing.T) {
	recorder := record.NewFakeRecorder(1)
	getter := Observed(helmclient.ActionClientGetterFunc(func(context.Context, client.Object) (helmclient.ActionInterface, error) {
		return nil, errors.New("no mapping")
	}), Events{Recorder: recorder})
	if _, err := getter.ActionClientFor(context.Background(), &unstructured.Unstructured{}); err == nil {
		t.Fatal("want the error of the wrapped getter")
	}
	if got := <-recorder.Events; !strings.HasPrefix(got, "Warning ActionClientFailed cannot create a Helm client: no mapping") {
		t.Errorf("event %q", got)
	}
}

package actionclient

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func rel(name string, status common.Status) *release.Release {
	return &release.Release{Name: name, Version: 1, Info: &release.Info{Status: status}}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "x", nil)
	for _, o := range []Outcome{
		{Action: ActionInstall, Release: "a", Result: rel("a", common.StatusDeployed)},
		{Action: ActionInstall, Release: "b", Result: rel("b", common.StatusDeployed)},
		{Action: ActionUpgrade, Release: "b", Result: rel("b", common.StatusFailed), Err: fmt.Errorf("upgrade: %w", invalid)},
		{Action: ActionCheck, Release: "a", Result: rel("a", common.StatusPendingUpgrade)}, // a simulation: no state change
		{Action: ActionGet, Release: "c", Err: driver.ErrReleaseNotFound},                  // not a failure
		{Action: ActionInstall, Release: "c", Result: rel("c", common.StatusDeployed)},
		{Action: ActionUninstall, Release: "c", Result: rel("c", common.StatusUninstalled)},
	} {
		obj := &unstructured.Unstructured{}
		obj.SetNamespace("team")
		obj.SetName(o.Release)
		o.Object, o.Duration = obj, 10*time.Millisecond
		m.Observe(o)
	}
	want := `
# HELP myproxy_operator_releases Helm releases the operator manages, by Helm status.
# TYPE myproxy_operator_releases gauge
myproxy_operator_releases{state="deployed"} 1
myproxy_operator_releases{state="failed"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "myproxy_operator_releases"); err != nil {
		t.Error(err)
	}
	wantFailures := `
# HELP myproxy_operator_helm_action_failures_total Failed Helm reads and steps by action and reason.
# TYPE myproxy_operator_helm_action_failures_total counter
myproxy_operator_helm_action_failures_total{action="upgrade",reason="Invalid"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantFailures), "myproxy_operator_helm_action_failures_total"); err != nil {
		t.Error(err)
	}
	// install/success, upgrade/failure, check/success, get/success (a missing release is no
	// failure) and uninstall/success.
	if n := testutil.CollectAndCount(m.duration); n != 5 {
		t.Errorf("%d duration series, want 5", n)
	}
}

func TestFailureReason(t *testing.T) {
	cases := map[string]error{
		"Conflict":            apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "x", errors.New("changed")),
		"OperationInProgress": errors.New("another operation (install/upgrade/rollback) is in progress"),
		"RenderError":         errors.New(`template: myproxy/templates/deployment.yaml:3: function "x" not defined`),
		"Invalid":             errors.New(`1 error occurred: Deployment.apps "p" is invalid: spec`),
		"Unknown":             errors.New("something else"),
	}
	for want, err := range cases {
		if got := FailureReason(err); got != want {
			t.Errorf("FailureReason(%q) = %s, want %s", err, got, want)
		}
	}
}

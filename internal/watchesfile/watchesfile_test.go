package watchesfile

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func chartDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "helm-charts", "myproxy")
}

func write(t *testing.T, extra string) string {
	t.Helper()
	content := "- group: gateway.example.com\n  version: v1alpha1\n  kind: MyProxy\n  chart: " + chartDir() + "\n" + extra
	path := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name    string
		extra   string
		dryRun  string
		reach   string // the Reach it gets, printed with %v
		account string // the ServiceAccountName it gets
		wantErr string
	}{
		{name: "plain"},
		{name: "dry run on the client", extra: "  dryRunOption: client\n", dryRun: DryRunClient},
		{name: "dry run on the server", extra: "  dryRunOption: server\n", dryRun: DryRunServer},
		{name: "a real upgrade is no check", extra: "  dryRunOption: none\n", wantErr: "dryRunOption none is not supported"},
		{name: "misspelt key", extra: "  reconcileperiod: 1m\n", wantErr: `unknown key(s) reconcileperiod`},
		{name: "every known key", extra: "  watchDependentResources: false\n  overrideValues: {a: b}\n  reconcilePeriod: 1m\n" +
			"  maxConcurrentReconciles: 2\n  selector: {matchLabels: {a: b}}\n"},
		{name: "reach", extra: "  reach: {clusterScoped: [ClusterRole.rbac.authorization.k8s.io, Namespace], namespaces: [monitoring]}\n",
			reach: "{[ClusterRole.rbac.authorization.k8s.io Namespace] [monitoring]}"},
		{name: "reach, misspelt", extra: "  reach: {namespace: [monitoring]}\n", wantErr: `unknown field "namespace"`},
		{name: "reach, wildcard namespace", extra: "  reach: {namespaces: ['*']}\n", wantErr: "wildcards are not allowed"},
		{name: "reach, wildcard kind", extra: "  reach: {clusterScoped: ['*.rbac.authorization.k8s.io']}\n", wantErr: "wildcards are not allowed"},
		{name: "service account", extra: "  serviceAccountName: myproxy-deployer\n", account: "myproxy-deployer"},
		{name: "service account, not a name", extra: "  serviceAccountName: 'system:serviceaccount:team:x'\n", wantErr: "is not a ServiceAccount name"},
		{name: "service account, not a string", extra: "  serviceAccountName: {name: x}\n", wantErr: "is not a ServiceAccount name"},
		{name: "reach, resource not kind", extra: "  reach: {clusterScoped: [rbac.authorization.k8s.io/clusterroles]}\n", wantErr: "is not a Kind.group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, err := Load(write(t, tc.extra))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(ws) != 1 || ws[0].DryRunOption != tc.dryRun || ws[0].Chart == nil {
				t.Errorf("got %+v, want one entry with its chart and dryRunOption %q", ws, tc.dryRun)
			}
			if ws[0].ServiceAccountName != tc.account {
				t.Errorf("serviceAccountName %q, want %q", ws[0].ServiceAccountName, tc.account)
			}
			if got := fmt.Sprint(ws[0].Reach); tc.reach != "" && got != tc.reach {
				t.Errorf("reach %s, want %s", got, tc.reach)
			}
		})
	}
}

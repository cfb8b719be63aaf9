package integration

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/helmconfig"
	"github.com/example/myproxy-operator/test/fixture"
	"github.com/example/myproxy-operator/test/harness"
)

// previousRelease is the last commit of this operator on Helm 3 (client-side apply, records
// without an apply method): what the releases of its users were written by.
const previousRelease = "36389d4"

// buildPrevious builds the operator of previousRelease from its commit.
func buildPrevious(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	harness.Run(t, nil, "bash", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", harness.RepoRoot(), previousRelease, dir))
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "myproxy-operator"), "./cmd")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the operator of %s: %v\n%s", previousRelease, err, out)
	}
	return filepath.Join(dir, "myproxy-operator")
}

// revisionRecord is what a release record says of its revision.
type revisionRecord struct {
	Version     int    `json:"version"`
	ApplyMethod string `json:"apply_method"`
	Info        struct {
		Status string `json:"status"`
	} `json:"info"`
}

// lastRecord decodes the record of the last revision of release name.
func lastRecord(t *testing.T, c client.Client, ns, name string) revisionRecord {
	t.Helper()
	var last revisionRecord
	for _, s := range releaseRecords(context.Background(), t, c, ns, name) {
		gz, err := base64.StdEncoding.DecodeString(string(s.Data["release"]))
		if err != nil {
			t.Fatal(err)
		}
		r, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		var rec revisionRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Version > last.Version {
			last = rec
		}
	}
	return last
}

// appliedBy reports whether the operator applied the Deployment server-side: its managed fields
// name the operator with operation Apply.
func appliedBy(d *appsv1.Deployment) bool {
	return slices.ContainsFunc(d.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == helmconfig.FieldManager && m.Operation == "Apply"
	})
}

// Releases move between the operator on Helm 3 and this one on Helm 4, both ways, with their
// history: what Helm 3 installed (the previous operator, or the helm CLI) is upgraded by Helm 4
// and stays client-side applied; what this operator installs is applied server-side, as the
// operator; the previous operator reads, upgrades and uninstalls what this one wrote, and this
// one reads back what it wrote after. Drift of a field the chart sets is set back whatever the
// apply method; a field it does not set stays with whoever set it.
func TestReleasesMoveBetweenHelm3AndHelm4(t *testing.T) {
	ctx := context.Background()
	previous := buildPrevious(t)
	c := harness.NewClient(t, cfg)
	ns := newNamespace(t, c, nil)
	run := func(bin string) *harness.Operator {
		return harness.StartOperator(t, bin, kubeconfig, []string{"--watches-file=" + harness.WriteWatches(t, harness.Watch{})},
			"WATCH_NAMESPACE="+ns)
	}
	deployment := func(name string) *appsv1.Deployment {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	replicas := func(name string, n int32, what string) {
		fixture.WaitDeployment(t, c, ns, name, what, func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == n })
	}
	// revision waits until the last revision of release name is deployed and newer than after,
	// checks its apply method, and returns its number.
	revision := func(name string, after int, method string) int {
		t.Helper()
		var rec revisionRecord
		harness.Eventually(t, timeout, fmt.Sprintf("%s past revision %d", name, after), func(context.Context) (bool, string) {
			rec = lastRecord(t, c, ns, name)
			return rec.Version > after && rec.Info.Status == "deployed", fmt.Sprintf("%+v", rec)
		})
		if rec.ApplyMethod != method {
			t.Errorf("%s revision %d: apply method %q, want %q", name, rec.Version, rec.ApplyMethod, method)
		}
		return rec.Version
	}
	t.Log("the previous operator installs a release")
	op := run(previous)
	if err := c.Create(ctx, harness.MyProxy(ns, "old", map[string]any{"replicas": 1})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "old", "Deployed", "True", timeout)
	old := revision("old", 0, "")
	op.Stop(t)

	t.Log("the helm CLI (Helm 3) installs another")
	harness.Run(t, nil, harness.Tool(t, "HELM", "helm"), "install", "cli", filepath.Join(harness.RepoRoot(), "helm-charts", "myproxy"),
		"--namespace", ns, "--kubeconfig", kubeconfig, "--set", "replicas=1")

	t.Log("this operator takes both over: upgraded, still client-side; a new one is applied server-side")
	op = run(operatorBin)
	if err := c.Create(ctx, harness.MyProxy(ns, "cli", map[string]any{"replicas": 1})); err != nil {
		t.Fatal(err)
	}
	revision("cli", 1, "csa") // the CLI's manifest has no managed label nor owner: upgraded
	patchSpec(t, c, ns, "old", `{"replicas": 2}`)
	replicas("old", 2, "old upgraded by Helm 4")
	old = revision("old", old, "csa")
	if err := c.Create(ctx, harness.MyProxy(ns, "new", map[string]any{"replicas": 1})); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "new", "Deployed", "True", timeout)
	newer := revision("new", 0, "ssa")
	if !appliedBy(deployment("new")) || appliedBy(deployment("old")) {
		t.Errorf("managed fields: new %v, old %v; want Apply by %s for the new release only",
			deployment("new").ManagedFields, deployment("old").ManagedFields, helmconfig.FieldManager)
	}
	for _, name := range []string{"old", "new"} {
		want := *deployment(name).Spec.Replicas
		d := deployment(name)
		d.Spec.Replicas = ptr.To(want + 3)
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations["example.com/set-by-hand"] = "stays"
		if err := c.Update(ctx, d); err != nil {
			t.Fatal(err)
		}
		replicas(name, want, name+": a hand edit of a field the chart sets is set back")
		if got := deployment(name).Annotations["example.com/set-by-hand"]; got != "stays" {
			t.Errorf("%s: a field the chart does not set was taken: %q", name, got)
		}
	}
	op.Stop(t)

	t.Log("the previous operator reads, upgrades and uninstalls what Helm 4 wrote")
	op = run(previous)
	patchSpec(t, c, ns, "old", `{"replicas": 3}`)
	patchSpec(t, c, ns, "new", `{"replicas": 3}`)
	replicas("old", 3, "old upgraded by the previous operator")
	replicas("new", 3, "new upgraded by the previous operator")
	old = revision("old", old, "")
	revision("new", newer, "")
	mp := harness.MyProxy(ns, "new", nil)
	if err := c.Delete(ctx, mp); err != nil {
		t.Fatal(err)
	}
	harness.WaitForGone(t, c, mp, timeout)
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "new"}, &appsv1.Deployment{}); err == nil {
		t.Error("the previous operator's uninstall left the Deployment of a release Helm 4 installed")
	}
	op.Stop(t)

	t.Log("this operator reads back what the previous one wrote")
	op = run(operatorBin)
	patchSpec(t, c, ns, "old", `{"replicas": 1}`)
	replicas("old", 1, "old upgraded by Helm 4 again")
	revision("old", old, "csa")
	for _, name := range []string{"old", "cli"} {
		mp := harness.MyProxy(ns, name, nil)
		if err := c.Delete(ctx, mp); err != nil {
			t.Fatal(err)
		}
		harness.WaitForGone(t, c, mp, timeout)
		if n := len(releaseRecords(ctx, t, c, ns, name)); n != 0 {
			t.Errorf("%s: %d records left after its uninstall", name, n)
		}
	}
	op.Stop(t)
	var left corev1.ConfigMapList
	if err := c.List(ctx, &left, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range left.Items {
		if cm.Name != "kube-root-ca.crt" {
			t.Errorf("ConfigMap %s left after every release was uninstalled", cm.Name)
		}
	}
}

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/test/harness"
)

// The operator-sdk helm project of testdata/sdkproject: its kind, chart and watches file.
var nginxGVK = schema.GroupVersionKind{Group: "demo.example.com", Version: "v1alpha1", Kind: "Nginx"}

func sdkProject(t *testing.T, c client.Client) (watches string) {
	t.Helper()
	dir := filepath.Join(harness.RepoRoot(), "test", "integration", "testdata", "sdkproject")
	raw, err := os.ReadFile(filepath.Join(dir, "config", "crd", "demo.example.com_nginxes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	harness.Eventually(t, timeout, "the Nginx CRD served", func(ctx context.Context) (bool, string) {
		err := c.List(ctx, nginxList())
		return err == nil, fmt.Sprint(err)
	})
	w, err := os.ReadFile(filepath.Join(dir, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return harness.WriteTemp(t, "watches-*.yaml",
		[]byte(strings.ReplaceAll(string(w), "CHART", filepath.Join(dir, "helm-charts", "nginx"))))
}

func nginxList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(nginxGVK.GroupVersion().WithKind("NginxList"))
	return l
}

func nginxCR(ns, name string, annots map[string]string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(nginxGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetAnnotations(annots)
	return u
}

// startStockOperator runs the stock operator-sdk helm-operator on watches, watching ns.
func startStockOperator(t *testing.T, watches, ns string) *harness.Operator {
	t.Helper()
	return harness.StartProcess(t, harness.Tool(t, "HELM_OPERATOR", "helm-operator"), []string{"run", "--watches-file=" + watches,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--leader-elect=false"},
		"KUBECONFIG="+kubeconfig, "WATCH_NAMESPACE="+ns)
}

// subject is one operator running the sdk project in a namespace of its own.
type subject struct {
	name  string
	stock bool
	ns    string
	c     client.Client
	t     *testing.T
}

func (s subject) create(name string, annots map[string]string) {
	s.t.Helper()
	if err := s.c.Create(context.Background(), nginxCR(s.ns, name, annots, map[string]any{})); err != nil {
		s.t.Fatal(err)
	}
}

func (s subject) patch(name, mergePatch string) {
	s.t.Helper()
	if err := s.c.Patch(context.Background(), nginxCR(s.ns, name, nil, nil), client.RawPatch(types.MergePatchType, []byte(mergePatch))); err != nil {
		s.t.Fatal(err)
	}
}

func (s subject) configMap(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	return cm, s.c.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: name}, cm)
}

func (s subject) editConfigMap(name string, edit func(*corev1.ConfigMap)) {
	s.t.Helper()
	cm, err := s.configMap(context.Background(), name)
	if err != nil {
		s.t.Fatal(err)
	}
	edit(cm)
	if err := s.c.Update(context.Background(), cm); err != nil {
		s.t.Fatal(err)
	}
}

func (s subject) waitConfigMap(name, what string, ok func(*corev1.ConfigMap) bool) {
	s.t.Helper()
	harness.Eventually(s.t, timeout, s.name+": ConfigMap "+name+" "+what, func(ctx context.Context) (bool, string) {
		cm, err := s.configMap(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		return ok(cm), fmt.Sprintf("labels %v data %v deleting %v", cm.Labels, cm.Data, cm.DeletionTimestamp != nil)
	})
}

// revision is one entry of `helm history`.
type revision struct {
	Revision    int    `json:"revision"`
	Status      string `json:"status"`
	Description string `json:"description"`
}

func (s subject) history(release string) []revision {
	s.t.Helper()
	out, err := harness.RunErr([]string{"KUBECONFIG=" + kubeconfig}, harness.Tool(s.t, "HELM", "helm"),
		"history", release, "-n", s.ns, "-o", "json", "--max", "100")
	if err != nil {
		return nil // no release
	}
	var h []revision
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		s.t.Fatalf("helm history %s: %v\n%s", release, err, out)
	}
	return h
}

func (s subject) waitDeployed(name string) {
	s.t.Helper()
	harness.Eventually(s.t, timeout, s.name+": "+name+" deployed", func(context.Context) (bool, string) {
		h := s.history(name)
		return len(h) > 0 && h[len(h)-1].Status == "deployed", fmt.Sprintf("history %+v", h)
	})
}

func (s subject) condition(ctx context.Context, name, conditionType string) (status, message string) {
	u := nginxCR(s.ns, name, nil, nil)
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		return "", err.Error()
	}
	status, _, message = harness.Condition(u, conditionType)
	return status, message
}

func (s subject) exists(ctx context.Context, name string) bool {
	err := s.c.Get(ctx, client.ObjectKeyFromObject(nginxCR(s.ns, name, nil, nil)), nginxCR(s.ns, name, nil, nil))
	return !apierrors.IsNotFound(err)
}

// The annotations the stock helm-operator honours, run against it and this operator side by
// side on the same operator-sdk helm project (testdata/sdkproject): each scenario states what
// each does, and the outcomes are read from the cluster and the release history.
// minPeriod is this operator's --min-reconcile-period here: below the annotations' 2s.
const minPeriod = time.Second

func TestStockAnnotationsSideBySide(t *testing.T) {
	c := harness.NewClient(t, cfg)
	watches := sdkProject(t, c)
	subjects := []subject{{name: "this operator"}, {name: "stock helm-operator", stock: true}}
	for i := range subjects {
		s := &subjects[i]
		s.c, s.ns = c, newNamespace(t, c, nil)
		if s.stock {
			startStockOperator(t, watches, s.ns)
		} else {
			harness.StartOperator(t, operatorBin, kubeconfig, []string{"--watches-file=" + watches,
				"--min-reconcile-period=" + minPeriod.String()}, "WATCH_NAMESPACE="+s.ns)
		}
	}
	for _, s := range subjects {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.t = t
			paritySubject(t, s)
		})
	}
}

func paritySubject(t *testing.T, s subject) {
	const hold = "parity.example.com/hold"
	ctx := context.Background()
	s.create("hooks", nil)
	s.create("nohooks", map[string]string{names.InstallDisableHooks: "true"})
	s.create("described", map[string]string{names.InstallDescription: "installed by the parity test"})
	s.create("forced", map[string]string{names.UpgradeForce: "true"})
	s.create("patched", nil)
	s.create("rollback-forced", nil)
	s.create("rollback-unforced", map[string]string{names.RollbackForce: "false"})
	s.create("waiting", map[string]string{names.UninstallWait: "true", names.ReconcilePeriod: "2s"})
	s.create("not-waiting", nil)
	s.create("periodic", map[string]string{names.ReconcilePeriod: "2s"})
	s.create("steady", nil)
	s.create("paused", map[string]string{names.PauseReconcile: "true"})
	for _, name := range []string{"hooks", "nohooks", "described", "forced", "patched", "rollback-forced",
		"rollback-unforced", "waiting", "not-waiting", "periodic", "steady"} {
		s.waitDeployed(name)
	}

	t.Run("install-disable-hooks: the plugins' option; the stock operator ignores it", func(t *testing.T) {
		s.waitConfigMap("hooks-hook", "created by the post-install hook", func(*corev1.ConfigMap) bool { return true })
		_, err := s.configMap(ctx, "nohooks-hook")
		if ran := err == nil; ran != s.stock {
			t.Errorf("post-install hook ran: %v, want %v", ran, s.stock)
		}
	})

	t.Run("install-description: the plugins' option; the stock operator ignores it", func(t *testing.T) {
		want := "installed by the parity test"
		if s.stock {
			want = "Install complete"
		}
		if h := s.history("described"); h[0].Description != want {
			t.Errorf("revision 1 description %q, want %q", h[0].Description, want)
		}
	})

	t.Run("upgrade-force: both replace the objects, dropping what was added by hand", func(t *testing.T) {
		for _, name := range []string{"forced", "patched"} {
			s.editConfigMap(name+"-config", func(cm *corev1.ConfigMap) { cm.Labels["hand"] = "made" })
			s.patch(name, `{"spec":{"message":"bye"}}`)
		}
		for name, keep := range map[string]bool{"forced": false, "patched": true} {
			s.waitConfigMap(name+"-config", "upgraded", func(cm *corev1.ConfigMap) bool { return cm.Data["message"] == "bye" })
			cm, _ := s.configMap(ctx, name+"-config")
			if _, kept := cm.Labels["hand"]; kept != keep {
				t.Errorf("%s: the hand-made label kept: %v, want %v", name, kept, keep)
			}
		}
		if !s.stock {
			ev := harness.WaitForEvent(t, s.c, s.ns, "forced", "Upgraded", timeout)
			if !strings.Contains(ev, names.UpgradeForce+"=true") {
				t.Errorf("the Upgraded Event does not name the option: %q", ev)
			}
		}
	})

	// The stock operator's releases are client-side: rollback-force replaces their objects. This
	// operator's are server-side, and a forced rollback keeps them so, as Flux's does: it takes
	// back every field the chart sets and replaces nothing, so a field set by hand stays.
	t.Run("rollback-force: a failed upgrade rolls back with --force unless it is false; server-side, without replacing", func(t *testing.T) {
		for _, name := range []string{"rollback-forced", "rollback-unforced"} {
			s.editConfigMap(name+"-config", func(cm *corev1.ConfigMap) { cm.Labels["hand"] = "made" })
			s.patch(name, `{"spec":{"check":"not a valid label!"}}`)
		}
		for name, keep := range map[string]bool{"rollback-forced": !s.stock, "rollback-unforced": true} {
			harness.Eventually(t, timeout, name+": failed upgrade rolled back", func(context.Context) (bool, string) {
				h := s.history(name)
				return len(h) >= 3 && h[1].Status != "deployed" && strings.HasPrefix(h[2].Description, "Rollback to 1"),
					fmt.Sprintf("history %+v", h)
			})
			cm, _ := s.configMap(ctx, name+"-config")
			if _, kept := cm.Labels["hand"]; kept != keep {
				t.Errorf("%s: the hand-made label kept through the rollback: %v, want %v", name, kept, keep)
			}
			if rec := lastRecord(t, s.c, s.ns, name); !s.stock && rec.ApplyMethod != "ssa" {
				t.Errorf("%s: the rollback's revision %d records apply_method %q, want ssa", name, rec.Version, rec.ApplyMethod)
			}
		}
	})

	t.Run("reconcile-period: the annotation's period corrects drift; the watch's hour does not yet", func(t *testing.T) {
		for _, name := range []string{"periodic", "steady"} {
			s.editConfigMap(name+"-config", func(cm *corev1.ConfigMap) { cm.Data["message"] = "tampered" })
		}
		s.waitConfigMap("periodic-config", "restored by a periodic reconcile", func(cm *corev1.ConfigMap) bool {
			return cm.Data["message"] == "hello"
		})
		if cm, _ := s.configMap(ctx, "steady-config"); cm.Data["message"] != "tampered" {
			t.Errorf("steady: drift corrected without a period: %v", cm.Data)
		}
	})

	t.Run("uninstall-wait: the custom resource stays until the release's objects are gone", func(t *testing.T) {
		for _, name := range []string{"waiting", "not-waiting"} {
			s.editConfigMap(name+"-config", func(cm *corev1.ConfigMap) { cm.Finalizers = append(cm.Finalizers, hold) })
			if err := s.c.Delete(ctx, nginxCR(s.ns, name, nil, nil)); err != nil {
				t.Fatal(err)
			}
		}
		harness.Eventually(t, timeout, "not-waiting gone while its ConfigMap is held", func(ctx context.Context) (bool, string) {
			return !s.exists(ctx, "not-waiting"), "still there"
		})
		s.waitConfigMap("waiting-config", "deleted by the uninstall", func(cm *corev1.ConfigMap) bool { return cm.DeletionTimestamp != nil })
		if s.stock {
			harness.Eventually(t, timeout, "the stock operator says it waits", func(ctx context.Context) (bool, string) {
				_, msg := s.condition(ctx, "waiting", "Deployed")
				return strings.Contains(msg, "Waiting until all resources are deleted"), msg
			})
		} else {
			harness.WaitForEvent(t, s.c, s.ns, "waiting", "UninstallWaiting", timeout)
		}
		if !s.exists(ctx, "waiting") {
			t.Fatal("waiting: gone while an object of its release was still there")
		}
		for _, name := range []string{"waiting", "not-waiting"} {
			s.editConfigMap(name+"-config", func(cm *corev1.ConfigMap) { cm.Finalizers = nil })
		}
		harness.Eventually(t, timeout, "waiting gone once its objects are", func(ctx context.Context) (bool, string) {
			return !s.exists(ctx, "waiting"), "still there"
		})
		// This operator keeps the uninstalled record while it waits (its objects are read from
		// it); none is left once the custom resource is gone.
		if recs := releaseRecords(ctx, t, s.c, s.ns, "waiting"); len(recs) != 0 {
			t.Errorf("%d release records of waiting left", len(recs))
		}
	})

	t.Run("pause-reconcile: this operator's; the stock operator has none", func(t *testing.T) {
		if s.stock {
			s.waitDeployed("paused")
			return
		}
		harness.Eventually(t, timeout, "Paused=True", func(ctx context.Context) (bool, string) {
			st, msg := s.condition(ctx, "paused", "Paused")
			return st == "True", st + " " + msg
		})
		harness.WaitForEvent(t, s.c, s.ns, "paused", "ReconcilePaused", timeout)
		if h := s.history("paused"); len(h) != 0 {
			t.Fatalf("a paused custom resource was installed: %+v", h)
		}
		s.patch("paused", `{"metadata":{"annotations":{"`+names.PauseReconcile+`":null}}}`)
		s.waitDeployed("paused")
		harness.WaitForEvent(t, s.c, s.ns, "paused", "ReconcileResumed", timeout)

		// Paused after it was deployed: a spec change waits for the resume.
		s.patch("paused", `{"metadata":{"annotations":{"`+names.PauseReconcile+`":"true"}},"spec":{"message":"later"}}`)
		harness.Eventually(t, timeout, "Paused=True again", func(ctx context.Context) (bool, string) {
			st, msg := s.condition(ctx, "paused", "Paused")
			return st == "True", st + " " + msg
		})
		if cm, _ := s.configMap(ctx, "paused-config"); cm.Data["message"] != "hello" || len(s.history("paused")) != 1 {
			t.Errorf("a paused release changed: data %v, history %+v", cm.Data, s.history("paused"))
		}
		s.patch("paused", `{"metadata":{"annotations":{"`+names.PauseReconcile+`":"false"}}}`)
		s.waitConfigMap("paused-config", "upgraded on resume", func(cm *corev1.ConfigMap) bool { return cm.Data["message"] == "later" })
	})

	t.Run("a value that is not a boolean or a duration is named in a condition", func(t *testing.T) {
		if s.stock {
			return // the stock operator logs it and reads false, or fails the reconcile without a condition
		}
		s.create("invalid", map[string]string{names.ReconcilePeriod: "soon"})
		harness.Eventually(t, timeout, "Irreconcilable names the annotation", func(ctx context.Context) (bool, string) {
			st, msg := s.condition(ctx, "invalid", "Irreconcilable")
			return st == "True" && strings.Contains(msg, "metadata.annotations["+names.ReconcilePeriod+"]"), st + " " + msg
		})
		// A period below the operator's floor would keep a worker busy for everyone else.
		s.create("greedy", map[string]string{names.ReconcilePeriod: "1ns"})
		harness.Eventually(t, timeout, "Irreconcilable names the floor", func(ctx context.Context) (bool, string) {
			st, msg := s.condition(ctx, "greedy", "Irreconcilable")
			return st == "True" && strings.Contains(msg, "shorter than the operator's --min-reconcile-period "+minPeriod.String()), st + " " + msg
		})
	})
}

package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// MyProxyGVK is the kind under test, as the project's watches.yaml names it.
var MyProxyGVK = watchedKind("MyProxy")

// watchedKind returns the group, version and kind of the watches.yaml entry for kind.
func watchedKind(kind string) schema.GroupVersionKind {
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "watches.yaml"))
	if err != nil {
		panic(err)
	}
	var entries []struct{ Group, Version, Kind string }
	if err := yaml.Unmarshal(raw, &entries); err != nil {
		panic(fmt.Errorf("watches.yaml: %w", err))
	}
	for _, e := range entries {
		if e.Kind == kind {
			return schema.GroupVersionKind{Group: e.Group, Version: e.Version, Kind: e.Kind}
		}
	}
	panic(fmt.Sprintf("watches.yaml has no entry for %s", kind))
}

// NewClient returns an uncached client for the cluster of cfg.
func NewClient(t testing.TB, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ConfigFromKubeconfig loads a rest config from a kubeconfig file.
func ConfigFromKubeconfig(t testing.TB, path string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg
}

// Namespace creates a namespace named after the test with the given labels.
func Namespace(t testing.TB, c client.Client, labels map[string]string) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.TrimRight(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return name
}

// MyProxy builds a MyProxy object.
func MyProxy(namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(MyProxyGVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// GetMyProxy reads a MyProxy.
func GetMyProxy(ctx context.Context, c client.Client, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(MyProxyGVK)
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
	return u, err
}

// Condition returns the status, reason and message of a status condition ("" if absent).
func Condition(u *unstructured.Unstructured, conditionType string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == conditionType {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return s, r, msg
		}
	}
	return "", "", ""
}

// WaitForCondition waits until the MyProxy has the condition with the given status.
func WaitForCondition(t testing.TB, c client.Client, namespace, name, conditionType, status string, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	Eventually(t, timeout, fmt.Sprintf("MyProxy %s/%s condition %s=%s", namespace, name, conditionType, status),
		func(ctx context.Context) (bool, string) {
			u, err := GetMyProxy(ctx, c, namespace, name)
			if err != nil {
				return false, err.Error()
			}
			last = u
			s, r, m := Condition(u, conditionType)
			return s == status, fmt.Sprintf("status=%q reason=%q message=%q", s, r, m)
		})
	return last
}

// WaitForGone waits until the object no longer exists.
func WaitForGone(t testing.TB, c client.Client, obj client.Object, timeout time.Duration) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	Eventually(t, timeout, fmt.Sprintf("%T %s gone", obj, key), func(ctx context.Context) (bool, string) {
		err := c.Get(ctx, key, obj)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("still there (err=%v)", err)
	})
}

// Events returns the reasons and messages of the Events about an object, oldest first.
func Events(ctx context.Context, c client.Client, namespace, name string) ([]string, error) {
	var list corev1.EventList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out, nil
}

// WaitForEvent waits until an Event with the reason is recorded about the object.
func WaitForEvent(t testing.TB, c client.Client, namespace, name, reason string, timeout time.Duration) string {
	t.Helper()
	var found string
	Eventually(t, timeout, fmt.Sprintf("Event %s on %s/%s", reason, namespace, name), func(ctx context.Context) (bool, string) {
		events, err := Events(ctx, c, namespace, name)
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events {
			if strings.HasPrefix(e, reason+": ") {
				found = e
				return true, ""
			}
		}
		return false, fmt.Sprintf("events so far: %v", events)
	})
	return found
}

// WaitForSettled waits until the MyProxy's resourceVersion has not changed for quiet: the
// operator has stopped writing it (finalizer, status), so no reconcile is pending for it.
func WaitForSettled(t testing.TB, c client.Client, namespace, name string, quiet, timeout time.Duration) {
	t.Helper()
	var lastRV string
	lastChange := time.Now()
	Eventually(t, timeout, fmt.Sprintf("MyProxy %s/%s settled for %s", namespace, name, quiet), func(ctx context.Context) (bool, string) {
		u, err := GetMyProxy(ctx, c, namespace, name)
		if err != nil {
			return false, err.Error()
		}
		if rv := u.GetResourceVersion(); rv != lastRV {
			lastRV, lastChange = rv, time.Now()
		}
		return time.Since(lastChange) >= quiet, "resourceVersion " + lastRV + " changed recently"
	})
}

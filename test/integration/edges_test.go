package integration

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/test/harness"
)

// The longest name the API accepts, with unicode in its values and the longest body the schema
// allows, installs and serves exactly those values.
func TestLongestNameAndUnicodeValuesInstall(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	name := "e" + strings.Repeat("x", 51) + "9" // 53 characters: the limit of a Helm release name
	body := "héllo wörld – 你好 – 🚀\n" + strings.Repeat("ü", 4096-len([]rune("héllo wörld – 你好 – 🚀\n")))
	spec := map[string]any{
		"defaultResponse": map[string]any{"status": int64(200), "body": body},
		"podAnnotations":  map[string]any{"note": "Ωmega ✓"},
	}
	if err := c.Create(ctx, harness.MyProxy(ns, name, spec)); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, name, "Deployed", "True", timeout)

	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cm := range cms.Items {
		for _, v := range cm.Data {
			if strings.Contains(v, "你好 – 🚀") && strings.Contains(v, strings.Repeat("ü", 100)) {
				found = true
			}
		}
	}
	if !found {
		t.Error("no ConfigMap of the release carries the unicode body")
	}
}

// A value far beyond what a release can store (its record is a Secret, at most 1 MiB) is
// refused with a reason, at apply or in a condition, and never leaves a stuck release: removing
// it installs.
func TestHugeValueIsRefusedClearlyAndFixable(t *testing.T) {
	ctx := context.Background()
	c := harness.NewClient(t, cfg)
	startOperator(t, harness.Watch{})
	ns := newNamespace(t, c, nil)
	random := make([]byte, 600<<10)
	_, _ = rand.Read(random)
	spec := map[string]any{"podAnnotations": map[string]any{"blob": base64.StdEncoding.EncodeToString(random)}} // 800 KiB
	err := c.Create(ctx, harness.MyProxy(ns, "huge", spec))
	if err != nil {
		// Refused by the apiserver: the reason must be given.
		if !strings.Contains(strings.ToLower(err.Error()), "too") {
			t.Fatalf("refused without a reason: %v", err)
		}
		t.Logf("refused at apply: %v", err)
		return
	}
	mp := harness.WaitForCondition(t, c, ns, "huge", "ReleaseFailed", "True", timeout)
	_, reason, msg := harness.Condition(mp, "ReleaseFailed")
	if !strings.Contains(strings.ToLower(msg), "too long") && !strings.Contains(strings.ToLower(msg), "too large") {
		t.Errorf("ReleaseFailed (%s) does not say the value is too big: %.300s", reason, msg)
	}
	t.Logf("refused in a condition: %s: %.200s", reason, msg)

	// Fix the spec: the release installs, nothing is left pending.
	var cur unstructured.Unstructured
	cur.SetGroupVersionKind(mp.GroupVersionKind())
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "huge"}, &cur); err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(cur.Object, "spec", "podAnnotations")
	if err := c.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	harness.WaitForCondition(t, c, ns, "huge", "Deployed", "True", timeout)
}

package eventfilter

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

type recordingHandler struct{ adds, updates, deletes int }

func (h *recordingHandler) OnAdd(any, bool)   { h.adds++ }
func (h *recordingHandler) OnUpdate(any, any) { h.updates++ }
func (h *recordingHandler) OnDelete(any)      { h.deletes++ }

func TestUpdateFilter(t *testing.T) {
	rec := &recordingHandler{}
	var h toolscache.ResourceEventHandler = filteredHandler{rec, Filter{Update: func(old, new any) bool { return old != new }}}
	h.OnAdd("a", false)
	h.OnUpdate("same", "same")
	h.OnUpdate("old", "new")
	h.OnDelete("a")
	if rec.adds != 1 || rec.updates != 1 || rec.deletes != 1 {
		t.Errorf("adds=%d updates=%d deletes=%d, want 1 each (one update filtered out)", rec.adds, rec.updates, rec.deletes)
	}
}

func TestIgnoreLabelled(t *testing.T) {
	release := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.p.v1", Labels: map[string]string{"owner": "helm"}}}
	tls := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cert"}}
	rec := &recordingHandler{}
	var h toolscache.ResourceEventHandler = filteredHandler{rec, IgnoreLabelled("owner", "helm")}
	h.OnAdd(release, false)
	h.OnUpdate(release, release)
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/x", Obj: release})
	if rec.adds+rec.updates+rec.deletes != 0 {
		t.Fatalf("events of a labelled object passed: %+v", rec)
	}
	h.OnAdd(tls, false)
	h.OnUpdate(tls, tls)
	h.OnDelete(tls)
	if rec.adds != 1 || rec.updates != 1 || rec.deletes != 1 {
		t.Errorf("events of an unlabelled object were dropped: %+v", rec)
	}
}

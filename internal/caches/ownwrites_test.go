package caches

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestDeletesAreConsumedAndExpire(t *testing.T) {
	now := time.Unix(1000, 0)
	r := NewOwnWrites()
	r.now = func() time.Time { return now }
	cm := OwnKey{GroupKind: schema.GroupKind{Kind: "ConfigMap"}, NamespacedName: types.NamespacedName{Namespace: "n", Name: "a"}}
	if r.OwnDelete(cm) {
		t.Fatal("an object never deleted is not an own delete")
	}
	r.Deleting(cm)
	if first, second := r.OwnDelete(cm), r.OwnDelete(cm); !first || !second {
		t.Error("own delete not recognised (by every handler that asks)")
	}
	r.Deleting(cm)
	now = now.Add(2 * ttl)
	r.Deleting(OwnKey{GroupKind: schema.GroupKind{Kind: "Service"}, NamespacedName: cm.NamespacedName})
	if r.OwnDelete(cm) || r.Len() != 1 {
		t.Errorf("an entry whose event never came must expire (len %d)", r.Len())
	}
}

func TestWrites(t *testing.T) {
	r := NewOwnWrites()
	rec := types.NamespacedName{Namespace: "n", Name: "sh.helm.release.v1.a.v1"}
	r.Writing(rec)
	if !r.OwnWrite(rec, "10") {
		t.Error("an event arriving before the write's answer is the write's")
	}
	r.Wrote(rec, "10")
	r.Writing(rec)
	r.Wrote(rec, "12")
	r.Writing(rec)
	r.Wrote(rec, "") // failed
	if !r.OwnWrite(rec, "10") || !r.OwnWrite(rec, "12") || r.OwnWrite(rec, "11") {
		t.Error("exactly the resourceVersions written are own, the earlier ones too (their events come later)")
	}
}

func TestEmptyAgain(t *testing.T) {
	r := NewOwnWrites()
	rec := types.NamespacedName{Namespace: "n", Name: "r"}
	r.Writing(rec)
	r.Wrote(rec, "")
	if r.Len() != 0 || r.OwnWrite(rec, "1") {
		t.Errorf("a failed write leaves %d entries", r.Len())
	}
}

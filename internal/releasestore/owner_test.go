package releasestore

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestAResourceSeesOnlyItsOwnRecords(t *testing.T) {
	ctx := context.Background()
	store := &apiserver{objs: map[string]*corev1.Secret{}}
	record := func(name, ownerUID string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team",
			Labels: map[string]string{"owner": "helm", "name": "web"}}}
		if ownerUID != "" {
			yes := true
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "web.example.com/v1", Kind: "StaticSite", Name: "web",
				UID: types.UID("uid-" + ownerUID), Controller: &yes}}
		}
		return s
	}
	store.bump(record("sh.helm.release.v1.web.v1", "site"))
	store.bump(record("sh.helm.release.v1.handmade.v1", ""))

	proxy := OwnedBy(store, "uid-proxy")
	if _, err := proxy.Get(ctx, "sh.helm.release.v1.web.v1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("another resource's record: Get error %v, want not found", err)
	}
	if _, err := proxy.Get(ctx, "sh.helm.release.v1.handmade.v1", metav1.GetOptions{}); err != nil {
		t.Errorf("a record of no owner must stay visible: %v", err)
	}
	l, err := proxy.List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "sh.helm.release.v1.handmade.v1" {
		t.Errorf("List = %v, %v; want only the record of no owner", l, err)
	}
	_, err = proxy.Create(ctx, record("sh.helm.release.v1.web.v1", "proxy"), metav1.CreateOptions{})
	var taken *NameTakenError
	if !errors.As(err, &taken) || !strings.Contains(err.Error(), `taken in namespace "team" by StaticSite "web"`) {
		t.Errorf("Create over another resource's record: %v", err)
	}

	site := OwnedBy(store, "uid-site")
	if _, err := site.Get(ctx, "sh.helm.release.v1.web.v1", metav1.GetOptions{}); err != nil {
		t.Errorf("the owner must see its record: %v", err)
	}
}

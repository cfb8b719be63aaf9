package controller

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/helmconfig"
)

// apiServiceGVK: every API group-version the apiserver serves has an APIService, built-in ones,
// aggregated ones, and those of CRDs (the apiserver registers one per CRD version).
var apiServiceGVK = schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}

// apiSettle is how long the watch waits after an APIService event before it learns the API
// again: a CRD install brings several events (created, then available).
const apiSettle = time.Second

// apiChanges counts the changes of the cluster's API the watch saw, per kind; registered once
// per process (the operator builds a new manager when it campaigns again).
var apiChanges = sync.OnceValue(func() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "myproxy_operator_api_changes_total",
		Help: "Changes of the cluster's API versions or Kubernetes version seen, by custom resource kind.",
	}, []string{"kind"})
	crmetrics.Registry.MustRegister(c)
	return c
})

// capabilityReader is one kind: what learns its chart's capabilities, and what its chart's
// renderings read of them.
type capabilityReader struct {
	gvk       schema.GroupVersionKind
	configs   *helmconfig.Configs
	use       actionclient.CapabilityUse
	overrides []byte // the watch's overrideValues, encoded: values a `tpl` may render
}

// reads reports whether the rendering for a custom resource reads the cluster's capabilities.
func (k capabilityReader) reads(cr *unstructured.Unstructured) bool {
	spec, _ := json.Marshal(cr.Object["spec"])
	r := k.use.Reads(append(spec, k.overrides...))
	return r.KubeVersion || r.APIVersions
}

// apiWatch brings a change of the cluster's API (a CRD installed or removed, an aggregated API
// added) to the charts that test for it, without a restart: on an APIService event it has each
// kind learn the capabilities again, and when they changed, queues every custom resource of the
// kinds whose chart reads them. Their digests then differ and they render again; custom
// resources of other kinds are not even queued.
type apiWatch struct {
	cache  cache.Cache // metadata
	reader client.Reader
	queues *Queues
	kinds  []capabilityReader

	pending atomic.Bool // a refresh is scheduled
}

// Start implements manager.Runnable; it runs on the leader only.
func (a *apiWatch) Start(ctx context.Context) error {
	// Every kind's series exists from the start, at 0: a dashboard or an alert reading the
	// counter then sees "no change" rather than no data.
	for _, k := range a.kinds {
		apiChanges().WithLabelValues(k.gvk.Kind).Add(0)
	}
	changed := func(any) {
		if a.pending.CompareAndSwap(false, true) {
			time.AfterFunc(apiSettle, func() {
				a.pending.Store(false)
				a.refresh(ctx)
			})
		}
	}
	return runInformer(ctx, a.cache, apiServiceGVK, toolscache.ResourceEventHandlerFuncs{
		AddFunc: changed, UpdateFunc: func(_, o any) { changed(o) }, DeleteFunc: changed,
	})
}

// runInformer has h handle the events of the metadata of gvk's objects in c until ctx ends.
func runInformer(ctx context.Context, c cache.Cache, gvk schema.GroupVersionKind, h toolscache.ResourceEventHandler) error {
	inf, err := c.GetInformer(ctx, metadataOf(gvk))
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(h); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// metadataOf is an empty object of gvk, as a metadata cache holds it.
func metadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}}
}

func (a *apiWatch) refresh(ctx context.Context) {
	log := logf.FromContext(ctx).WithName("api-watch")
	for _, k := range a.kinds {
		changed, err := k.configs.Refresh()
		if err != nil {
			log.Error(err, "cannot learn the cluster's API", "kind", k.gvk.Kind)
			continue
		}
		if !changed {
			continue
		}
		apiChanges().WithLabelValues(k.gvk.Kind).Inc()
		if !k.use.Any() {
			continue
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
		if err := a.reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			log.Error(err, "cannot list custom resources to render again", "kind", k.gvk.Kind)
			continue
		}
		queued := 0
		for i := range list.Items {
			if k.reads(&list.Items[i]) {
				a.queues.Add(k.gvk, client.ObjectKeyFromObject(&list.Items[i]))
				queued++
			}
		}
		log.Info("the cluster's API changed; rendering again the releases that read .Capabilities",
			"kind", k.gvk.Kind, "count", queued)
	}
}

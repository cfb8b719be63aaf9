package controller

import (
	"cmp"
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/actionclient"
	"github.com/example/myproxy-operator/internal/caches"
	"github.com/example/myproxy-operator/internal/options"
	"github.com/example/myproxy-operator/internal/rollout"
	"github.com/example/myproxy-operator/internal/status"
	"github.com/example/myproxy-operator/internal/watchesfile"
)

// waves is what every kind's rollout gate shares.
type waves struct {
	namespace string // of the rollout state ConfigMaps
	metrics   *rollout.Metrics
}

// RolloutNamespace is the namespace of the rollout state: --rollout-state-namespace, else the
// leader election namespace, else the operator's own in a cluster; "" where none is known.
func RolloutNamespace(o options.Options) string {
	return cmp.Or(o.RolloutNamespace, o.LeaderElectionNamespace, options.OwnNamespace())
}

// newGate creates the rollout gate of watch w and has the manager run it.
func newGate(mgr ctrl.Manager, w watchesfile.Watch, o options.Options, sh shared, selector metav1.LabelSelector,
	st *status.Reconciler, recorder record.EventRecorder) (*rollout.Gate, error) {
	gvk := w.GroupVersionKind
	watchSelector, err := metav1.LabelSelectorAsSelector(&selector)
	if err != nil {
		return nil, err
	}
	gate := rollout.NewGate()
	gate.Kind = w.Kind
	gate.Target = actionclient.ChartDigest(w.Chart)
	gate.Settings = w.Rollout.Merge(o.Rollout)
	store := rollout.Store{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Namespace: sh.waves.namespace,
		Name: rollout.StoreName(gvk, o.Shard.Name)}
	gate.Store = store
	gate.Metrics = sh.waves.metrics
	gate.Recorder = recorder
	gate.Fleet = func(ctx context.Context) ([]client.Object, error) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := mgr.GetCache().List(ctx, list, client.MatchingLabelsSelector{Selector: watchSelector}); err != nil {
			return nil, err
		}
		out := make([]client.Object, 0, len(list.Items))
		for i := range list.Items {
			if !o.Shard.ClaimedByOther(&list.Items[i]) {
				out = append(out, &list.Items[i])
			}
		}
		return out, nil
	}
	gate.Ready = func(ctx context.Context, key types.NamespacedName) (string, error) {
		return st.ReadyLive(ctx, mgr.GetAPIReader(), key)
	}
	gate.Wake = func(key types.NamespacedName) { sh.queues.Add(gvk, key) }
	gate.Nudge = st.Nudge
	if err := mgr.Add(gate); err != nil {
		return nil, err
	}
	state, err := caches.New(mgr, map[string]cache.Config{store.Namespace: {}}, caches.RolloutState(store.Name))
	if err != nil {
		return nil, err
	}
	return gate, mgr.Add(resumeWatch{cache: state, gate: gate})
}

// resumeWatch hands a gate the resume requests an administrator writes on its state ConfigMap
// (rollout.ResumeAnnotation).
type resumeWatch struct {
	cache cache.Cache
	gate  *rollout.Gate
}

// Start implements manager.Runnable; it runs on the leader only, with the gate.
func (r resumeWatch) Start(ctx context.Context) error {
	request := func(o any) {
		if m, ok := o.(*metav1.PartialObjectMetadata); ok {
			r.gate.RequestResume(m.Annotations[rollout.ResumeAnnotation])
		}
	}
	return runInformer(ctx, r.cache, corev1.SchemeGroupVersion.WithKind("ConfigMap"), toolscache.ResourceEventHandlerFuncs{
		AddFunc: request, UpdateFunc: func(_, o any) { request(o) },
	})
}

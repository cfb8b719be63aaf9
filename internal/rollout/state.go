package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Phase of a release admitted to a wave.
type Phase string

// The phases of a member, in order; failed ends any of the first two.
const (
	PhaseAdmitted Phase = "admitted" // may upgrade; not upgraded yet
	PhaseUpgraded Phase = "upgraded" // on the target chart; waiting to be Ready
	PhaseReady    Phase = "ready"
	PhaseFailed   Phase = "failed" // its upgrade failed, or it was not Ready within the timeout
)

// State is a rollout as it is stored: what it rolls to, the waves admitted so far and how
// their releases fared. Releases still held are not in it: a restarted operator learns them
// again from its first reconcile of each resource.
type State struct {
	// Target is the digest of the chart and rendering code the fleet is rolling to.
	Target string `json:"target"`
	// Wave is the last wave admitted; -1 before the first.
	Wave int `json:"wave"`
	// Members are the releases admitted, by namespace/name (types.NamespacedName.String).
	Members map[string]Member `json:"members,omitempty"`
	// Halted says why the rollout stopped; empty while it runs.
	Halted string `json:"halted,omitempty"`
	// Resumed is the last resume request handled (the value of ResumeAnnotation), so that a
	// request is acted on once, across restarts, and never taken for a new one by a later halt.
	Resumed string `json:"resumed,omitempty"`
}

// Member is one admitted release.
type Member struct {
	Wave  int         `json:"wave"`
	Phase Phase       `json:"phase"`
	Since metav1.Time `json:"since"` // when it entered Phase
	// Message says why it failed.
	Message string `json:"message,omitempty"`
}

func newState(target string) State {
	return State{Target: target, Wave: -1, Members: map[string]Member{}}
}

// inFlight reports whether m is admitted or upgraded: in a wave, and not judged yet.
func (m Member) inFlight() bool { return m.Phase == PhaseAdmitted || m.Phase == PhaseUpgraded }

// StateStore keeps a rollout's state where a restarted operator finds it.
type StateStore interface {
	// Load returns the state of the rollout to target: a new one when none is stored for it.
	Load(ctx context.Context, target string) (State, error)
	Save(ctx context.Context, st State) error
}

// Store keeps one watch's rollout state in a ConfigMap of the operator's namespace.
type Store struct {
	Reader    client.Reader // the apiserver: the manager's cache holds no such ConfigMap
	Writer    client.Writer
	Namespace string
	Name      string
}

// stateKey is the ConfigMap's data key.
const stateKey = "state.json"

// StorePrefix begins the name of every rollout state ConfigMap.
const StorePrefix = "myproxy-operator-rollout-"

// StoreName is the ConfigMap of a kind's rollout, in a shard ("" unsharded).
func StoreName(gvk schema.GroupVersionKind, shard string) string {
	name := StorePrefix + strings.ToLower(gvk.Kind) + "." + gvk.Group
	if shard != "" {
		name += "." + shard
	}
	return name
}

// Load reads the stored state; an absent one is a new rollout to target, as is one stored for
// another target (a new chart restarts from the canaries).
func (s Store) Load(ctx context.Context, target string) (State, error) {
	var cm corev1.ConfigMap
	err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Name}, &cm)
	if apierrors.IsNotFound(err) {
		return newState(target), nil
	}
	if err != nil {
		return State{}, fmt.Errorf("reading the rollout state %s/%s: %w", s.Namespace, s.Name, err)
	}
	var st State
	if err := json.Unmarshal([]byte(cm.Data[stateKey]), &st); err != nil || st.Target != target {
		return newState(target), nil // unreadable state is a rollout started afresh
	}
	if st.Members == nil {
		st.Members = map[string]Member{}
	}
	return st, nil
}

// Save writes the state by server-side apply, which creates the ConfigMap the first time.
func (s Store) Save(ctx context.Context, st State) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name,
			Labels: map[string]string{"app.kubernetes.io/name": "myproxy-operator", "app.kubernetes.io/component": "rollout"}},
		Data: map[string]string{stateKey: string(raw)},
	}
	//nolint:staticcheck // client.Apply with an object is controller-runtime v0.22's apply for typed objects
	if err := s.Writer.Patch(ctx, cm, client.Apply, client.FieldOwner("myproxy-operator-rollout"), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the rollout state %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

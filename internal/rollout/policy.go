// Package rollout paces the upgrades that a new chart or new operator code brings to an
// existing fleet: in waves, each gated on the health of the one before, halted by a failure
// budget. Upgrades that a spec change brings go at once, as before, unless a rollout is halted.
//
// A Gate per watch (and shard) decides, for every upgrade the Helm reconciler is about to make,
// whether it may go now (package actionclient's Decide asks it, as a WaveGate); the same Gate, run by the
// manager as a runnable, opens waves, follows the health of their releases and writes its state
// to a ConfigMap of the operator's namespace, so that a restarted operator resumes a rollout
// where it stood.
package rollout

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

// Key is the watches.yaml key of a watch's rollout policy.
const Key = "rollout"

// UpgradeNowAnnotation on a custom resource lets its upgrade go regardless of the rollout:
// before its wave, or while the rollout is halted.
const UpgradeNowAnnotation = "rollout.myproxy-operator.gateway.example.com/upgrade-now"

// ResumeAnnotation on a rollout's state ConfigMap is an administrator's request to resume the
// halted rollout on the same chart, once its cause is fixed outside the chart: any value other
// than the last one handled (a timestamp, say). Only who may write ConfigMaps in the state's
// namespace (the operator's, unless an administrator named another) can make one.
const ResumeAnnotation = "rollout.myproxy-operator.gateway.example.com/resume"

// Policy is a rollout policy as watches.yaml writes it; unset fields take the operator's
// defaults (its --rollout-* flags).
type Policy struct {
	// CanarySelector chooses the first wave among the held releases by their custom resources'
	// labels; unset, or when it matches none of them, the first Canaries by namespace and name.
	CanarySelector *metav1.LabelSelector `json:"canarySelector,omitempty"`
	Canaries       *int                  `json:"canaries,omitempty"`
	// Growth multiplies each wave's size over the one before.
	Growth *int `json:"growth,omitempty"`
	// Timeout bounds how long an admitted release may take to be upgraded and Ready.
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// MaxFailures is how many releases may fail (an upgrade error, or not Ready in time) before
	// the rollout halts.
	MaxFailures *int `json:"maxFailures,omitempty"`
}

// Settings are a policy merged with the operator's defaults.
type Settings struct {
	CanarySelector labels.Selector // nil: by count
	Defaults
}

// Defaults are the operator's defaults of every policy field but the selector.
type Defaults struct {
	Canaries    int
	Growth      int
	Timeout     time.Duration
	MaxFailures int
}

// Check reports a policy that cannot be used.
func (p Policy) Check() error {
	if _, err := metav1.LabelSelectorAsSelector(p.CanarySelector); err != nil { // nil: no error
		return fmt.Errorf("canarySelector: %w", err)
	}
	return p.Merge(Defaults{Canaries: 1, Growth: 2, Timeout: time.Minute}).Check()
}

// Check reports defaults that cannot be used.
func (d Defaults) Check() error {
	switch t := d.Timeout; {
	case d.Canaries < 1:
		return fmt.Errorf("canaries must be at least 1, got %d", d.Canaries)
	case d.Growth < 1:
		return fmt.Errorf("growth must be at least 1, got %d", d.Growth)
	case t <= 0:
		return fmt.Errorf("timeout must be positive, got %s", t)
	case d.MaxFailures < 0:
		return fmt.Errorf("maxFailures must not be negative, got %d", d.MaxFailures)
	}
	return nil
}

// Merge returns p with unset fields taken from d; p must have passed Check.
func (p Policy) Merge(d Defaults) Settings {
	s := Settings{Defaults: Defaults{Canaries: ptr.Deref(p.Canaries, d.Canaries), Growth: ptr.Deref(p.Growth, d.Growth),
		Timeout: ptr.Deref(p.Timeout, metav1.Duration{Duration: d.Timeout}).Duration, MaxFailures: ptr.Deref(p.MaxFailures, d.MaxFailures)}}
	if p.CanarySelector != nil {
		s.CanarySelector, _ = metav1.LabelSelectorAsSelector(p.CanarySelector)
	}
	return s
}

package actionclient

import (
	"context"
	"encoding/json"
	"errors"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WaveGate decides which upgrades may go now (package rollout's Gate).
type WaveGate interface {
	// Hold reports whether an upgrade of obj must wait; specChanged says it renders values
	// other than the deployed release's.
	Hold(obj client.Object, specChanged bool) bool
	// UpToDate tells that obj's release renders what the chart at hand renders.
	UpToDate(obj client.Object)
	// Upgraded tells the outcome of an upgrade of obj's release.
	Upgraded(obj client.Object, err error)
}

// ErrHeld is the error of an upgrade the rollout holds back that the reconciler tried
// regardless of the check's answer (a release in a failed state is always upgraded).
var ErrHeld = errors.New("held back by the chart rollout: this release waits for its wave")

// Waved returns a getter whose action clients ask gate before each upgrade. The reconciler
// checks whether an upgrade is needed with a dry-run upgrade and upgrades when its manifest
// differs from the deployed one: a held upgrade answers that check with the deployed release,
// which the reconciler reads as "unchanged", so the release stays as it is and its drift is
// still corrected. It sits above Digested, so that it sees every check, answered or not.
func Waved(next helmclient.ActionClientGetter, gate WaveGate) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, obj client.Object) (helmclient.ActionInterface, error) {
		ac, err := next.ActionClientFor(ctx, obj)
		if err != nil {
			return nil, err
		}
		return &wavedClient{ActionInterface: ac, gate: gate, obj: obj}, nil
	})
}

type wavedClient struct {
	helmclient.ActionInterface
	gate WaveGate
	obj  client.Object
	last *release.Release // what the last Get returned: the deployed release the check compares with
	// held is the last check's answer: the upgrade must wait. The reconciler upgrades a failed
	// release even when the check finds its manifest unchanged (a retry, which no rollout
	// holds), and one the check held when it is failed.
	held, checked bool
}

func (c *wavedClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	if len(opts) == 0 {
		c.last = nil
		if err == nil {
			c.last = rel
		}
	}
	return rel, err
}

func (c *wavedClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.UpgradeOption) (*release.Release, error) {
	cur := named(c.last, name)
	if isDryRun(opts) {
		rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
		if err != nil || cur == nil || rel == nil {
			return rel, err
		}
		c.checked = true
		if rel.Manifest == cur.Manifest {
			c.held = false
			c.gate.UpToDate(c.obj)
			return rel, nil
		}
		if c.held = c.gate.Hold(c.obj, valuesDiffer(cur.Config, vals)); c.held {
			return cur, nil
		}
		return rel, nil
	}
	if c.held || (!c.checked && cur != nil && c.gate.Hold(c.obj, valuesDiffer(cur.Config, vals))) {
		return nil, ErrHeld
	}
	c.last = nil
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	c.gate.Upgraded(c.obj, err)
	return rel, err
}

// Install tells the gate that the resource is decided, whatever the outcome: an install renders
// the chart at hand, so there is nothing for a rollout to hold back. The first wave waits until
// every resource of the fleet has been decided since the start; without this, a resource that
// was installed since and not reconciled again would hold it back until the rollout's timeout.
func (c *wavedClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any,
	opts ...helmclient.InstallOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	c.gate.UpToDate(c.obj)
	return rel, err
}

// valuesDiffer reports whether two sets of values differ, as JSON (a release's values are
// read back from JSON, where every number is a float).
func valuesDiffer(deployed, next map[string]any) bool {
	if len(deployed) == 0 && len(next) == 0 {
		return false
	}
	a, errA := json.Marshal(deployed)
	b, errB := json.Marshal(next)
	return errA != nil || errB != nil || string(a) != string(b)
}

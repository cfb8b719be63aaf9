package caches

import (
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/shard"
)

// Side is a cache of its own beside the manager's: objects the manager's cache must not hold
// (its selector would apply to them), read as metadata only. Its informers start at a kind's
// first watch or read, and deliver every event: what a reader ignores, its handler decides.
type Side struct {
	Entry
	// Label and Field select the objects (nil: every object of a kind).
	Label labels.Selector
	Field fields.Selector
	// Transform is what it keeps of each object.
	Transform toolscache.TransformFunc
}

// New returns the side cache s over the watched namespaces (nil: all), started by the manager.
func New(mgr manager.Manager, namespaces map[string]cache.Config, s Side) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: namespaces, DefaultLabelSelector: s.Label, DefaultFieldSelector: s.Field,
		DefaultTransform: s.Transform,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the cache of %s: %w", s.Holds, err)
	}
	return c, mgr.Add(c)
}

// The side caches. Each is a row of Table, in this order.
var (
	// ReleaseRecords holds Helm's release records, whose events tell of records deleted, corrupted
	// or written by hand, and whose index answers whether a release has any (package releasestore).
	ReleaseRecords = Side{Entry: Entry{
		Cache: "release records", Holds: "Secret metadata of Helm release records",
		Selected: names.RecordOwnerLabel + "=" + names.RecordOwnerHelm, Keeps: "identity, labels, owner references",
		Events: "all; the record watch skips the operator's own writes and deletes (package ownwrites)",
		ReadBy: "the record watch (controller/records.go), the empty-history fast path (releasestore)",
	}, Label: labels.SelectorFromSet(labels.Set{names.RecordOwnerLabel: names.RecordOwnerHelm}), Transform: IdentityAndLinks}

	// SecretMetadata holds which Secrets exist, for the Secrets that checked values name (a TLS
	// Secret): the translator reads the Secret itself from the apiserver, and a cache of whole
	// Secrets would hold, and list at every start, every Secret of the cluster.
	SecretMetadata = Side{Entry: Entry{
		Cache: "Secret metadata", Holds: "Secret metadata, but for release records",
		Selected: names.RecordOwnerLabel + "!=" + names.RecordOwnerHelm, Keeps: "identity",
		Events: "all", ReadBy: "the watch of Secrets that checked values name (controller/secrets.go)",
	}, Label: mustParse(names.RecordOwnerLabel + "!=" + names.RecordOwnerHelm), Transform: Identity}

	// Lookups holds the objects renderings looked up (package renderinputs), and the cluster's
	// APIServices (the API watch).
	Lookups = Side{Entry: Entry{
		Cache: "lookups", Holds: "metadata of the kinds renderings looked up, and of APIServices",
		Selected: "none: a lookup may read any object of the namespace", Keeps: "identity",
		Events: "all", ReadBy: "renderinputs.Tracker (a looked-up object changed), the API watch (controller/apiwatch.go)",
	}, Transform: Identity}

	serviceAccountsEntry = Entry{
		Cache: "ServiceAccounts", Holds: "metadata of the ServiceAccounts releases run as (one cache per name)",
		Selected: "metadata.name, the watches.yaml serviceAccountName or --default-service-account", Keeps: "identity",
		Events: "all", ReadBy: "package tenant (a missing ServiceAccount, and its creation)",
		Condition: "when a watch runs as a ServiceAccount",
	}
	rolloutStateEntry = Entry{
		Cache: "rollout state", Holds: "metadata of a watch's rollout state ConfigMap (one cache per ConfigMap)",
		Selected: "metadata.name, in the rollout state's namespace", Keeps: "all but managed fields",
		Events: "additions and updates", ReadBy: "the rollout gate: an administrator's resume request (package rollout)",
		Condition: "with rollout waves",
	}
	claimsEntry = Entry{
		Cache: "shard claims", Holds: "metadata of the custom resources that name this shard as their owner",
		Selected: "the shard's owner label (package shard)", Keeps: "all but managed fields",
		Events: "additions and updates of resources this shard's selector no longer picks",
		ReadBy: "the handover controller (controller/handover.go)", Condition: "sharded",
	}
)

// ServiceAccounts holds the ServiceAccounts of one name, the identity a watch's releases run as.
// Selecting by name is also what lets RBAC grant its list and watch by resourceNames.
func ServiceAccounts(name string) Side {
	return Side{Entry: serviceAccountsEntry, Field: fields.OneTermEqualSelector("metadata.name", name), Transform: Identity}
}

// RolloutState holds the ConfigMap named name, a watch's rollout state, for the annotation by
// which an administrator resumes a halted rollout; the gate itself reads and writes the state
// through the apiserver.
func RolloutState(name string) Side {
	return Side{Entry: rolloutStateEntry, Field: fields.OneTermEqualSelector("metadata.name", name), Transform: StripManagedFields}
}

// Claims holds the custom resources that name shard s as their owner, to hand over those that
// were relabelled for another shard.
func Claims(s shard.Shard) Side {
	return Side{Entry: claimsEntry, Label: s.OwnerSelector(), Transform: StripManagedFields}
}

// sides are the side caches, in Table's order.
var sides = []Side{ReleaseRecords, SecretMetadata, Lookups, {Entry: serviceAccountsEntry}, {Entry: rolloutStateEntry},
	{Entry: claimsEntry}}

func mustParse(selector string) labels.Selector {
	s, err := labels.Parse(selector)
	if err != nil {
		panic(err)
	}
	return s
}

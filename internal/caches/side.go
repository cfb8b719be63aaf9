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
	// Name is the cache's name in docs/architecture.md's table.
	Name string
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
		return nil, fmt.Errorf("creating the %s cache: %w", s.Name, err)
	}
	return c, mgr.Add(c)
}

// The side caches, each a row of docs/architecture.md's table.
var (
	// ReleaseRecords holds Helm's release records, whose events tell of records deleted, corrupted
	// or written by hand, and whose index answers whether a release has any (helmconfig.Records).
	ReleaseRecords = Side{Name: "release records", Transform: IdentityAndLinks,
		Label: labels.SelectorFromSet(labels.Set{names.RecordOwnerLabel: names.RecordOwnerHelm})}

	// SecretMetadata holds which Secrets exist, for the Secrets that checked values name (a TLS
	// Secret): the translator reads the Secret itself from the apiserver, and a cache of whole
	// Secrets would hold, and list at every start, every Secret of the cluster.
	SecretMetadata = Side{Name: "Secret metadata", Transform: Identity,
		Label: mustParse(names.RecordOwnerLabel + "!=" + names.RecordOwnerHelm)}

	// Lookups holds the objects renderings looked up (actionclient.Lookups), and the cluster's
	// APIServices (the API watch).
	Lookups = Side{Name: "lookups", Transform: Identity}
)

// ServiceAccounts holds the ServiceAccounts of one name, the identity a watch's releases run as.
// Selecting by name is also what lets RBAC grant its list and watch by resourceNames.
func ServiceAccounts(name string) Side {
	return Side{Name: "ServiceAccounts", Field: fields.OneTermEqualSelector("metadata.name", name), Transform: Identity}
}

// RolloutState holds the ConfigMap named name, a watch's rollout state, for the annotation by
// which an administrator resumes a halted rollout; the gate itself reads and writes the state
// through the apiserver.
func RolloutState(name string) Side {
	return Side{Name: "rollout state", Field: fields.OneTermEqualSelector("metadata.name", name), Transform: StripManagedFields}
}

// Claims holds the custom resources that name shard s as their owner, to hand over those that
// were relabelled for another shard.
func Claims(s shard.Shard) Side {
	return Side{Name: "shard claims", Label: labels.SelectorFromSet(labels.Set{shard.OwnerLabel: s.ID()}), Transform: StripManagedFields}
}

func mustParse(selector string) labels.Selector {
	s, err := labels.Parse(selector)
	if err != nil {
		panic(err)
	}
	return s
}

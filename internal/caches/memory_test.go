package caches

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/myproxy-operator/internal/shard"
)

// A resource is forgotten by the stores of its kind and by the shared ones, not by another
// kind's store that holds a resource of the same name.
func TestForgetReachesEveryStoreOfTheKind(t *testing.T) {
	a := schema.GroupVersionKind{Group: "g", Version: "v1", Kind: "A"}
	b := schema.GroupVersionKind{Group: "g", Version: "v1", Kind: "B"}
	nn := types.NamespacedName{Namespace: "ns", Name: "x"}
	r := NewRemembered()
	digestsA, digestsB := NewStore[int](r, "digests", a), NewStore[int](r, "digests", b)
	states := NewStore[string](r, "states", schema.GroupVersionKind{})
	r.Register("writes", schema.GroupVersionKind{}, nil, func() int { return 7 }) // counted only
	digestsA.Set(shard.Key{GVK: a, NamespacedName: nn}, 1)
	digestsB.Set(shard.Key{GVK: b, NamespacedName: nn}, 1)
	states.Set(shard.Key{GVK: a, NamespacedName: nn}, "deployed")
	if got := r.Sizes(); got["digests"] != 2 || got["states"] != 1 || got["writes"] != 7 {
		t.Fatalf("sizes %v", got)
	}
	r.Forget(shard.Key{GVK: a, NamespacedName: nn})
	if got := r.Sizes(); got["digests"] != 1 || got["states"] != 0 || digestsB.Len() != 1 {
		t.Errorf("after forgetting A %s: sizes %v", nn, got)
	}
	NewStore[int](r, "digests", a) // a manager built again replaces its store
	if got := r.Sizes(); got["digests"] != 1 {
		t.Errorf("a store registered again counts once: %v", got)
	}
}

// registeredElsewhere are the maps keyed by custom resources that are not Stores, each with the
// name of the store of the registry that forgets (or, for entries that go on their own, counts)
// them, registered by the type that holds them.
var registeredElsewhere = map[string]string{
	"rollout.Gate.held":              "rollout_holds",
	"rollout.Gate.seen":              "rollout_holds",
	"shard.Claims.inflight":          "shard_claims",
	"shard.Claims.released":          "shard_claims",
	"helmconfig.Records.known":       "known_releases",
	"helmconfig.Records.writes":      "own_writes",
	"helmconfig.Records.writing":     "own_writes",
	"helmconfig.Records.deletes":     "own_writes",
	"actionclient.Lookups.followed":  "lookup_followers",
	"actionclient.Lookups.followers": "lookup_followers", // the reverse index of followed
	"caches.Store.m":                 "",                 // the Store itself
}

// notPerResource are sync.Maps whose keys are not custom resources.
var notPerResource = map[string]bool{
	"status.Reconciler.watched": true, // kinds
}

// resourceKey matches the types a custom resource is named by.
var resourceKey = regexp.MustCompile(`\b(shard\.Key|types\.NamespacedName|client\.ObjectKey|types\.UID)\b|^map\[Key\]`)

// Every map the operator keeps per custom resource is a Store of the registry (NewStore), or
// belongs to a type registered there by name: a new map keyed by a custom resource fails this
// test until it is one, so that Forget cannot leave it behind.
func TestEveryPerResourceMapIsAStore(t *testing.T) {
	root := filepath.Join("..")
	registered := map[string]bool{}
	var src strings.Builder
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src.Write(data)
		f, err := parser.ParseFile(fset, path, data, 0)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := spec.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, field := range st.Fields.List {
				typ := string(data[fset.Position(field.Type.Pos()).Offset:fset.Position(field.Type.End()).Offset])
				for _, name := range field.Names {
					id := pkg + "." + spec.Name.Name + "." + name.Name
					switch {
					case typ == "sync.Map" && !notPerResource[id]:
						t.Errorf("%s is a sync.Map: key it by custom resource in a Store (caches.NewStore), or list it in notPerResource", id)
					case strings.HasPrefix(typ, "map[") && resourceKey.MatchString(typ) && !hasKey(registeredElsewhere, id):
						t.Errorf("%s (%s) is kept per custom resource: make it a Store (caches.NewStore), so that Forget reaches it", id, typ)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?:Register|NewStore\[[^\]]+\])\([^"]*"([a-z_]+)"`).FindAllStringSubmatch(src.String(), -1) {
		registered[m[1]] = true
	}
	for id, name := range registeredElsewhere {
		if name != "" && !registered[name] {
			t.Errorf("%s is said to be registered as %q, which nothing registers", id, name)
		}
	}
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

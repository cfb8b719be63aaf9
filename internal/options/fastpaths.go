package options

import (
	"fmt"
	"slices"
	"strings"
)

// FastPathsFlag chooses the operator's fast paths (Options.FastPaths).
const FastPathsFlag = "fast-paths"

// The fast paths, each beside the stock path it replaces (docs/architecture.md, "Fast paths").
const (
	// FastDigests answers the upgrade check from digests instead of the plugins' dry run.
	FastDigests = "digests"
	// FastEmptyHistory answers a new release's empty history from the record cache instead of
	// Helm listing its Secrets.
	FastEmptyHistory = "empty-history"
	// FastBookkeeping drops updates of release objects that change only what the cluster's
	// controllers keep for themselves (the Deployment revision), beside the plugins' own rule.
	FastBookkeeping = "bookkeeping"
	// FastRecordEncoding encodes release records with pooled compressors instead of Helm's new
	// compressor at the best compression per record.
	FastRecordEncoding = "record-encoding"
)

// AllFastPaths lists every fast path.
var AllFastPaths = []string{FastDigests, FastEmptyHistory, FastBookkeeping, FastRecordEncoding}

// FastPaths is the set of fast paths the operator takes. As a flag: true (every one, the
// default), false (none: helm-operator-plugins' and Helm's own path for each), or a
// comma-separated list of names, to measure or isolate one.
type FastPaths []string

// On reports whether the fast path name is taken.
func (f FastPaths) On(name string) bool { return slices.Contains(f, name) }

func (f *FastPaths) String() string {
	if f == nil || len(*f) == 0 {
		return "false"
	}
	return strings.Join(*f, ",")
}

// Set parses true, false or a list of names.
func (f *FastPaths) Set(v string) error {
	*f = FastPaths{}
	switch v {
	case "true":
		*f = slices.Clone(AllFastPaths)
	case "false", "":
	default:
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); !slices.Contains(AllFastPaths, name) {
				return fmt.Errorf("unknown fast path %q: true, false, or a list of %s", name, strings.Join(AllFastPaths, ", "))
			} else if !f.On(name) {
				*f = append(*f, name)
			}
		}
	}
	return nil
}

// IsBoolFlag lets --fast-paths stand alone for true, as the boolean flag it was.
func (f *FastPaths) IsBoolFlag() bool { return true }

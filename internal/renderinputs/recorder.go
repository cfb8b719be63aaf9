package renderinputs

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/action"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// Read is one object (or list of objects) a rendering read.
type Read struct {
	Resource  schema.GroupVersionResource
	Namespace string // "" for cluster-scoped objects, and for lists across namespaces
	Name      string // "" for a list
}

// Key names what was read.
func (r Read) Key() string {
	return fmt.Sprintf("%s/%s/%s/%s/%s", r.Resource.Group, r.Resource.Version, r.Resource.Resource, r.Namespace, r.Name)
}

// Recorder collects the reads of one action's renderings.
type Recorder struct {
	mu     sync.Mutex
	reads  map[string]Read
	onRead func(n int)
	guard  func(Read) error
}

// OnRead calls f, with the number of distinct reads so far, after each read (nil: nobody).
// It runs on the rendering's goroutine, before the rendering goes on.
func (r *Recorder) OnRead(f func(n int)) {
	r.mu.Lock()
	r.onRead = f
	r.mu.Unlock()
}

// Start forgets earlier reads: each Helm action renders once, after Start.
func (r *Recorder) Start() {
	r.mu.Lock()
	r.reads = nil
	r.mu.Unlock()
}

// Reads returns what was read since Start, in key order.
func (r *Recorder) Reads() []Read {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.SortedFunc(maps.Values(r.reads), func(a, b Read) int { return strings.Compare(a.Key(), b.Key()) })
}

func (r *Recorder) add(rd Read) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reads == nil {
		r.reads = map[string]Read{}
	}
	r.reads[rd.Key()] = rd
	if r.onRead != nil {
		r.onRead(len(r.reads))
	}
}

// RecorderOf returns the Recorder that InstallRecorder put in cfg, or nil.
func RecorderOf(cfg *action.Configuration) *Recorder {
	if cfg == nil {
		return nil
	}
	if g, ok := cfg.RESTClientGetter.(*recordingGetter); ok {
		return g.recorder
	}
	return nil
}

// InstallRecorder makes every object read by cfg's template engine (Helm's `lookup`) land in a
// new Recorder, after guard (nil: none) has checked it: a read guard refuses is not sent, and the
// template's lookup fails with guard's error. Helm builds its lookup clients from the REST config
// of cfg.RESTClientGetter, which nothing else of an install or upgrade uses to read objects: the
// kube client was built before, from the getter it keeps. cfg.RESTClientGetter must be set.
func InstallRecorder(cfg *action.Configuration, guard func(Read) error) {
	cfg.RESTClientGetter = &recordingGetter{RESTClientGetter: cfg.RESTClientGetter, recorder: &Recorder{guard: guard}}
}

type recordingGetter struct {
	action.RESTClientGetter
	recorder *Recorder
}

func (g *recordingGetter) ToRESTConfig() (*rest.Config, error) {
	cfg, err := g.RESTClientGetter.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &recordingTransport{next: rt, recorder: g.recorder}
	})
	return cfg, nil
}

type recordingTransport struct {
	next     http.RoundTripper
	recorder *Recorder
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rd, ok := ParsePath(req.URL.Path)
	if ok && t.recorder.guard != nil {
		if err := t.recorder.guard(rd); err != nil {
			return nil, err
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err == nil && req.Method == http.MethodGet && ok { // !ok: discovery, which resources a group has
		t.recorder.add(rd)
	}
	return resp, err
}

// ParsePath tells which object or list an apiserver path reads; false for discovery paths and
// anything else that is not a read of objects.
func ParsePath(path string) (Read, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var gv schema.GroupVersion
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		gv, parts = schema.GroupVersion{Version: parts[1]}, parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		gv, parts = schema.GroupVersion{Group: parts[1], Version: parts[2]}, parts[3:]
	default:
		return Read{}, false
	}
	rd := Read{}
	switch {
	case len(parts) == 0:
		return Read{}, false
	case parts[0] == "namespaces" && len(parts) >= 3:
		rd.Namespace, parts = parts[1], parts[2:]
	}
	rd.Resource = gv.WithResource(parts[0])
	if len(parts) >= 2 {
		rd.Name = parts[1] // a subresource (parts[2]) reads the object too
	}
	return rd, true
}

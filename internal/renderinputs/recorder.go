package renderinputs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/action"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// Read is one object (or list of objects) a rendering read, and what it saw.
type Read struct {
	Resource  schema.GroupVersionResource
	Namespace string // "" for cluster-scoped objects, and for lists across namespaces
	Name      string // "" for a list
	// Seen is what the read returned: StateAbsent, an object's identity and resourceVersion,
	// or a digest of a list's members (see objectState and listState).
	Seen string
}

// Key names what was read, without what was seen.
func (r Read) Key() string {
	return fmt.Sprintf("%s/%s/%s/%s/%s", r.Resource.Group, r.Resource.Version, r.Resource.Resource, r.Namespace, r.Name)
}

// StateAbsent is what a read of a missing object saw. StateUnknown never equals anything a
// read saw: an answer that could not be understood, or an object the Tracker cannot see.
const (
	StateAbsent  = "absent"
	StateUnknown = "unknown"
)

func objectState(uid, resourceVersion string) string { return uid + "@" + resourceVersion }

// member is one object of a list, as listState digests it.
type member struct{ Namespace, Name, UID, ResourceVersion string }

func listState(members []member) string {
	slices.SortFunc(members, func(a, b member) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	h := sha256.New()
	for _, m := range members {
		_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\n", m.Namespace, m.Name, m.UID, m.ResourceVersion)
	}
	return fmt.Sprintf("list:%d:%s", len(members), hex.EncodeToString(h.Sum(nil))[:32])
}

// Recorder collects the reads of one action's renderings.
type Recorder struct {
	mu     sync.Mutex
	reads  map[string]Read
	onRead func(n int)
	guard  func(Read) error
}

// Guard has every read checked by f before it is sent: a read f refuses is not sent, and the
// template's lookup fails with f's error (nil f: every read is sent).
func (r *Recorder) Guard(f func(Read) error) {
	r.mu.Lock()
	r.guard = f
	r.mu.Unlock()
}

// check runs the guard on rd.
func (r *Recorder) check(rd Read) error {
	r.mu.Lock()
	guard := r.guard
	r.mu.Unlock()
	if guard == nil {
		return nil
	}
	return guard(rd)
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
	out := make([]Read, 0, len(r.reads))
	for _, rd := range r.reads {
		out = append(out, rd)
	}
	slices.SortFunc(out, func(a, b Read) int { return strings.Compare(a.Key(), b.Key()) })
	return out
}

func (r *Recorder) add(rd Read) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reads == nil {
		r.reads = map[string]Read{}
	}
	if prev, ok := r.reads[rd.Key()]; ok && prev.Seen != rd.Seen {
		rd.Seen = StateUnknown // read twice, and it changed in between
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
// new Recorder. Helm builds its lookup clients from the REST config of cfg.RESTClientGetter,
// which nothing else of an install or upgrade uses to read objects: the kube client was built
// before, from the getter it keeps.
func InstallRecorder(cfg *action.Configuration) *Recorder {
	if cfg.RESTClientGetter == nil {
		return nil
	}
	g := &recordingGetter{RESTClientGetter: cfg.RESTClientGetter, recorder: &Recorder{}}
	cfg.RESTClientGetter = g
	return g.recorder
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
	if ok {
		if err := t.recorder.check(rd); err != nil {
			return nil, err
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || !ok {
		return resp, err // !ok: discovery, which resources a group has
	}
	body, readErr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	switch {
	case readErr != nil:
		rd.Seen = StateUnknown
	case resp.StatusCode == http.StatusNotFound:
		rd.Seen = StateAbsent
	case resp.StatusCode != http.StatusOK:
		rd.Seen = StateUnknown
	case rd.Name != "":
		rd.Seen = seenObject(body)
	default:
		rd.Seen = seenList(body)
	}
	t.recorder.add(rd)
	return resp, nil
}

type objectMeta struct {
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

func seenObject(body []byte) string {
	var o struct {
		Metadata objectMeta `json:"metadata"`
	}
	if json.Unmarshal(body, &o) != nil || o.Metadata.UID == "" {
		return StateUnknown
	}
	return objectState(o.Metadata.UID, o.Metadata.ResourceVersion)
}

func seenList(body []byte) string {
	var l struct {
		Items []struct {
			Metadata objectMeta `json:"metadata"`
		} `json:"items"`
	}
	if json.Unmarshal(body, &l) != nil {
		return StateUnknown
	}
	members := make([]member, 0, len(l.Items))
	for _, it := range l.Items {
		m := it.Metadata
		members = append(members, member(m))
	}
	return listState(members)
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

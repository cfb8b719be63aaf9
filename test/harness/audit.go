package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"testing"
	"time"
)

// Permission is one verb on one resource (with its subresource) of an API group.
type Permission struct{ Group, Resource, Verb string }

func (p Permission) String() string {
	return fmt.Sprintf("%s %s (group %q)", p.Verb, p.Resource, p.Group)
}

// AuditedPermissions reads an apiserver audit log (JSON lines, as cluster.sh writes with
// CLUSTER_AUDIT=1) for the requests user made (itself or impersonated) since from: the
// permissions used, and those the authorizer refused. It fails t if user made no request.
func AuditedPermissions(t testing.TB, path, user string, from time.Time) (used, refused map[Permission]bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	used, refused = map[Permission]bool{}, map[Permission]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct {
			Stage            string    `json:"stage"`
			Verb             string    `json:"verb"`
			RequestReceived  time.Time `json:"requestReceivedTimestamp"`
			User             struct{ Username string }
			ImpersonatedUser *struct{ Username string } `json:"impersonatedUser"`
			ObjectRef        *struct {
				APIGroup    string `json:"apiGroup"`
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			Annotations    map[string]string   `json:"annotations"`
			ResponseStatus *struct{ Code int } `json:"responseStatus"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		who := e.User.Username
		if e.ImpersonatedUser != nil {
			who = e.ImpersonatedUser.Username
		}
		if who != user || e.ObjectRef == nil || e.RequestReceived.Before(from) || e.Stage != "ResponseComplete" {
			continue // discovery (no object) is every authenticated user's
		}
		resource := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			resource += "/" + e.ObjectRef.Subresource
		}
		p := Permission{Group: e.ObjectRef.APIGroup, Resource: resource, Verb: e.Verb}
		// The authorizer's decision, not the response code: a create in a namespace being
		// deleted is also answered 403.
		if e.Annotations["authorization.k8s.io/decision"] == "forbid" {
			refused[p] = true
			continue
		}
		used[p] = true
		if e.Verb == "patch" && e.ResponseStatus != nil && e.ResponseStatus.Code == http.StatusCreated {
			// A server-side apply that creates its object is authorised as a create too.
			used[Permission{Group: p.Group, Resource: p.Resource, Verb: "create"}] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(used) == 0 {
		t.Fatalf("no request of %s in the audit log", user)
	}
	return used, refused
}

// SortedPermissions lists a set of permissions in a stable order, for messages.
func SortedPermissions(set map[Permission]bool) []Permission {
	out := make([]Permission, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"time"
)

// requests counts API requests by verb.
type requests map[string]int

func (r requests) total() int {
	n := 0
	for _, c := range r {
		n += c
	}
	return n
}

type auditEvent struct {
	AuditID string `json:"auditID"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	ObjectRef       struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
}

// key names the request by verb, or by verb and resource when detail is asked for.
func (e auditEvent) key(detail bool) string {
	if !detail {
		return e.Verb
	}
	r := e.ObjectRef.Resource
	if e.ObjectRef.Subresource != "" {
		r += "/" + e.ObjectRef.Subresource
	}
	return e.Verb + " " + r
}

// countRequests reads an apiserver audit log (JSON lines) and counts the requests of user
// received in [from, to), by verb. A request appears once per stage (a watch twice: started and
// complete), so requests are told apart by audit ID.
// With detail, requests are counted by verb and resource.
func countRequests(path, user string, from, to time.Time, detail bool) (requests, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return countRequestsIn(f, user, from, to, detail)
}

func countRequestsIn(r io.Reader, user string, from, to time.Time, detail bool) (requests, error) {
	counts := requests{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue // a line cut by rotation or by a write in progress
		}
		if e.User.Username != user || seen[e.AuditID] {
			continue
		}
		if e.RequestReceived.Before(from) || !e.RequestReceived.Before(to) {
			continue
		}
		seen[e.AuditID] = true
		counts[e.key(detail)]++
	}
	return counts, sc.Err()
}

// Package caches declares everything the operator sees: each cache it reads, which objects it
// holds (kinds, namespaces, label selector), what it keeps of each object (its transform) and
// which of their events reach a controller (its event filter). Table lists every cache; the
// manager's cache is built by Manager, every other one by New from a Side; docs/architecture.md
// shows Table as Markdown renders it, and a test keeps the two equal.
//
// The event filters (eventfilter.go) and the operator's own writes they tell apart
// (ownwrites.go) are here too.
//
// A change to what the operator holds in memory, or to which events wake a reconcile, belongs
// here: a new cache is a Side (and a row of Table), a new kind in the manager's cache falls in
// one of its two declared classes (the custom resources, or release objects selected by the
// managed label), never under a filter it did not choose.
package caches

import (
	"fmt"
	"strings"
)

// Entry is one row of Table: a cache, in words a reader can check against the code beside it.
type Entry struct {
	Cache     string // which cache
	Holds     string // the objects it holds
	Selected  string // by which selector
	Keeps     string // what it keeps of each (its transform)
	Events    string // which events reach controllers (its event filter)
	ReadBy    string // who reads it
	Condition string // when it exists; "" always
}

// Table lists every cache of the operator, the manager's first.
func Table() []Entry {
	out := append([]Entry{}, managerEntries...)
	for _, s := range sides {
		out = append(out, s.Entry)
	}
	return out
}

// Markdown renders Table as the Markdown table docs/architecture.md shows.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| cache | holds | selected by | keeps | events that reach controllers | read by |\n|---|---|---|---|---|---|\n")
	for _, e := range Table() {
		name := e.Cache
		if e.Condition != "" {
			name += " (" + e.Condition + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", name, e.Holds, e.Selected, e.Keeps, e.Events, e.ReadBy)
	}
	return b.String()
}

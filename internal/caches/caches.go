// Package caches declares everything the operator sees: each cache it reads, which objects it
// holds (kinds, namespaces, label selector), what it keeps of each object (its transform) and
// which of their events reach a controller (its event filter). The manager's cache is built by
// Manager, every other one by New from a Side; docs/architecture.md has a row for each, which a
// test keeps equal to the code.
//
// The event filters (eventfilter.go) are here too.
//
// A change to what the operator holds in memory, or to which events wake a reconcile, belongs
// here: a new cache is a Side (and a row of the table), a new kind in the manager's cache falls in
// one of its two declared classes (the custom resources, or release objects selected by the
// managed label), never under a filter it did not choose.
package caches

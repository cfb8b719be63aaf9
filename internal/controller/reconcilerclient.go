// The client of helm-operator-plugins' reconciler. The reconciler takes its client as an option
// (reconciler.WithClient); the operator wraps it, at that one boundary, for two reasons:
//
//   - the uninstall finalizer's name. The reconciler adds, checks and removes the finalizer
//     "uninstall-helm-release", a name it does not let a user choose; the apiserver warns that it
//     is not domain-qualified, and the stock operator-sdk helm-operator knows it not: a custom
//     resource moved from one operator to the other would keep a finalizer nobody removes and
//     hang in Terminating. So every object of the kind the reconciler reads or gets back from a
//     write carries names.ReconcilerFinalizer wherever the stored object has either name, and
//     every object it writes stores names.UninstallFinalizer. Both operators then guard the same
//     releases with the same finalizer, and a resource that still stores the old name is moved to
//     the new one by the next write of its finalizers;
//   - the status the plugins' updater writes, which would drop every field it does not own and
//     publish the release's manifest (status.PluginWrites says how each Update is prepared).

package controller

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
	"github.com/example/myproxy-operator/internal/status"
)

// reconcilerClient returns c as the reconciler's client of gvk's objects: their uninstall
// finalizer translated, and their status Updates prepared by writes.
func reconcilerClient(c client.Client, gvk schema.GroupVersionKind, writes status.PluginWrites) client.Client {
	return &translating{Client: c, gvk: gvk, writes: writes}
}

type translating struct {
	client.Client
	gvk    schema.GroupVersionKind
	writes status.PluginWrites
}

// rename replaces every finalizer among from by to, once, in place of the first; obj is left
// untouched when that changes nothing.
func rename(obj client.Object, to string, from ...string) {
	old := obj.GetFinalizers()
	named := func(f string) bool { return f == to || slices.Contains(from, f) }
	first := slices.IndexFunc(old, named)
	if first < 0 {
		return
	}
	// Every finalizer before the first named one stays where it is.
	out := slices.Insert(slices.DeleteFunc(slices.Clone(old), named), first, to)
	if !slices.Equal(out, old) {
		obj.SetFinalizers(out)
	}
}

func (t *translating) ours(obj client.Object) bool {
	return obj.GetObjectKind().GroupVersionKind() == t.gvk
}

// around translates obj to the stored name for the call and back for the reconciler after it,
// whether or not the call succeeded (a failed write leaves obj as the reconciler built it).
func (t *translating) around(obj client.Object, call func() error) error {
	if !t.ours(obj) {
		return call()
	}
	rename(obj, names.UninstallFinalizer, names.ReconcilerFinalizer)
	defer rename(obj, names.ReconcilerFinalizer, names.UninstallFinalizer)
	return call()
}

func (t *translating) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := t.Client.Get(ctx, key, obj, opts...)
	if err == nil && t.ours(obj) {
		rename(obj, names.ReconcilerFinalizer, names.UninstallFinalizer)
	}
	return err
}

func (t *translating) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return t.around(obj, func() error { return t.Client.Create(ctx, obj, opts...) })
}

func (t *translating) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return t.around(obj, func() error { return t.Client.Update(ctx, obj, opts...) })
}

func (t *translating) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return t.around(obj, func() error { return t.Client.Patch(ctx, obj, patch, opts...) })
}

func (t *translating) Status() client.SubResourceWriter {
	return &statusWriter{SubResourceWriter: t.Client.Status(), t: t}
}

// statusWriter prepares the updater's status Updates, and translates what a status write
// returns: the stored object, finalizers included.
type statusWriter struct {
	client.SubResourceWriter
	t *translating
}

func (w *statusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return w.t.around(obj, func() error {
		// Only a plain write of the stored status is known to change nothing: options (a dry run,
		// a field manager) give the write another meaning, and it is sent as asked.
		if !w.t.writes.Prepare(ctx, obj) && len(opts) == 0 {
			return nil
		}
		return w.SubResourceWriter.Update(ctx, obj, opts...)
	})
}

func (w *statusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return w.t.around(obj, func() error { return w.SubResourceWriter.Patch(ctx, obj, patch, opts...) })
}

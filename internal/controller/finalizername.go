// finalizerNames stores the uninstall finalizer under the name operator-sdk's
// helm-operator uses, while helm-operator-plugins' reconciler keeps working with its own.
//
// The reconciler adds, checks and removes the finalizer "uninstall-helm-release", a name it
// does not let a user choose; the apiserver warns that it is not domain-qualified, and the
// stock operator-sdk helm-operator knows it not: a custom resource moved from one operator to
// the other would keep a finalizer nobody removes and hang in Terminating. The reconciler takes
// its client as an option; finalizerNames wraps it so that the name is translated at the boundary:
// every object of the kind the reconciler reads or gets back from a write carries
// names.ReconcilerFinalizer wherever the stored object has either name, and every object it
// writes stores names.UninstallFinalizer. Both operators then guard the same releases with the
// same finalizer, and a resource that still stores the old name is moved to the new one by
// the next write of its finalizers.

package controller

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/example/myproxy-operator/internal/names"
)

// finalizerNames returns c, translating the uninstall finalizer of gvk's objects as the package says.
func finalizerNames(c client.Client, gvk schema.GroupVersionKind) client.Client {
	return &translating{Client: c, gvk: gvk}
}

type translating struct {
	client.Client
	gvk schema.GroupVersionKind
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

// statusWriter translates what a status write returns: the stored object, finalizers included.
type statusWriter struct {
	client.SubResourceWriter
	t *translating
}

func (w *statusWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return w.t.around(obj, func() error { return w.SubResourceWriter.Update(ctx, obj, opts...) })
}

func (w *statusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return w.t.around(obj, func() error { return w.SubResourceWriter.Patch(ctx, obj, patch, opts...) })
}

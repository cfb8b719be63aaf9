package actionclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/utils/ptr"

	"github.com/example/myproxy-operator/internal/helmconfig"
)

// unchangedStep keeps the deployed revision, which renders from the inputs at hand: it records
// on the release record the digests the check's dry run proved (so that a restarted operator
// knows them too; a failure costs only another dry run after a restart), then corrects drift.
type unchangedStep struct{ r *reconcile }

func (s unchangedStep) run() error {
	r, cur := s.r, s.r.known.cur
	if r.known.rendered != nil {
		reads := r.reads.Reads()
		r.c.o.Digests.remember(r, cur.Version, reads)
		if proved := proven(cur, r.known.dg, len(reads)); proved != nil {
			if _, err := act(r, func() (any, error) { return nil, r.cfg.Releases.Update(proved) }); err != nil {
				r.log.V(1).Info("cannot record the digests proven on the release", "error", err.Error())
			}
			r.stale = true
		}
	}
	start := time.Now()
	_, err := act(r, func() (any, error) { return nil, r.correctDrift(cur) })
	r.c.report(r.obj, Outcome{Action: ActionReconcile, Result: cur, Err: err}, start)
	return err
}

// correctDrift sets back what changed in the objects of rel since they were applied, as
// helm-operator-plugins' drift correction does, with the method rel was applied with: a
// missing object is created; a field the chart sets that someone changed is set back (a
// strategic three-way merge, or a JSON patch for kinds without one, with the chart's object as
// both its past and its future, so that fields the chart does not set stay with whoever set
// them); a release applied server-side is applied again, taking the changed fields back. Every
// object it writes carries the release's ownership metadata, as Helm writes it. An object whose
// drift is nothing is not written: where the patch is not empty, the write is first sent as a
// dry run, and sent only if it would change the object (the apiserver defaults what the chart
// leaves out, and turns a Secret's stringData into data). Nor is one another release owns; a
// write carries the UID of the object read (or, to create, the version of an absent one), so
// that an object another process made again meanwhile is left as it is.
//
// Each object is read from the cache of release objects where it holds it (fast path
// cached-checks), else from the apiserver. A change the cache has not taken in yet is no change
// missed: the cache takes in an object's change before the event wakes its custom resource, and
// the reconcile that event brings reads it. The write carries the UID of the object read.
func (r *reconcile) correctDrift(rel *release.Release) error {
	defer helmconfig.SetAction(r.cfg, helmconfig.Action{Answers: helmconfig.FromCache})()
	objs, err := r.cfg.KubeClient.Build(strings.NewReader(rel.Manifest), false)
	if err != nil {
		return err
	}
	serverSide := rel.ApplyMethod == string(release.ApplyMethodServerSideApply)
	return objs.Visit(func(expected *resource.Info, err error) error {
		if err != nil {
			return fmt.Errorf("visit error: %w", err)
		}
		if err := helmconfig.SetOwnership(expected.Object, rel.Name, rel.Namespace); err != nil {
			return err
		}
		helper := resource.NewHelper(expected.Client, expected.Mapping).WithFieldManager(helmconfig.FieldManager)
		live, err := helper.Get(expected.Namespace, expected.Name)
		switch {
		case apierrors.IsNotFound(err) && serverSide:
			return write(helper, expected, types.ApplyPatchType, nil, nil, "")
		case apierrors.IsNotFound(err):
			if _, err := helper.Create(expected.Namespace, true, expected.Object); err != nil {
				return fmt.Errorf("create error: %w", err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("could not get object: %w", err)
		}
		m, err := meta.Accessor(live)
		if err != nil {
			return err
		}
		if err := helmconfig.Owns(m, expected.Mapping.GroupVersionKind.Kind, rel.Name, rel.Namespace); err != nil {
			return err
		}
		patch, patchType, err := driftPatch(live, expected)
		switch {
		case err != nil:
			return fmt.Errorf("error creating patch: %w", err)
		case patch == nil:
			return nil
		case serverSide:
			patch, patchType = nil, types.ApplyPatchType
		}
		return write(helper, expected, patchType, patch, live, m.GetUID())
	})
}

// write sends patch of type (an apply of the whole expected object, when the type is apply)
// conditional on uid, the UID of live, the object read (on its absence, when live is nil), first
// as a dry run: nothing is written when the object would come out as it is.
func write(helper *resource.Helper, expected *resource.Info, patchType types.PatchType, patch []byte,
	live runtime.Object, uid types.UID) error {
	var force *bool
	switch patchType {
	case types.ApplyPatchType:
		force = ptr.To(true) // the chart's fields are taken back from whoever changed them
		m, err := meta.Accessor(expected.Object)
		if err != nil {
			return err
		}
		m.SetUID(uid)
		if uid == "" {
			m.SetResourceVersion(helmconfig.AbsentVersion)
		}
		if patch, err = runtime.Encode(unstructured.UnstructuredJSONScheme, expected.Object); err != nil {
			return err
		}
	case types.JSONPatchType:
		patch = append([]byte(`[{"op":"test","path":"/metadata/uid","value":"`+string(uid)+`"},`), patch[1:]...)
	default:
		var merge map[string]any
		if err := json.Unmarshal(patch, &merge); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(merge, string(uid), "metadata", "uid"); err != nil {
			return err
		}
		var err error
		if patch, err = json.Marshal(merge); err != nil {
			return err
		}
	}
	// Helper.Patch sets its options' dry run and never clears it: each call gets its own.
	send := func(dryRun bool) (runtime.Object, error) {
		out, err := helper.DryRun(dryRun).Patch(expected.Namespace, expected.Name, patchType, patch, &metav1.PatchOptions{Force: force})
		if err != nil {
			return nil, fmt.Errorf("patch error: %w", err)
		}
		return out, nil
	}
	if live != nil {
		after, err := send(true)
		if err != nil || sameObject(live, after) {
			return err
		}
	}
	_, err := send(false)
	return err
}

// sameObject reports whether two versions of an object hold the same, but for the bookkeeping
// of who wrote which field.
func sameObject(a, b runtime.Object) bool {
	strip := func(o runtime.Object) map[string]any {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil
		}
		unstructured.RemoveNestedField(u, "metadata", "managedFields")
		return u
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// driftPatch returns the patch that brings the fields expected sets back into live; nil when
// none differs.
func driftPatch(live runtime.Object, expected *resource.Info) ([]byte, types.PatchType, error) {
	liveJSON, err := json.Marshal(live)
	if err != nil {
		return nil, "", err
	}
	expectedJSON, err := json.Marshal(expected.Object)
	if err != nil {
		return nil, "", err
	}
	versioned := kube.AsVersioned(expected)
	_, isUnstructured := versioned.(runtime.Unstructured)
	_, isCRD := versioned.(*apiextensionsv1.CustomResourceDefinition)
	if isUnstructured || isCRD {
		// Kinds without a strategic merge: a JSON patch of what expected sets. Removals are of
		// fields the cluster or someone else added, which stay.
		ops, err := jsonpatch.CreatePatch(liveJSON, expectedJSON)
		if err != nil {
			return nil, "", err
		}
		kept := slices.DeleteFunc(ops, func(op jsonpatch.JsonPatchOperation) bool {
			return op.Operation == "remove" || op.Operation == "add" && op.Value == nil
		})
		if len(kept) == 0 {
			return nil, "", nil
		}
		patch, err := json.Marshal(kept)
		return patch, types.JSONPatchType, err
	}
	meta, err := strategicpatch.NewPatchMetaFromStruct(versioned)
	if err != nil {
		return nil, "", err
	}
	patch, err := strategicpatch.CreateThreeWayMergePatch(expectedJSON, expectedJSON, liveJSON, meta, true)
	if err != nil || len(patch) == 0 || bytes.Equal(patch, []byte("{}")) {
		return nil, "", err
	}
	return patch, types.StrategicMergePatchType, nil
}

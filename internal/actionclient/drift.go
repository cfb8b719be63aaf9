package actionclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/utils/ptr"

	"github.com/example/myproxy-operator/internal/helmconfig"
)

// correctDrift sets back what changed in the objects of rel since they were applied, as
// helm-operator-plugins' drift correction does, with the method rel was applied with: a
// missing object is created; a field the chart sets that someone changed is set back (a
// strategic three-way merge, or a JSON patch for kinds without one, with the chart's object as
// both its past and its future, so that fields the chart does not set stay with whoever set
// them); a release applied server-side is applied again, taking the changed fields back. Every
// object it writes carries the release's ownership metadata, as Helm writes it. An object
// whose drift is nothing is not written, nor one another release owns (helmconfig.Owns, checked
// under helmconfig.Lock).
func (r *reconcile) correctDrift(rel *release.Release) error {
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
		defer helmconfig.Lock(kube.ResourceList{expected})() // no other release takes it meanwhile
		helper := resource.NewHelper(expected.Client, expected.Mapping).WithFieldManager(helmconfig.FieldManager)
		live, err := helper.Get(expected.Namespace, expected.Name)
		switch {
		case apierrors.IsNotFound(err) && serverSide:
			return apply(helper, expected)
		case apierrors.IsNotFound(err):
			if _, err := helper.Create(expected.Namespace, true, expected.Object); err != nil {
				return fmt.Errorf("create error: %w", err)
			}
			return nil
		case err != nil:
			return fmt.Errorf("could not get object: %w", err)
		}
		if err := helmconfig.Owns(live, rel.Name, rel.Namespace); err != nil {
			return fmt.Errorf("%s %q: %w", expected.Mapping.GroupVersionKind.Kind, expected.Name, err)
		}
		patch, patchType, err := driftPatch(live, expected)
		switch {
		case err != nil:
			return fmt.Errorf("error creating patch: %w", err)
		case patch == nil:
			return nil
		case serverSide:
			return apply(helper, expected)
		}
		if _, err := helper.Patch(expected.Namespace, expected.Name, patchType, patch, &metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("patch error: %w", err)
		}
		return nil
	})
}

// apply applies the whole object server-side, taking every field it sets from other managers.
func apply(helper *resource.Helper, expected *resource.Info) error {
	data, err := runtime.Encode(unstructured.UnstructuredJSONScheme, expected.Object)
	if err != nil {
		return err
	}
	_, err = helper.Patch(expected.Namespace, expected.Name, types.ApplyPatchType, data, &metav1.PatchOptions{Force: ptr.To(true)})
	if err != nil {
		return fmt.Errorf("apply error: %w", err)
	}
	return nil
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
		var kept []jsonpatch.JsonPatchOperation
		for _, op := range ops {
			if op.Operation != "remove" && (op.Operation != "add" || op.Value != nil) {
				kept = append(kept, op)
			}
		}
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

package crdgen

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"
)

// ValueChanges says what the apiserver would do to a spec stored under the storage version of
// crd, as it reads it: fields it prunes (the schema has no place for them), nulls it drops, and
// defaults it fills in. Nothing: the values stay as they are.
func ValueChanges(crd *apiextv1.CustomResourceDefinition, spec map[string]any) ([]string, error) {
	var storage *apiextv1.CustomResourceDefinitionVersion
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Storage {
			storage = &crd.Spec.Versions[i]
		}
	}
	if storage == nil || storage.Schema == nil {
		return nil, fmt.Errorf("CRD %s has no storage version with a schema", crd.Name)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(storage.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
		return nil, err
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		return nil, err
	}
	was := map[string]any{"spec": runtime.DeepCopyJSON(spec)}
	obj := map[string]any{"apiVersion": crd.Spec.Group + "/" + storage.Name, "kind": crd.Spec.Names.Kind,
		"metadata": map[string]any{}, "spec": runtime.DeepCopyJSON(spec)}
	var out []string
	for _, p := range pruning.PruneWithOptions(obj, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		out = append(out, p+": pruned (the schema has no place for it)")
	}
	defaulting.PruneNonNullableNullsWithoutDefaults(obj, s)
	defaulting.Default(obj, s)
	is := map[string]any{"spec": obj["spec"]}
	out = append(out, differences(was, is, "")...)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// differences lists the paths where is differs from was: a value dropped, set or changed.
func differences(was, is map[string]any, path string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(was)) {
		p := strings.TrimPrefix(path+"."+k, ".")
		switch now, ok := is[k]; {
		case !ok && was[k] == nil:
			out = append(out, p+": null dropped (the schema does not take null there)")
		case !ok:
			// pruned: said by PruneWithOptions
		default:
			a, aok := was[k].(map[string]any)
			b, bok := now.(map[string]any)
			if aok && bok {
				out = append(out, differences(a, b, p)...)
			} else if !reflect.DeepEqual(was[k], now) {
				out = append(out, fmt.Sprintf("%s: %s becomes %s", p, raw(was[k]), raw(now)))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(is)) {
		if _, ok := was[k]; !ok {
			out = append(out, fmt.Sprintf("%s: defaulted to %s", strings.TrimPrefix(path+"."+k, "."), raw(is[k])))
		}
	}
	return out
}

func raw(v any) string { b, _ := json.Marshal(v); return string(b) }

package manifestgen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Committed reads the CRDs make manifests wrote into configDir before: a kind's API as it was
// last published.
func Committed(configDir string) Previous {
	return func(name string) (*apiextv1.CustomResourceDefinition, error) {
		plural, group, _ := strings.Cut(name, ".")
		path := filepath.Join(configDir, CRDDir, group+"_"+plural+".yaml")
		raw, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		crd := &apiextv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return crd, nil
	}
}

// Served reads the CRDs the cluster of c serves: a kind's API as its stored resources know it,
// with the versions they are stored at (status.storedVersions), which a CRD must keep.
func Served(c client.Client) Previous {
	return func(name string) (*apiextv1.CustomResourceDefinition, error) {
		crd := &apiextv1.CustomResourceDefinition{}
		err := c.Get(context.Background(), client.ObjectKey{Name: name}, crd)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the CRD %s the cluster serves: %w", name, err)
		}
		for _, v := range crd.Status.StoredVersions {
			found := false
			for i := range crd.Spec.Versions {
				found = found || crd.Spec.Versions[i].Name == v
			}
			if !found {
				return nil, fmt.Errorf("CRD %s: resources are stored at %s, which it no longer lists", name, v)
			}
		}
		// A stored version counts as served: the new CRD must keep it until the stored resources
		// are migrated (the operator does, then trims status.storedVersions).
		for i := range crd.Spec.Versions {
			for _, v := range crd.Status.StoredVersions {
				if crd.Spec.Versions[i].Name == v {
					crd.Spec.Versions[i].Served = true
				}
			}
		}
		return crd, nil
	}
}

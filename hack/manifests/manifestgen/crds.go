package manifestgen

import (
	"fmt"
	"path/filepath"
	"sort"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/releaseutil"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/example/myproxy-operator/hack/manifests/crdgen"
)

// chartCRDs returns the CustomResourceDefinitions of a chart's crds/ folders (its own and its
// subcharts'), by the file name they get below crd/bases. A release never installs them (the
// operator installs and upgrades with SkipCRDs: a tenant's resource must not define or change
// an API of the cluster); `make install` and `make deploy` install them with the kinds' own
// CRDs, as an administrator's act. Each must pass the apiserver's own CRD validation.
func chartCRDs(chartDir string) (map[string][]byte, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, c := range ch.CRDObjects() {
		source := filepath.ToSlash(filepath.Join(chartDir, c.Filename))
		docs := releaseutil.SplitManifests(string(c.File.Data))
		keys := make([]string, 0, len(docs))
		for k := range docs {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			var crd apiextv1.CustomResourceDefinition
			if err := yaml.Unmarshal([]byte(docs[k]), &crd); err != nil {
				return nil, fmt.Errorf("%s: %w", source, err)
			}
			if crd.Kind == "" && crd.Name == "" {
				continue // an empty document
			}
			if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s: %s %s %q: a crds/ folder holds apiextensions.k8s.io/v1 CustomResourceDefinitions only",
					source, crd.APIVersion, crd.Kind, crd.Name)
			}
			if err := crdgen.Validate(&crd); err != nil {
				return nil, fmt.Errorf("%s: %w", source, err)
			}
			name := fmt.Sprintf("%s_%s.yaml", crd.Spec.Group, crd.Spec.Names.Plural)
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("%s: the CRD %s is defined twice in the chart's crds/ folders", source, crd.Name)
			}
			header := fmt.Sprintf("# Copied by `make manifests` from %s; installed by make install, never by a release.\n", source)
			out[name] = append([]byte(header), []byte(docs[k]+"\n")...)
		}
	}
	return out, nil
}

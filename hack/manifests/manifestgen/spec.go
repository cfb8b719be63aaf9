package manifestgen

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/example/myproxy-operator/hack/manifests/crdgen"
	"github.com/example/myproxy-operator/internal/chartapi"
)

// specSchema is where a kind's spec schema comes from: the JSON schema document (nil for an
// open spec) and the chart's default values, the file it was made from, and why, for `make
// manifests` to say.
type specSchema struct {
	spec     crdgen.Spec
	source   string
	why      string
	inferred bool
}

// SpecSchemaDocument returns the JSON schema document the spec schema of the kind a chart serves
// is made from (nil for an open spec): what the CRD checks at kubectl apply, before Helm checks
// the chart's own values.schema.json.
func SpecSchemaDocument(chartDir string) ([]byte, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	k, err := chartapi.Load(chartDir)
	if err != nil {
		return nil, err
	}
	s, err := specSchemaOf(chartDir, ch, k)
	return s.spec.Schema, err
}

// specSchemaOf chooses a kind's spec schema: kind.yaml's specSchema, else the chart's
// values.schema.json when it has one, else one inferred from values.yaml.
func specSchemaOf(chartDir string, ch *chart.Chart, k *chartapi.Kind) (specSchema, error) {
	schemaPath, valuesPath := filepath.Join(chartDir, valuesSchemaFile), filepath.Join(chartDir, valuesFile)
	choice, chosen := k.SpecSchema, "kind.yaml specSchema: "+k.SpecSchema
	if choice == "" {
		choice, chosen = chartapi.SpecInferred, "the chart has no "+valuesSchemaFile
		if _, err := os.Stat(schemaPath); err == nil {
			choice, chosen = chartapi.SpecFromValuesSchema, "the chart's own"
		}
	}
	// Helm coalesces these into the values before it validates them against the schema.
	defaults, err := chartutil.CoalesceValues(ch, map[string]any{})
	if err != nil {
		return specSchema{}, fmt.Errorf("%s: %w", chartDir, err)
	}
	switch choice {
	case chartapi.SpecOpen:
		if k.Status.Scale != nil {
			return specSchema{}, fmt.Errorf("%s: specSchema open: the scale subresource needs a schema with a default at %s", k.File, k.Status.Scale.SpecReplicasPath)
		}
		return specSchema{source: valuesPath, why: fmt.Sprintf("open, any spec as operator-sdk writes it (%s)", chosen)}, nil
	case chartapi.SpecInferred:
		values, err := os.ReadFile(valuesPath)
		if errors.Is(err, os.ErrNotExist) {
			values = nil // a chart without values: an empty spec
		} else if err != nil {
			return specSchema{}, err
		}
		inferred, err := crdgen.InferSchema(values)
		if err != nil {
			return specSchema{}, fmt.Errorf("%s: %w", valuesPath, err)
		}
		return specSchema{spec: crdgen.Spec{Schema: inferred, Defaults: defaults}, source: valuesPath, inferred: true,
			why: fmt.Sprintf("inferred from %s: the types of its defaults, its comments as descriptions (%s)", valuesPath, chosen)}, nil
	default:
		raw, err := os.ReadFile(schemaPath)
		if err != nil {
			return specSchema{}, fmt.Errorf("%s: %w", k.File, err)
		}
		return specSchema{spec: crdgen.Spec{Schema: raw, Defaults: defaults}, source: schemaPath,
			why: fmt.Sprintf("from %s (%s)", schemaPath, chosen)}, nil
	}
}

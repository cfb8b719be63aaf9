// Package chartapi reads what a chart declares about the custom resource kind it serves, from
// the chart's `kind.yaml`: the CRD's names, printer columns and rules, the status fields and
// conditions (CEL expressions over the custom resource and the live objects of its release), the
// scale subresource, and the checks its values get before a rendering.
//
// The chart is the one place a chart author edits; the Go code here knows no chart. A
// declaration is checked when it is loaded (at the operator's start and by `make manifests`):
// every expression must compile, and must evaluate to its declared type against the chart's own
// renderings (default values and each ci/*-values.yaml) both before the objects exist and
// before they have a status. An error names the file and line.
package chartapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/example/myproxy-operator/internal/names"
)

// FileName is the declaration's file in a chart's directory.
const FileName = "kind.yaml"

// Kind is a chart's kind.yaml. Every part is optional: a chart without the file gets a CRD
// with the kind's default names, a Ready condition and no other status field.
type Kind struct {
	// Names beyond the kind itself, which watches.yaml gives.
	Names Names `yaml:"names"`
	// Description of the custom resource, for `kubectl explain`.
	Description string `yaml:"description"`
	// Validations are CEL rules on the whole object (x-kubernetes-validations), such as rules
	// on metadata.name.
	Validations []Validation `yaml:"validations"`
	// PrinterColumns are extra `kubectl get` columns, after the Ready one every kind gets.
	PrinterColumns []PrinterColumn `yaml:"printerColumns"`
	Status         Status          `yaml:"status"`
	// Checks are what values must satisfy beyond the schema, against other objects.
	Checks []Check `yaml:"checks"`
	// SpecSchema chooses where the CRD's spec schema comes from: SpecFromValuesSchema (the
	// default for a chart that has a values.schema.json), SpecInferred (from values.yaml; the
	// default for one that has none) or SpecOpen (any spec, as operator-sdk writes it).
	SpecSchema string `yaml:"specSchema"`
	// Versions are the kind's API versions, newest first, and how the spec of each older one
	// converts (versions.go); none: the one version watches.yaml names.
	Versions []Version `yaml:"versions"`

	// File is the path the declaration was read from ("" when the chart has none).
	File string `yaml:"-"`
}

// Names are the CRD's names; plural and singular default from the kind.
type Names struct {
	Plural     string   `yaml:"plural"`
	Singular   string   `yaml:"singular"`
	ShortNames []string `yaml:"shortNames"`
	Categories []string `yaml:"categories"`
}

// Validation is one x-kubernetes-validations rule.
type Validation struct {
	Rule    string `yaml:"rule"`
	Message string `yaml:"message"`
}

// PrinterColumn is one additionalPrinterColumns entry.
type PrinterColumn struct {
	Name        string `yaml:"name"`
	Type        string `yaml:"type"`
	Description string `yaml:"description"`
	JSONPath    string `yaml:"jsonPath"`
}

// Status declares the status fields and conditions the operator writes for the kind.
type Status struct {
	// Variables are named expressions, evaluated in order, that the others read as
	// variables.<name> (as in a ValidatingAdmissionPolicy).
	Variables []Variable `yaml:"variables"`
	// Fields, by name: status.<name> is the value of the expression.
	Fields map[string]Field `yaml:"fields"`
	// Conditions the operator sets besides the Helm reconciler's and Ready.
	Conditions []Condition `yaml:"conditions"`
	// Scale, when set, makes the CRD serve the scale subresource (kubectl scale, HPAs).
	Scale *Scale `yaml:"scale"`
}

// Variable is one named expression.
type Variable struct {
	Name       string `yaml:"name"`
	Expression Expr   `yaml:"expression"`
}

// Field is one status field.
type Field struct {
	// Type is the JSON schema type of the value: integer, number, string, boolean, object, array.
	Type        string `yaml:"type"`
	Description string `yaml:"description"`
	// Expression computes the value; a result of null or optional.none() leaves the field out.
	Expression Expr `yaml:"expression"`
}

// Condition is one status condition; its expressions give its status (a boolean), reason and
// message.
type Condition struct {
	Type        string `yaml:"type"`
	Description string `yaml:"description"`
	Status      Expr   `yaml:"status"`
	Reason      Expr   `yaml:"reason"`
	Message     Expr   `yaml:"message"`
	// GatesRollout makes the condition part of a release's health in a chart rollout: a release
	// of a wave counts as healthy only once it is Ready and this condition is True.
	GatesRollout bool `yaml:"gatesRollout"`
}

// Scale names the fields of the scale subresource.
type Scale struct {
	// SpecReplicasPath is the path of the desired replicas in the spec, such as .spec.replicas;
	// values.schema.json must give it a default.
	SpecReplicasPath string `yaml:"specReplicasPath"`
	// StatusReplicas and LabelSelector name declared status fields (integer and string).
	StatusReplicas string `yaml:"statusReplicas"`
	LabelSelector  string `yaml:"labelSelector"`
}

// Check is one check of the values; exactly one kind of check is set.
type Check struct {
	Secret *SecretCheck `yaml:"secret"`
	Line   int          `yaml:"-"`
}

// SecretCheck requires the Secret that a value names to exist in the custom resource's
// namespace, with the given type and keys; with TLSKeyPair, its tls.crt and tls.key must be a
// PEM certificate and matching key, valid now. An empty or absent value passes.
type SecretCheck struct {
	// Value is the dotted path of the value that names the Secret, such as tls.secretName.
	Value      string   `yaml:"value"`
	Type       string   `yaml:"type"`
	Keys       []string `yaml:"keys"`
	TLSKeyPair bool     `yaml:"tlsKeyPair"`
}

// Expr is a CEL expression and the line of the declaration it was read from.
type Expr struct {
	Source string
	Line   int
}

// UnmarshalYAML keeps the line of the expression.
func (e *Expr) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: an expression must be a string", n.Line)
	}
	e.Source, e.Line = n.Value, n.Line
	return nil
}

// UnmarshalYAML keeps the line of the check. The node is decoded again on its own to refuse
// unknown keys: yaml.v3 applies KnownFields only to a Decoder's top level.
func (c *Check) UnmarshalYAML(n *yaml.Node) error {
	type plain Check // without this method
	raw, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	if err := decodeStrict(raw, (*plain)(c)); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	c.Line = n.Line
	return nil
}

// decodeStrict decodes a YAML document refusing unknown keys.
func decodeStrict(raw []byte, out any) error {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	return dec.Decode(out)
}

// Load reads the declaration of the chart in chartDir; a chart without one gets the zero Kind.
func Load(chartDir string) (*Kind, error) {
	path := filepath.Join(chartDir, FileName)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Kind{}, nil
	}
	if err != nil {
		return nil, err
	}
	k, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	k.File = path
	for i := range k.Versions {
		if err := k.Versions[i].loadPublished(chartDir); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// LoadCompiled loads and compiles the declaration of the chart in chartDir: what the operator
// does at start. Its checks against the chart's renderings run in `make manifests`.
func LoadCompiled(chartDir string) (*Compiled, error) {
	k, err := Load(chartDir)
	if err != nil {
		return nil, err
	}
	return Compile(k)
}

// The sources of a spec schema (Kind.SpecSchema).
const (
	SpecFromValuesSchema = "values.schema.json"
	SpecInferred         = "inferred"
	SpecOpen             = "open"
)

// conditionType is the form of a condition type or reason: UpperCamelCase.
var conditionType = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// Parse decodes a declaration, refusing unknown keys. Its shape (names, types, reserved fields
// and conditions) is checked by `make manifests` (hack/manifests/chartrender); its expressions
// by Compile.
func Parse(raw []byte) (*Kind, error) {
	var k Kind
	if err := decodeStrict(raw, &k); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return &k, nil
}

// FieldNames returns the declared field names, sorted.
func (s Status) FieldNames() []string { return slices.Sorted(maps.Keys(s.Fields)) }

// ConditionTypes returns the declared condition types and Ready, which every kind has.
func (s Status) ConditionTypes() []string {
	types := []string{names.ConditionReady} // every kind gets Ready
	for _, c := range s.Conditions {
		types = append(types, c.Type)
	}
	return types
}

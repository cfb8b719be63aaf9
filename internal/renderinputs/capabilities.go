package renderinputs

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"text/template/parse"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// capabilitiesField is the name under which Helm hands templates the cluster's capabilities.
const capabilitiesField = "Capabilities"

// CapabilityUse says which of the cluster's capabilities a chart's rendering may depend on.
// HelmVersion is not listed: it is part of CodeVersion.
type CapabilityUse struct {
	KubeVersion bool // .Capabilities.KubeVersion, or a kubeVersion constraint in Chart.yaml
	APIVersions bool // .Capabilities.APIVersions
	// ThroughTpl: the chart renders strings with `tpl`; whether those strings read
	// .Capabilities depends on the values, and Reads answers per rendering.
	ThroughTpl bool
	// filesMention: a file of the chart (which `tpl` may render) mentions .Capabilities.
	filesMention bool
}

// Any reports whether a change of the cluster's API may change a rendering of this chart.
func (u CapabilityUse) Any() bool { return u.KubeVersion || u.APIVersions || u.ThroughTpl }

// Reads returns the use for one rendering: with `tpl`, a chart file or a value that mentions
// .Capabilities counts as reading all of it (valuesJSON is the values, encoded).
func (u CapabilityUse) Reads(valuesJSON []byte) CapabilityUse {
	if u.ThroughTpl && (u.filesMention || bytes.Contains(valuesJSON, []byte(capabilitiesField))) {
		u.KubeVersion, u.APIVersions = true, true
	}
	return u
}

// AnalyseChart parses every template of the chart and its dependencies and reports which
// capabilities they refer to. It errs on the side of "reads": a reference to .Capabilities as
// a whole (kept in a variable, passed to a function, indexed by name) counts as reading all of
// it. A template that does not parse is an error: Helm would not render it either.
func AnalyseChart(chrt *chart.Chart) (CapabilityUse, error) {
	var use CapabilityUse
	var walkChart func(c *chart.Chart) error
	walkChart = func(c *chart.Chart) error {
		if c.Metadata != nil && c.Metadata.KubeVersion != "" {
			use.KubeVersion = true
		}
		for _, t := range c.Templates {
			// Parsed (with the templates it defines) as Helm's engine does, but without knowing the
			// functions: only the structure matters here.
			trees := map[string]*parse.Tree{}
			p := parse.New(t.Name)
			p.Mode = parse.SkipFuncCheck
			if _, err := p.Parse(string(t.Data), "", "", trees); err != nil {
				return fmt.Errorf("chart %s: %w", c.Name(), err)
			}
			for _, tree := range trees {
				walk(tree.Root, &use)
			}
		}
		if slices.ContainsFunc(c.Files, func(f *chart.File) bool { return bytes.Contains(f.Data, []byte(capabilitiesField)) }) {
			use.filesMention = true
		}
		for _, dep := range c.Dependencies() {
			if err := walkChart(dep); err != nil {
				return err
			}
		}
		return nil
	}
	return use, walkChart(chrt)
}

// walk records in use every reference to the capabilities below n.
func walk(n parse.Node, use *CapabilityUse) {
	switch n := n.(type) {
	case nil:
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walk(c, use)
		}
	case *parse.ActionNode:
		walk(n.Pipe, use)
	case *parse.IfNode:
		walkBranch(&n.BranchNode, use)
	case *parse.RangeNode:
		walkBranch(&n.BranchNode, use)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, use)
	case *parse.TemplateNode:
		walk(n.Pipe, use)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walk(c, use)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walk(a, use)
		}
	case *parse.ChainNode:
		walk(n.Node, use)
		fields(n.Field, use)
	case *parse.FieldNode:
		fields(n.Ident, use)
	case *parse.VariableNode:
		fields(n.Ident, use)
	case *parse.IdentifierNode:
		if n.Ident == "tpl" {
			use.ThroughTpl = true
		}
	case *parse.StringNode:
		if strings.Contains(n.Text, capabilitiesField) {
			use.KubeVersion, use.APIVersions = true, true // e.g. index $ "Capabilities"
		}
	}
}

func walkBranch(b *parse.BranchNode, use *CapabilityUse) {
	walk(b.Pipe, use)
	walk(b.List, use)
	walk(b.ElseList, use)
}

// fields records what a chain of field names reads of the capabilities.
func fields(ident []string, use *CapabilityUse) {
	for i, name := range ident {
		if name != capabilitiesField {
			continue
		}
		if i+1 == len(ident) {
			use.KubeVersion, use.APIVersions = true, true // the whole object escapes
			return
		}
		switch ident[i+1] {
		case "KubeVersion":
			use.KubeVersion = true
		case "APIVersions":
			use.APIVersions = true
		case "HelmVersion":
		default:
			use.KubeVersion, use.APIVersions = true, true
		}
	}
}

// CapabilitiesDigestInput is the part of caps that a rendering with this use reads, in a
// stable form to hash.
func CapabilitiesDigestInput(caps *chartutil.Capabilities, use CapabilityUse) string {
	if caps == nil {
		return ""
	}
	var b strings.Builder
	if use.KubeVersion {
		fmt.Fprintf(&b, "kube\x00%s\x00", caps.KubeVersion.Version)
	}
	if use.APIVersions {
		b.WriteString("apis\x00")
		for _, v := range slices.Sorted(slices.Values(caps.APIVersions)) {
			b.WriteString(v)
			b.WriteByte(0)
		}
	}
	return b.String()
}

package crdgen

import (
	"bufio"
	"bytes"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// commentedKey is a key written in a comment line: `# podAnnotations: {}`, `## limits:`.
var commentedKey = regexp.MustCompile(`^("[^"]+"|'[^']+'|[A-Za-z0-9_$][A-Za-z0-9_.$/-]*):(\s|$)`)

// paramAnnotation is the readme-generator convention (`## @param controller.resources.limits ...`),
// which names a key by its whole path.
var paramAnnotation = regexp.MustCompile(`^@(param|extra|skip)\s+([A-Za-z0-9_.$/-]+)`)

// CommentedKeys returns the paths of the keys values.yaml mentions only in comments: the keys of
// commented-out YAML (a real chart documents many values so: `# podAnnotations: {}` at the top
// level, `# limits:` under `resources:`) and those readme-generator's `@param` lines name. A
// commented key belongs where its YAML would be once uncommented, among the real keys around it.
// Keys inside list items are left out (the keys of list items are not checked).
func CommentedKeys(valuesYAML []byte) [][]string {
	type entry struct {
		line, col int
		path      []string // a real key's whole path
		key       string   // a commented key, placed by col
	}
	var entries []entry
	var doc yaml.Node
	if yaml.Unmarshal(valuesYAML, &doc) == nil && len(doc.Content) > 0 {
		var walk func(n *yaml.Node, path []string)
		walk = func(n *yaml.Node, path []string) {
			switch n.Kind {
			case yaml.MappingNode:
				for i := 0; i+1 < len(n.Content); i += 2 {
					k := n.Content[i]
					p := append(slices.Clone(path), k.Value)
					entries = append(entries, entry{line: k.Line, col: k.Column - 1, path: p})
					walk(n.Content[i+1], p)
				}
			case yaml.SequenceNode:
				for _, item := range n.Content {
					p := append(slices.Clone(path), "[]")
					if item.Kind == yaml.MappingNode { // its dash, between its parent's column and its keys'
						entries = append(entries, entry{line: item.Line, col: item.Column - 2, path: p})
					}
					walk(item, p)
				}
			}
		}
		walk(doc.Content[0], nil)
	}
	var out [][]string
	// dashCol is the column of the commented list item the lines below belong to, -1 outside one.
	dashCol := -1
	scanner := bufio.NewScanner(bytes.NewReader(valuesYAML))
	scanner.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for line := 1; scanner.Scan(); line++ {
		text := scanner.Text()
		trimmed := strings.TrimLeft(text, " \t")
		if !strings.HasPrefix(trimmed, "#") {
			dashCol = -1
			continue
		}
		rest := strings.TrimLeft(trimmed, "#")
		content := strings.TrimLeft(rest, " \t")
		if m := paramAnnotation.FindStringSubmatch(content); m != nil {
			if p := annotatedPath(m[2]); len(p) > 0 {
				out = append(out, p)
			}
			continue
		}
		// Commented-out YAML is written "# " and then the line as it was: the column the key
		// would have once uncommented is the marker's, plus its indentation less one space.
		col := len(text) - len(trimmed) + max(len(rest)-len(content)-1, 0)
		if dashCol >= 0 && col > dashCol {
			continue // within a commented list item: the keys of list items are not checked
		}
		dashCol = -1
		if strings.HasPrefix(content, "- ") || content == "-" {
			dashCol = col
			continue
		}
		if m := commentedKey.FindStringSubmatch(content); m != nil && !isProse(m[1], content[len(m[0]):]) {
			entries = append(entries, entry{line: line, col: col, key: strings.Trim(m[1], `"'`)})
		}
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return a.line - b.line })
	type open struct {
		col  int
		path []string
	}
	var stack []open
	for _, e := range entries {
		for len(stack) > 0 && stack[len(stack)-1].col >= e.col {
			stack = stack[:len(stack)-1]
		}
		path := e.path
		if path == nil {
			var parent []string
			if len(stack) > 0 {
				parent = stack[len(stack)-1].path
			}
			path = append(slices.Clone(parent), e.key)
			if !slices.Contains(path, "[]") {
				out = append(out, path)
			}
		}
		stack = append(stack, open{col: e.col, path: path})
	}
	return out
}

// proseWords are the words that start a comment's sentence rather than a commented-out key
// ("Note: ...", "E.g: ...").
var proseWords = []string{"E.g", "e.g", "Eg", "eg", "Example", "Examples", "Note", "NOTE", "Ref", "Refs", "See", "TODO", "Todo",
	"WARNING", "Warning", "Usage", "Default", "Defaults", "Deprecated", "DEPRECATED", "IMPORTANT", "Important", "SPDX-License-Identifier"}

// isProse tells whether a commented key is the start of a sentence: a word of proseWords, or one
// followed by a link ("ref: https://...").
func isProse(key, value string) bool {
	value = strings.TrimSpace(value)
	return slices.Contains(proseWords, key) || strings.HasPrefix(value, "http://") || strings.HasPrefix(value, "https://")
}

// annotatedPath is the path a readme-generator annotation names, up to its first list index
// (`a.b[0].c` is a.b).
func annotatedPath(dotted string) []string {
	if i := strings.IndexAny(dotted, "[*"); i >= 0 {
		dotted = dotted[:i]
	}
	dotted = strings.Trim(dotted, ".")
	if dotted == "" {
		return nil
	}
	return strings.Split(dotted, ".")
}

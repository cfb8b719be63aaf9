package crdgen

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template/parse"

	"helm.sh/helm/v3/pkg/chart"
)

// Reads is what the templates of a chart (and of its subcharts and library charts) read of
// the values, found by parsing them. Paths are from the
// root chart's values: a subchart's `.Values.x` is `<subchart>.x`, its `.Values.global.x` is
// `global.x`.
//
// The analysis follows the values through the template language: `.Values.a.b` and `$.Values`;
// variables bound to .Values, a subtree or the top-level object; `index .Values "a" "b"`, `get`,
// `dig`, `hasKey`, `pluck`, `pick`; `with` and `range`, which rebind dot; `dict` and `list`
// built around them; `default`, `coalesce`, `ternary`, `required`, `merge`, `deepCopy`, `and`
// and `or`, which return what they are given; and the named templates `include` and `template`
// run, with what they are handed (by any name, when the name is computed). A subtree handed to
// anything else whole (printed, `toYaml`, `tpl`, ranged over, another function) counts as read
// whole: any key below it may matter. `tpl` renders, with its context, every string of the
// chart's default values and every file of the chart a template names that holds `{{`, so the
// keys those read count as read; strings that a resource's own values bring are not known in
// advance (TplOfValues). A dependency's condition and tags count as read: Helm reads them.
type Reads struct {
	// Read are the paths a template reads (each with the paths above it).
	Read [][]string
	// Whole are the paths read whole: every key below them may be read.
	Whole [][]string
	// Why says, for each path of Whole, where a template reads it whole (file:line:col, and how).
	Why map[string]string
	// TplOfValues, when set, is where a template renders a string that is not a constant (a
	// value, as far as the analysis knows) with tpl, in a context that holds the values: a string
	// a resource's own values bring may then read any key.
	TplOfValues string
}

// readsState is the analysis under way.
type readsState struct {
	defines     map[string][]*parse.Tree // every named template of the chart tree, by name
	files       map[string]*parse.Tree   // every template file, by name (include runs them too)
	read        map[string][]string
	whole       map[string][]string
	why         map[string]string
	done        map[string]bool // named templates analysed, by name and argument
	tplDone     map[string]bool // tpl contexts analysed
	tplOfValues string
	// tplSources are the strings `tpl` may render: the default values' strings and the chart
	// files that hold template actions, parsed.
	tplSources []*parse.Tree
	depth      int
}

// maxDepth bounds the nesting of named templates followed, and maxRuns how many runs of named
// templates (by template and argument) are followed in all; past either, a named template
// reads its argument whole. A template that calls itself with ever new arguments ends so.
const (
	maxDepth = 48
	maxRuns  = 5000
)

// AnalyseReads finds what the templates of ch and its dependencies read of the values.
func AnalyseReads(ch *chart.Chart) (*Reads, error) {
	st := &readsState{defines: map[string][]*parse.Tree{}, files: map[string]*parse.Tree{}, read: map[string][]string{}, whole: map[string][]string{},
		why: map[string]string{}, done: map[string]bool{}, tplDone: map[string]bool{}}
	type file struct {
		tree  *parse.Tree
		scope []string
	}
	var files []file
	var walkChart func(c *chart.Chart, scope []string) error
	walkChart = func(c *chart.Chart, scope []string) error {
		var constants []string
		for _, t := range c.Templates {
			trees, err := parseTemplate(t.Name, string(t.Data))
			if err != nil {
				return fmt.Errorf("chart %s: %w", c.Name(), err)
			}
			for _, name := range slices.Sorted(maps.Keys(trees)) {
				tree := trees[name]
				constants = stringConstants(tree.Root, constants)
				if name == t.Name {
					files = append(files, file{tree: tree, scope: scope})
					st.files[name] = tree
					continue
				}
				st.defines[name] = append(st.defines[name], tree)
			}
		}
		// The files a template names (.Files.Get "x", .Files.Glob "x/*") may be rendered with tpl.
		for _, f := range c.Files {
			if bytes.Contains(f.Data, []byte("{{")) && referenced(f.Name, constants) {
				if trees, err := parseTemplate(f.Name, string(f.Data)); err == nil && trees[f.Name] != nil {
					st.tplSources = append(st.tplSources, trees[f.Name])
				}
			}
		}
		st.tplStrings(c.Values, c.Name()+" values")
		for _, d := range Dependencies(c) {
			if err := walkChart(d.Chart, append(slices.Clone(scope), d.Key)); err != nil {
				return err
			}
			for _, cond := range strings.Split(d.Condition, ",") {
				if cond = strings.TrimSpace(cond); cond != "" {
					st.markRead(append(slices.Clone(scope), strings.Split(cond, ".")...))
				}
			}
			for _, tag := range d.Tags { // tags are the top-level chart's
				st.markRead([]string{"tags", tag})
			}
		}
		return nil
	}
	if err := walkChart(ch, []string{}); err != nil {
		return nil, err
	}
	for _, f := range files {
		root := vals{{kind: avRoot, path: f.scope}}
		st.done[f.tree.Name+"\x00"+root.String()] = true
		st.walk(f.tree, f.tree.Root, &env{dot: root, dollar: root})
	}
	out := &Reads{Why: st.why, TplOfValues: st.tplOfValues}
	for _, k := range slices.Sorted(maps.Keys(st.read)) {
		out.Read = append(out.Read, st.read[k])
	}
	for _, k := range slices.Sorted(maps.Keys(st.whole)) {
		out.Whole = append(out.Whole, st.whole[k])
	}
	return out, nil
}

// parseTemplate parses one template file (with the templates it defines) as Helm's engine
// does, but without knowing the functions: only the structure matters here.
func parseTemplate(name, text string) (map[string]*parse.Tree, error) {
	trees := map[string]*parse.Tree{}
	t := parse.New(name)
	t.Mode = parse.SkipFuncCheck
	if _, err := t.Parse(text, "", "", trees); err != nil {
		return nil, err
	}
	return trees, nil
}

// stringConstants appends the string constants below n to out.
func stringConstants(n parse.Node, out []string) []string {
	switch n := n.(type) {
	case *parse.ListNode:
		if n != nil {
			for _, c := range n.Nodes {
				out = stringConstants(c, out)
			}
		}
	case *parse.ActionNode:
		out = stringConstants(n.Pipe, out)
	case *parse.IfNode:
		out = stringConstants(n.List, stringConstants(n.ElseList, stringConstants(n.Pipe, out)))
	case *parse.RangeNode:
		out = stringConstants(n.List, stringConstants(n.ElseList, stringConstants(n.Pipe, out)))
	case *parse.WithNode:
		out = stringConstants(n.List, stringConstants(n.ElseList, stringConstants(n.Pipe, out)))
	case *parse.TemplateNode:
		out = stringConstants(n.Pipe, out)
	case *parse.PipeNode:
		if n != nil {
			for _, c := range n.Cmds {
				out = stringConstants(c, out)
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			out = stringConstants(a, out)
		}
	case *parse.ChainNode:
		out = stringConstants(n.Node, out)
	case *parse.StringNode:
		out = append(out, n.Text)
	}
	return out
}

// referenced tells whether a chart file is named by one of the templates' string constants,
// as .Files.Get takes it or as a .Files.Glob pattern matches it.
func referenced(name string, constants []string) bool {
	for _, c := range constants {
		if c == name {
			return true
		}
		if i := strings.IndexAny(c, "*?[{"); i >= 0 {
			if ok, _ := path.Match(c, name); ok || strings.HasPrefix(name, c[:i]) && strings.Contains(c, "**") {
				return true
			}
		}
	}
	return false
}

// Dependency is a subchart as a parent's values see it: under Key (its alias, or its name).
type Dependency struct {
	Key       string
	Chart     *chart.Chart
	Condition string
	Tags      []string
}

// Dependencies returns the subcharts of c by the key their values have in c's values: each
// Chart.yaml dependency (an aliased one once per alias) and each vendored chart it does not list.
func Dependencies(c *chart.Chart) []Dependency {
	var out []Dependency
	listed := map[string]bool{}
	if c.Metadata != nil {
		for _, d := range c.Metadata.Dependencies {
			if d == nil {
				continue
			}
			for _, sub := range c.Dependencies() {
				if sub.Name() != d.Name {
					continue
				}
				key := d.Name
				if d.Alias != "" {
					key = d.Alias
				}
				listed[d.Name] = true
				out = append(out, Dependency{Key: key, Chart: sub, Condition: d.Condition, Tags: d.Tags})
				break
			}
		}
	}
	for _, sub := range c.Dependencies() {
		if !listed[sub.Name()] {
			out = append(out, Dependency{Key: sub.Name(), Chart: sub})
		}
	}
	return out
}

// tplStrings parses the strings of default values that hold template actions, for tpl.
func (st *readsState) tplStrings(v any, name string) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			st.tplStrings(x[k], name)
		}
	case []any:
		for _, e := range x {
			st.tplStrings(e, name)
		}
	case string:
		if strings.Contains(x, "{{") {
			if trees, err := parseTemplate(name, x); err == nil && trees[name] != nil {
				st.tplSources = append(st.tplSources, trees[name])
			}
		}
	}
}

func pathKey(p []string) string { return strings.Join(p, "\x00") }

func (st *readsState) markRead(p []string) {
	for i := 1; i <= len(p); i++ {
		st.read[pathKey(p[:i])] = slices.Clone(p[:i])
	}
}

func (st *readsState) markWhole(p []string, why string) {
	st.markRead(p)
	k := pathKey(p)
	if _, ok := st.whole[k]; !ok {
		st.whole[k] = slices.Clone(p)
		st.why[strings.Join(p, ".")] = why
	}
}

// avKind is what an abstract value stands for.
type avKind int

const (
	avRoot      avKind = iota // the top-level object of a chart whose values are at path
	avValues                  // the values at path
	avSubcharts               // .Subcharts of the chart whose values are at path
	avDict                    // a dict: its fields
	avList                    // a list: its elements
	avString                  // a constant string
)

// aval is an abstract value: one thing a template expression may evaluate to that leads to the
// values. Values that lead nowhere (numbers, .Release, a function's string) are not tracked.
type aval struct {
	kind   avKind
	path   []string
	scope  bool // avValues: the .Values of a chart (its `global` is the root's)
	fields map[string]vals
	elems  []vals
	str    string
	// partial: a computed string, of which only its constant start (str) and end (suffix) are
	// known (print $.Template.BasePath "/x.yaml", printf "%s.fullname" .Chart.Name).
	partial bool
	suffix  string
}

// vals is what an expression may evaluate to (several when variables join branches).
type vals []*aval

func (v *aval) String() string {
	switch v.kind {
	case avRoot:
		return fmt.Sprintf("root%q", v.path)
	case avValues:
		return fmt.Sprintf("values%q", v.path)
	case avSubcharts:
		return fmt.Sprintf("subcharts%q", v.path)
	case avDict:
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(v.fields)) {
			parts = append(parts, k+":"+v.fields[k].String())
		}
		return "dict(" + strings.Join(parts, ",") + ")"
	case avList:
		var parts []string
		for _, e := range v.elems {
			parts = append(parts, e.String())
		}
		return "list(" + strings.Join(parts, ",") + ")"
	}
	return strconv.Quote(v.str)
}

func (vs vals) String() string {
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		if v.kind != avString {
			parts = append(parts, v.String())
		}
	}
	sort.Strings(parts)
	return "[" + strings.Join(slices.Compact(parts), " ") + "]"
}

// str returns the constant string vs stands for, if it is one.
func (vs vals) str() (string, bool) {
	if len(vs) == 1 && vs[0].kind == avString && !vs[0].partial {
		return vs[0].str, true
	}
	return "", false
}

// strs returns the constant strings vs may be, when it is nothing else.
func (vs vals) strs() []string {
	var out []string
	for _, v := range vs {
		if v.kind != avString || v.partial {
			return nil
		}
		out = append(out, v.str)
	}
	return out
}

// env is where a template runs: its dot, its $ and its variables (innermost scope last).
type env struct {
	dot, dollar vals
	vars        []map[string]vals
}

func (e *env) push() { e.vars = append(e.vars, map[string]vals{}) }
func (e *env) pop()  { e.vars = e.vars[:len(e.vars)-1] }

func (e *env) lookup(name string) vals {
	if name == "$" {
		return e.dollar
	}
	for i := len(e.vars) - 1; i >= 0; i-- {
		if v, ok := e.vars[i][name]; ok {
			return v
		}
	}
	return nil
}

func (e *env) declare(name string, v vals) {
	if len(e.vars) == 0 {
		e.push()
	}
	e.vars[len(e.vars)-1][name] = v
}

// assign joins v to what the variable may hold: a branch may or may not have assigned it.
func (e *env) assign(name string, v vals) {
	for i := len(e.vars) - 1; i >= 0; i-- {
		if old, ok := e.vars[i][name]; ok {
			joined := slices.Clone(old)
			for _, x := range v {
				if !slices.ContainsFunc(joined, func(y *aval) bool { return y.String() == x.String() }) {
					joined = append(joined, x)
				}
			}
			e.vars[i][name] = joined
			return
		}
	}
	e.declare(name, v)
}

// where names a node for the reasons given in notes.
func where(t *parse.Tree, n parse.Node) string {
	loc, _ := t.ErrorContext(n)
	return loc
}

// walk follows a list of template nodes.
func (st *readsState) walk(t *parse.Tree, n parse.Node, e *env) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			st.walk(t, c, e)
		}
	case *parse.ActionNode:
		v := st.pipe(t, n.Pipe, e)
		if len(n.Pipe.Decl) == 0 {
			st.consume(t, n, v, "printed")
		}
	case *parse.IfNode:
		st.pipe(t, n.Pipe, e) // a test reads what it tests, not what is below it
		st.branch(t, n.List, e, e.dot)
		st.branch(t, n.ElseList, e, e.dot)
	case *parse.WithNode:
		v := st.pipe(t, n.Pipe, e)
		st.branch(t, n.List, e, v)
		st.branch(t, n.ElseList, e, e.dot)
	case *parse.RangeNode:
		st.rangeNode(t, n, e)
	case *parse.TemplateNode:
		var arg vals
		if n.Pipe != nil {
			arg = st.pipe(t, n.Pipe, e)
		}
		st.define(t, n, []string{n.Name}, arg)
	}
}

// branch walks a list with dot set to dot, in a scope of its own.
func (st *readsState) branch(t *parse.Tree, l *parse.ListNode, e *env, dot vals) {
	if l == nil {
		return
	}
	saved := e.dot
	e.dot = dot
	e.push()
	st.walk(t, l, e)
	e.pop()
	e.dot = saved
}

func (st *readsState) rangeNode(t *parse.Tree, n *parse.RangeNode, e *env) {
	decl := n.Pipe.Decl
	n.Pipe.Decl = nil // the variables are bound to each element, not to what is ranged over
	over := st.pipe(t, n.Pipe, e)
	n.Pipe.Decl = decl
	var elem vals
	for _, v := range over {
		switch v.kind {
		case avDict:
			for _, k := range slices.Sorted(maps.Keys(v.fields)) {
				elem = append(elem, v.fields[k]...)
			}
		case avList:
			for _, x := range v.elems {
				elem = append(elem, x...)
			}
		default:
			st.consume(t, n, vals{v}, "ranged over")
		}
	}
	saved := e.dot
	e.dot = elem
	e.push()
	if len(decl) > 0 {
		e.declare(decl[len(decl)-1].Ident[0], elem)
	}
	// Twice: what a variable is assigned in one iteration is what the next one starts from
	// ($section = index $section .), a level deeper at each.
	st.walk(t, n.List, e)
	st.walk(t, n.List, e)
	e.pop()
	e.dot = saved
	st.branch(t, n.ElseList, e, e.dot)
}

// pipe evaluates a pipeline: each command's result is the last argument of the next.
func (st *readsState) pipe(t *parse.Tree, p *parse.PipeNode, e *env) vals {
	if p == nil {
		return nil
	}
	var v vals
	for i, c := range p.Cmds {
		v = st.command(t, c, e, v, i > 0)
	}
	for _, d := range p.Decl {
		if p.IsAssign {
			e.assign(d.Ident[0], v)
		} else {
			e.declare(d.Ident[0], v)
		}
	}
	return v
}

func (st *readsState) command(t *parse.Tree, c *parse.CommandNode, e *env, prev vals, piped bool) vals {
	if len(c.Args) == 0 {
		return nil
	}
	if id, ok := c.Args[0].(*parse.IdentifierNode); ok {
		args := make([]vals, 0, len(c.Args))
		for _, a := range c.Args[1:] {
			args = append(args, st.arg(t, a, e))
		}
		if piped {
			args = append(args, prev)
		}
		return st.call(t, c, id.Ident, args)
	}
	v := st.arg(t, c.Args[0], e)
	if len(c.Args) > 1 || piped { // a method call (.Files.Get "x"): what it is given is consumed
		for _, a := range c.Args[1:] {
			st.consume(t, c, st.arg(t, a, e), "handed to a method")
		}
		st.consume(t, c, prev, "handed to a method")
		return nil
	}
	return v
}

func (st *readsState) arg(t *parse.Tree, n parse.Node, e *env) vals {
	switch n := n.(type) {
	case *parse.DotNode:
		return e.dot
	case *parse.FieldNode:
		return st.fields(e.dot, n.Ident)
	case *parse.VariableNode:
		return st.fields(e.lookup(n.Ident[0]), n.Ident[1:])
	case *parse.ChainNode:
		return st.fields(st.arg(t, n.Node, e), n.Field)
	case *parse.PipeNode:
		return st.pipe(t, n, e)
	case *parse.IdentifierNode:
		return st.call(t, n, n.Ident, nil)
	case *parse.StringNode:
		return vals{{kind: avString, str: n.Text}}
	}
	return nil
}

// fields follows field names from what vs stands for.
func (st *readsState) fields(vs vals, names []string) vals {
	for _, name := range names {
		var next vals
		for _, v := range vs {
			next = append(next, st.field(v, name)...)
		}
		vs = next
	}
	return vs
}

func (st *readsState) field(v *aval, name string) vals {
	switch v.kind {
	case avRoot:
		switch name {
		case "Values":
			return vals{{kind: avValues, path: v.path, scope: true}}
		case "Subcharts":
			return vals{{kind: avSubcharts, path: v.path}}
		}
	case avValues:
		if v.scope && name == "global" {
			st.markRead([]string{"global"})
			return vals{{kind: avValues, path: []string{"global"}}}
		}
		p := append(slices.Clone(v.path), name)
		st.markRead(p)
		return vals{{kind: avValues, path: p}}
	case avSubcharts:
		return vals{{kind: avRoot, path: append(slices.Clone(v.path), name)}}
	case avDict:
		return v.fields[name]
	}
	return nil
}

// index follows one key of index, get, dig or hasKey.
func (st *readsState) index(t *parse.Tree, n parse.Node, vs vals, key vals) vals {
	if k, ok := key.str(); ok {
		return st.fields(vs, []string{k})
	}
	if keys := key.strs(); keys != nil { // one of several constant keys (a loop over a list of them)
		var out vals
		for _, k := range keys {
			if k != "" {
				out = append(out, st.fields(vs, []string{k})...)
			}
		}
		return out
	}
	var out vals
	for _, v := range vs {
		switch v.kind {
		case avList:
			for _, x := range v.elems {
				out = append(out, x...)
			}
		case avDict:
			for _, k := range slices.Sorted(maps.Keys(v.fields)) {
				out = append(out, v.fields[k]...)
			}
		default: // a computed key or a list index: any key below may be read
			st.consume(t, n, vals{v}, "indexed by a computed key")
		}
	}
	return out
}

// call evaluates a function call with its arguments (the piped value last). A function the
// analysis does not know reads its arguments whole.
func (st *readsState) call(t *parse.Tree, n parse.Node, name string, args []vals) vals {
	switch name {
	case "include":
		if len(args) >= 1 {
			var arg vals
			if len(args) >= 2 {
				arg = args[1]
			}
			st.include(t, n, args[0], arg)
		}
		return nil
	case "tpl":
		if len(args) >= 1 {
			st.consume(t, n, args[0], "rendered with tpl")
		}
		if len(args) >= 2 {
			// What it renders may be a value (toYaml .Values.x, or a helper's argument): only a
			// constant is known not to be.
			if _, constant := args[0].str(); st.tplOfValues == "" && !constant && reaches(args[1], avRoot) {
				st.tplOfValues = where(t, n)
			}
			st.tpl(args[1])
		}
		return nil
	}
	if out, ok := st.access(t, n, name, args); ok {
		return out
	}
	if out, ok := passed(name, args); ok {
		return out
	}
	if out, ok := splitKeys(name, args); ok {
		return out
	}
	for _, a := range args {
		st.consume(t, n, a, "handed to "+name)
	}
	return computedString(name, args)
}

// access evaluates the functions that build or read into maps and lists; ok is false for any
// other function, or a call of the wrong arity.
func (st *readsState) access(t *parse.Tree, n parse.Node, name string, args []vals) (vals, bool) {
	switch {
	case name == "dict":
		d := &aval{kind: avDict, fields: map[string]vals{}}
		for i := 0; i+1 < len(args); i += 2 {
			k, ok := args[i].str()
			if !ok {
				st.consume(t, n, args[i+1], "put in a dict under a computed key")
				continue
			}
			d.fields[k] = args[i+1]
		}
		return vals{d}, true
	case name == "list" || name == "tuple":
		return vals{{kind: avList, elems: args}}, true
	case name == "index" && len(args) > 0:
		v := args[0]
		for _, k := range args[1:] {
			v = st.index(t, n, v, k)
		}
		return v, true
	case name == "get" && len(args) == 2:
		return st.index(t, n, args[0], args[1]), true
	case name == "hasKey" && len(args) == 2:
		st.index(t, n, args[0], args[1])
		return nil, true
	case name == "dig" && len(args) >= 2: // dig "a" "b" default map
		v := args[len(args)-1]
		for _, k := range args[:len(args)-2] {
			v = st.index(t, n, v, k)
		}
		return append(slices.Clone(v), args[len(args)-2]...), true
	case name == "pluck" && len(args) >= 1:
		var out vals
		for _, m := range args[1:] {
			out = append(out, st.index(t, n, m, args[0])...)
		}
		return out, true
	case name == "pick" && len(args) >= 1:
		d := &aval{kind: avDict, fields: map[string]vals{}}
		for _, k := range args[1:] {
			if key, ok := k.str(); ok {
				d.fields[key] = st.index(t, n, args[0], k)
			} else {
				st.consume(t, n, args[0], "picked by a computed key")
			}
		}
		return vals{d}, true
	case slices.Contains([]string{"first", "last", "mustFirst", "mustLast"}, name) && len(args) == 1:
		return st.index(t, n, args[0], nil), true
	}
	return nil, false
}

// splitKeys splits constant paths into their keys (split "." "metrics.gitSync"), to be ranged
// over and indexed with; ok is false for any other call.
func splitKeys(name string, args []vals) (vals, bool) {
	if (name != "split" && name != "splitList") || len(args) != 2 {
		return nil, false
	}
	sep, ok := args[0].str()
	in := args[1].strs()
	if !ok || in == nil {
		return nil, false
	}
	var parts vals
	for _, s := range in {
		for _, p := range strings.Split(s, sep) {
			parts = append(parts, &aval{kind: avString, str: p})
		}
	}
	return vals{{kind: avList, elems: []vals{parts}}}, true
}

// passed evaluates the functions that return what they are given (or nothing of it), without
// reading it whole; ok is false for any other function.
func passed(name string, args []vals) (vals, bool) {
	switch {
	case slices.Contains([]string{"default", "coalesce", "and", "or", "merge", "mergeOverwrite", "mustMerge", "mustMergeOverwrite",
		"deepCopy", "mustDeepCopy"}, name):
		var out vals
		for _, a := range args {
			out = append(out, a...)
		}
		return out, true
	case name == "ternary" && len(args) == 3:
		return append(slices.Clone(args[0]), args[1]...), true
	case name == "required" && len(args) == 2:
		return args[1], true
	case slices.Contains([]string{"kindIs", "kindOf", "typeIs", "typeOf", "typeIsLike", "not", "empty"}, name):
		return nil, true // whether a value is set, and its type: not its keys
	}
	return nil, false
}

// computedString is what a string function returns of which the constant start and end are
// known, as a computed template name is made: include (print $.Template.BasePath "/x.yaml"),
// include (printf "%s.fullname" .Chart.Name).
func computedString(name string, args []vals) vals {
	switch {
	case name == "print":
		out := &aval{kind: avString, partial: true}
		for i := 0; i < len(args); i++ {
			s, ok := args[i].str()
			if !ok {
				break
			}
			out.str += s
		}
		for i := len(args) - 1; i >= 0; i-- {
			s, ok := args[i].str()
			if !ok {
				break
			}
			out.suffix = s + out.suffix
		}
		return vals{out}
	case name == "printf" && len(args) > 0:
		format, ok := args[0].str()
		if !ok {
			return nil
		}
		out := &aval{kind: avString, partial: true, str: format}
		if i := strings.IndexByte(format, '%'); i >= 0 {
			out.str = format[:i]
		}
		if i := strings.LastIndexByte(format, '%'); i >= 0 && i+2 <= len(format) {
			out.suffix = format[i+2:]
		}
		return vals{out}
	}
	return nil
}

// include follows the named template (or template file) a name stands for: one by its
// constant name, or each one a computed name may be, by the constant start and end it has.
func (st *readsState) include(t *parse.Tree, n parse.Node, name vals, arg vals) {
	if s, ok := name.str(); ok {
		st.define(t, n, []string{s}, arg)
		return
	}
	prefix, suffix := "", ""
	if len(name) == 1 && name[0].partial {
		prefix, suffix = name[0].str, name[0].suffix
	}
	var names []string
	for _, k := range append(slices.Collect(maps.Keys(st.files)), slices.Collect(maps.Keys(st.defines))...) {
		if strings.HasPrefix(k, prefix) && strings.HasSuffix(k, suffix) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	st.define(t, n, slices.Compact(names), arg)
}

// consume records that what vs stands for is used whole: a subtree of the values is read
// whole, and the top-level object handed away reads the whole values of its chart.
func (st *readsState) consume(t *parse.Tree, n parse.Node, vs vals, how string) {
	for _, v := range vs {
		switch v.kind {
		case avValues:
			st.markWhole(v.path, where(t, n)+": "+how)
		case avRoot, avSubcharts:
			st.markWhole(v.path, where(t, n)+": the top-level object "+how)
			st.markWhole([]string{"global"}, where(t, n)+": the top-level object "+how)
		case avDict:
			for _, k := range slices.Sorted(maps.Keys(v.fields)) {
				st.consume(t, n, v.fields[k], how)
			}
		case avList:
			for _, x := range v.elems {
				st.consume(t, n, x, how)
			}
		}
	}
}

// define follows the named templates (or template files) names as they run with arg as their
// dot and $.
func (st *readsState) define(t *parse.Tree, n parse.Node, names []string, arg vals) {
	if !slices.ContainsFunc(arg, func(v *aval) bool { return v.kind != avString }) {
		return // nothing of the values reaches it
	}
	if st.depth >= maxDepth || len(st.done) >= maxRuns {
		st.consume(t, n, arg, "handed to templates nested too deep, or run too often, to follow")
		return
	}
	sig := arg.String()
	for _, name := range names {
		if st.done[name+"\x00"+sig] {
			continue
		}
		st.done[name+"\x00"+sig] = true
		trees := st.defines[name]
		if f := st.files[name]; f != nil {
			trees = append(slices.Clone(trees), f)
		}
		for _, tree := range trees {
			st.depth++
			st.walk(tree, tree.Root, &env{dot: arg, dollar: arg})
			st.depth--
		}
	}
}

// reaches tells whether vs stands for (or holds, in a dict or list) a value of this kind.
func reaches(vs vals, kind avKind) bool {
	for _, v := range vs {
		if v.kind == kind {
			return true
		}
		switch v.kind {
		case avDict:
			for _, f := range v.fields {
				if reaches(f, kind) {
					return true
				}
			}
		case avList:
			for _, e := range v.elems {
				if reaches(e, kind) {
					return true
				}
			}
		}
	}
	return false
}

// tpl follows every string tpl may render with ctx as its dot.
func (st *readsState) tpl(ctx vals) {
	if !slices.ContainsFunc(ctx, func(v *aval) bool { return v.kind != avString }) {
		return
	}
	sig := ctx.String()
	if st.tplDone[sig] {
		return
	}
	st.tplDone[sig] = true
	for _, tree := range st.tplSources {
		st.walk(tree, tree.Root, &env{dot: ctx, dollar: ctx})
	}
}

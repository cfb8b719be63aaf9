package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// instruction is one Dockerfile instruction: its keyword (upper case), its flags (--from=...)
// and its arguments, with the line it starts on for messages.
type instruction struct {
	line  int
	op    string
	flags map[string]string
	args  string
	text  string // flags and arguments as written
}

func (in instruction) String() string { return fmt.Sprintf("line %d: %s %s", in.line, in.op, in.text) }

// parseDockerfile reads the instructions of a Dockerfile: comments and blank lines dropped,
// lines continued with a trailing backslash joined, leading --flag=value options split off.
func parseDockerfile(path string) ([]instruction, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []instruction
	var pending strings.Builder
	start := 0
	for i, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if pending.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if pending.Len() > 0 && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if pending.Len() == 0 {
			start = i + 1
		}
		if cont, ok := strings.CutSuffix(trimmed, `\`); ok {
			pending.WriteString(cont + " ")
			continue
		}
		pending.WriteString(trimmed)
		in, err := splitInstruction(start, pending.String())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, in)
		pending.Reset()
	}
	if pending.Len() > 0 {
		return nil, fmt.Errorf("%s: line %d: the file ends inside a continued instruction", path, start)
	}
	return out, nil
}

func splitInstruction(line int, text string) (instruction, error) {
	op, rest, _ := strings.Cut(text, " ")
	in := instruction{line: line, op: strings.ToUpper(op), flags: map[string]string{}}
	rest = strings.TrimSpace(rest)
	in.text = rest
	for strings.HasPrefix(rest, "--") {
		flag, after, _ := strings.Cut(rest, " ")
		name, value, ok := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
		if !ok {
			return in, fmt.Errorf("line %d: flag %s has no value", line, flag)
		}
		in.flags[name] = value
		rest = strings.TrimSpace(after)
	}
	in.args = rest
	return in, nil
}

// words splits a shell-form command line into words, as a POSIX shell would for the plain
// commands a build runs: single and double quotes group, a backslash escapes the next
// character. Anything that would need a shell (pipes, lists, redirections, expansions) is
// refused rather than run differently from a container engine.
func words(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'' || c == '"':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unterminated quote in %q", s)
			}
			quoted := s[i+1 : i+1+end]
			if c == '"' && strings.ContainsAny(quoted, "$`\\") {
				return nil, fmt.Errorf("expansion inside double quotes in %q needs a shell", s)
			}
			cur.WriteString(quoted)
			inWord = true
			i += end + 1
		case c == '\\':
			if i+1 < len(s) {
				i++
				cur.WriteByte(s[i])
				inWord = true
			}
		case strings.IndexByte("|&;<>()$`*?[]{}~", c) >= 0:
			return nil, fmt.Errorf("%q needs a shell (%q)", s, c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// command returns the argv of RUN, ENTRYPOINT or CMD: the JSON (exec) form as written, the
// shell form split into words.
func command(args string) ([]string, error) {
	if strings.HasPrefix(args, "[") {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			return nil, fmt.Errorf("exec form %s: %w", args, err)
		}
		return argv, nil
	}
	return words(args)
}

// keyValues parses the key=value pairs of LABEL and ENV (values quoted or not).
func keyValues(args string) ([][2]string, error) {
	ws, err := words(args)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for _, w := range ws {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is not key=value", w)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

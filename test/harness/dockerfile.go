package harness

import (
	"os"
	"strings"
	"testing"
)

// Instruction is one Dockerfile instruction: its keyword, upper case, and the rest of it.
type Instruction struct{ Op, Args string }

// Dockerfile reads the instructions of a Dockerfile: comments and blank lines dropped, lines
// continued with a trailing backslash joined.
func Dockerfile(t testing.TB, path string) []Instruction {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Instruction
	pending := ""
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending += cont + " "
			continue
		}
		op, args, _ := strings.Cut(pending+line, " ")
		pending = ""
		out = append(out, Instruction{strings.ToUpper(op), strings.TrimSpace(args)})
	}
	return out
}

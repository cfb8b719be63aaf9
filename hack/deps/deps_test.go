package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A govulncheck JSON stream: one finding reached through a call, one at package level only.
const stream = `{"config":{"protocol_version":"v1.0.0"}}
{"osv":{"id":"GO-2026-5026","summary":"Failure to reject Punycode labels in golang.org/x/net/idna"}}
{"osv":{"id":"GO-2026-0001","summary":"Imported, never called"}}
{"finding":{"osv":"GO-2026-5026","fixed_version":"v0.55.0","trace":[
 {"module":"golang.org/x/net","version":"v0.53.0","package":"golang.org/x/net/idna","function":"ToASCII","receiver":"*Profile"},
 {"module":"example.com/m","package":"example.com/m","function":"main","position":{"filename":"main.go","line":9}}]}}
{"finding":{"osv":"GO-2026-0001","trace":[{"module":"example.com/x","version":"v1.0.0","package":"example.com/x"}]}}
`

func TestOnlyReachedVulnerabilitiesAreFindings(t *testing.T) {
	found, err := parseFindings(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("findings %+v, want GO-2026-5026 alone (GO-2026-0001 is never called)", found)
	}
	f := found[0]
	if f.ID != "GO-2026-5026" || f.Module != "golang.org/x/net" || f.Found != "v0.53.0" || f.Fixed != "v0.55.0" ||
		f.Symbol != "golang.org/x/net/idna.Profile.ToASCII" || f.Caller != "example.com/m.main (main.go:9)" ||
		!strings.HasPrefix(f.Summary, "Failure to reject") {
		t.Errorf("finding %+v", f)
	}
}

func TestAcceptancesCoverFindingsUntilTheyExpire(t *testing.T) {
	found := []finding{{ID: "GO-1"}, {ID: "GO-2"}}
	today := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		accepted []acceptance
		fails    []string
	}{
		{"none accepted", nil, []string{"GO-1", "GO-2"}},
		{"one accepted", []acceptance{{ID: "GO-1", Expires: "2027-01-01"}}, []string{"GO-2"}},
		{"expired today", []acceptance{{ID: "GO-1", Expires: "2026-12-04"}, {ID: "GO-2", Expires: "2027-01-01"}},
			[]string{"GO-1: its acceptance expired", "GO-1: @"}},
		{"stale", []acceptance{{ID: "GO-1", Expires: "2027-01-01"}, {ID: "GO-2", Expires: "2027-01-01"},
			{ID: "GO-3", Expires: "2027-01-01"}}, []string{"GO-3: accepted, but no longer found"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judge(found, tc.accepted, today)
			if len(got) != len(tc.fails) {
				t.Fatalf("failures %q, want %q", got, tc.fails)
			}
			for i, want := range tc.fails {
				if !strings.HasPrefix(got[i], want) {
					t.Errorf("failure %d: %q, want it to begin %q", i, got[i], want)
				}
			}
		})
	}
}

func TestAnAcceptanceNeedsAReasonAndAnExpiry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "accepted.yaml")
	for body, ok := range map[string]bool{
		"accepted: []\n": true,
		"accepted:\n- {id: GO-1, reason: not exploitable here, expires: 2027-01-01}\n": true,
		"accepted:\n- {id: GO-1, expires: 2027-01-01}\n":                               false,
		"accepted:\n- {id: GO-1, reason: r, expires: soon}\n":                          false,
		"accepted:\n- {id: GO-1, reason: r, expires: 2027-01-01, note: typo}\n":        false,
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := loadAccepted(path); (err == nil) != ok {
			t.Errorf("%q: error %v, want ok=%v", body, err, ok)
		}
	}
}

// TestTheCheckFailsOnAVulnerableVersionPinnedBack runs the check, with the project's pinned
// govulncheck and database, over a program that calls golang.org/x/net/idna at a version
// before the fix of GO-2026-5026: it must fail, naming the advisory; accepted, it passes.
func TestTheCheckFailsOnAVulnerableVersionPinnedBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module and runs govulncheck")
	}
	govulncheck, db := os.Getenv("GOVULNCHECK"), os.Getenv("VULNDB")
	if govulncheck == "" || db == "" {
		t.Fatal("GOVULNCHECK and VULNDB name the pinned govulncheck and its database (make test sets them)")
	}
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/pinnedback\n\ngo 1.26\n\nrequire golang.org/x/net v0.53.0\n")
	write("main.go", `package main

import "golang.org/x/net/idna"

func main() { _, _ = idna.ToASCII("example.com") }
`)
	if out, err := exec.Command("sh", "-c", "cd "+dir+" && go mod tidy").CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy: %v\n%s", err, out)
	}
	found, err := scan(govulncheck, db, dir, []string{"."})
	if err != nil {
		t.Fatal(err)
	}
	failures := judge(found, nil, time.Now())
	if len(failures) == 0 || !strings.Contains(strings.Join(failures, "\n"), "GO-2026-5026: golang.org/x/net@v0.53.0 (fixed in v0.55.0)") {
		t.Fatalf("the check of x/net v0.53.0 says %q; want it to name GO-2026-5026", failures)
	}
	t.Logf("the check fails as it should:\n%s", strings.Join(failures, "\n"))
	var accepted []acceptance
	for _, f := range found {
		accepted = append(accepted, acceptance{ID: f.ID, Reason: "test", Expires: time.Now().AddDate(0, 0, 7).Format(time.DateOnly)})
	}
	if left := judge(found, accepted, time.Now()); len(left) > 0 {
		t.Errorf("accepted findings still fail: %q", left)
	}
}

// TestEveryBuildNamesThePinnedToolchain: the files that name the Go toolchain name the one
// hack/toolchain.env pins (a machine ignores go.mod's toolchain line; each must say it).
func TestEveryBuildNamesThePinnedToolchain(t *testing.T) {
	root := filepath.Join("..", "..")
	env, err := os.ReadFile(filepath.Join(root, toolchainFile))
	if err != nil {
		t.Fatal(err)
	}
	_, pinned, ok := strings.Cut(strings.TrimSpace(string(env[strings.LastIndex(string(env), "GOTOOLCHAIN="):])), "GOTOOLCHAIN=go")
	if !ok {
		t.Fatalf("%s pins no GOTOOLCHAIN=goX.Y.Z", toolchainFile)
	}
	want := map[string]string{
		"go.mod":     "\ngo " + pinned + "\n",
		"README.md":  "export GOTOOLCHAIN=go" + pinned,
		".ci/run":    toolchainFile,
		"Dockerfile": "golang:" + pinned + "-",
	}
	for _, f := range toolchainNamers {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), want[f]) {
			t.Errorf("%s does not name the pinned toolchain go%s (want %q in it)", f, pinned, want[f])
		}
	}
}

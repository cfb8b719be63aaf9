// Package chaos holds the long fault tests: kill -9 of the operator during changes, an upgrade
// that fails again and again, and a create/delete soak. make test runs their short forms;
// make chaos runs them long (CHAOS_CYCLES, CHAOS_PROXIES, FAILED_UPGRADES, SOAK_N) and writes
// CHAOS_REPORT. They run the operator binary against envtest, as test/integration does.
package chaos

import (
	"os"
	"testing"

	"github.com/example/myproxy-operator/test/fixture"
)

var env *fixture.Env

func TestMain(m *testing.M) {
	os.Exit(fixture.Main(m, "chaos", func(e *fixture.Env) { env = e }))
}

package citustest

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/composetest"
)

// repoRoot is the checkout's root, from this package's folder.
const repoRoot = "../.."

// TestCitusComposeValidates runs the stack on Citus, docker-compose.yml
// with docker-compose.citus.yml over it, through Docker Compose's own
// validation with the .env file scripts/compose-env.sh makes, and checks
// that it has the coordinator, the workers and their registration.
func TestCitusComposeValidates(t *testing.T) {
	c := composetest.Command(t)
	envFile := filepath.Join(t.TempDir(), ".env")
	if out, err := exec.Command("bash", filepath.Join(repoRoot, "scripts", "compose-env.sh"), envFile).CombinedOutput(); err != nil {
		t.Fatalf("compose-env.sh: %v\n%s", err, out)
	}
	env := composetest.Env()
	run := func(args ...string) string {
		t.Helper()
		full := append(slices.Clone(c[1:]), "--env-file", envFile, "-f", "docker-compose.yml", "-f", "docker-compose.citus.yml")
		cmd := exec.Command(c[0], append(full, args...)...)
		cmd.Dir = repoRoot
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
		return string(out)
	}
	run("config", "-q")
	services := strings.Fields(run("config", "--services"))
	for _, s := range []string{"postgres", "citus-worker-1", "citus-worker-2", "citus-register", "mcpsearch-migrate", "mcpsearch"} {
		if !slices.Contains(services, s) {
			t.Errorf("service %s missing from the Citus stack; it has %v", s, services)
		}
	}
	config := run("config")
	for _, want := range []string{"mcpsearch-citus:13.2.0", "127.0.0.1:9700:5432", "wal_level=logical", "maintenance_work_mem=1GB"} {
		if !strings.Contains(config, want) {
			t.Errorf("the Citus stack's configuration lacks %q", want)
		}
	}
}

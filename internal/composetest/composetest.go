// Package composetest runs Docker Compose in tests of the project's compose
// files: no engine is needed to validate them, only the compose program.
package composetest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Command returns the command line of Docker Compose, v2 or v1. Without
// either it skips the test, or fails it when MCPSEARCH_REQUIRE_COMPOSE=1
// (as CI sets, having installed docker-compose).
func Command(t testing.TB) []string {
	t.Helper()
	switch {
	case exec.Command("docker", "compose", "version").Run() == nil:
		return []string{"docker", "compose"}
	case exec.Command("docker-compose", "version").Run() == nil:
		return []string{"docker-compose"}
	}
	if os.Getenv("MCPSEARCH_REQUIRE_COMPOSE") == "1" {
		t.Fatal("neither docker compose nor docker-compose is installed")
	}
	t.Skip("neither docker compose nor docker-compose is installed")
	return nil
}

// Env returns the test's environment without the variables the compose
// files read: in Compose the shell's variables override the env file, and
// none of a developer's may leak into a check of that file.
func Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "MCP_") && !strings.HasPrefix(name, "SEARXNG_") && !strings.HasPrefix(name, "POSTGRES_") &&
			!strings.HasPrefix(name, "COMPOSE_") && !strings.HasPrefix(name, "CITUS_") {
			env = append(env, kv)
		}
	}
	return env
}

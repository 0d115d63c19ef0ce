package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDockerComposeValidates runs the compose file through Docker Compose's
// own validation. CI installs docker-compose; elsewhere the test skips
// unless MCPSEARCH_REQUIRE_COMPOSE=1.
func TestDockerComposeValidates(t *testing.T) {
	root := filepath.Join("..", "..")
	var cmd *exec.Cmd
	switch {
	case exec.Command("docker", "compose", "version").Run() == nil:
		cmd = exec.Command("docker", "compose", "-f", "docker-compose.yml", "config", "-q")
	case exec.Command("docker-compose", "version").Run() == nil:
		cmd = exec.Command("docker-compose", "-f", "docker-compose.yml", "config", "-q")
	default:
		if os.Getenv("MCPSEARCH_REQUIRE_COMPOSE") == "1" {
			t.Fatal("neither docker compose nor docker-compose is installed")
		}
		t.Skip("neither docker compose nor docker-compose is installed")
	}
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compose config: %v\n%s", err, out)
	}
}

// TestDeploymentFilesAgree checks what the compose file, the Dockerfile and
// the SearXNG settings must agree on.
func TestDeploymentFilesAgree(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	compose, dockerfile, settings := read("docker-compose.yml"), read("Dockerfile"), read("searxng-settings.yml")
	for _, want := range []string{"pgvector/pgvector:pg17", "./searxng-settings.yml:/etc/searxng/settings.yml", "MCP_web_search_searxng_url", "DATABASE_URL"} {
		if !strings.Contains(compose, want) {
			t.Errorf("docker-compose.yml lacks %q", want)
		}
	}
	for _, want := range []string{"./cmd/mcpsearch", "CGO_ENABLED=0", "USER nonroot"} {
		if !strings.Contains(dockerfile, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// Without json in search.formats SearXNG answers 403; with the limiter
	// on it answers 429 to a server that calls it often.
	for _, want := range []string{"- json", "limiter: false"} {
		if !strings.Contains(settings, want) {
			t.Errorf("searxng-settings.yml lacks %q", want)
		}
	}
}

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/composetest"
)

// TestDockerComposeValidates runs the compose file through Docker Compose's
// own validation, with the .env file scripts/compose-env.sh makes, and
// checks that without it Compose refuses and says how to make it.
func TestDockerComposeValidates(t *testing.T) {
	compose := composetest.Command(t)
	dir := t.TempDir()
	envFile := filepath.Join(dir, ".env")
	runIn(t, repoRoot, nil, "bash", filepath.Join("scripts", "compose-env.sh"), envFile)
	empty := filepath.Join(dir, "empty.env")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	env := composetest.Env()
	config := func(envFile string) (string, error) {
		args := append(slices.Clone(compose[1:]), "--env-file", envFile, "-f", "docker-compose.yml", "config", "-q")
		cmd := exec.Command(compose[0], args...)
		cmd.Dir = repoRoot
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := config(envFile); err != nil {
		t.Fatalf("compose config with the .env of compose-env.sh: %v\n%s", err, out)
	}
	out, err := config(empty)
	if err == nil || !strings.Contains(out, "make compose-env") {
		t.Fatalf("compose config without .env: %v; want a refusal naming make compose-env\n%s", err, out)
	}
}

// TestDeploymentFilesAgree checks what the compose file, the Dockerfile,
// the SearXNG settings and the ignore files must agree on.
func TestDeploymentFilesAgree(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(repoRoot, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	s := loadStack(t)
	svc := s.compose.services

	if got := svc["postgres"].image; !strings.HasPrefix(got, "pgvector/pgvector:") {
		t.Errorf("postgres service runs %q, want a pgvector/pgvector image", got)
	}
	if got := svc["mcpsearch"].dependsOn["mcpsearch-migrate"]; got != "service_completed_successfully" {
		t.Errorf("mcpsearch waits for mcpsearch-migrate with %q, want service_completed_successfully", got)
	}
	if got := svc["mcpsearch-migrate"].dependsOn["postgres"]; got != "service_healthy" {
		t.Errorf("mcpsearch-migrate waits for postgres with %q, want service_healthy", got)
	}

	// SearXNG: its entrypoint writes to /etc/searxng, so the directory is
	// a writable volume that searxng-config fills from the repository's
	// settings before SearXNG starts; the secret comes from .env.
	searxng, init := svc["searxng"], svc["searxng-config"]
	var confVolume string
	for _, v := range searxng.volumes {
		if src, rest, _ := strings.Cut(v, ":"); strings.HasPrefix(rest, "/etc/searxng") {
			confVolume = src
			if strings.HasSuffix(rest, ":ro") {
				t.Errorf("searxng mounts %s read-only; its entrypoint writes there", v)
			}
		}
	}
	if _, ok := s.compose.volumes[confVolume]; !ok {
		t.Errorf("searxng's /etc/searxng is %q, not a named volume of the compose file", confVolume)
	}
	if !slices.Contains(init.volumes, confVolume+":/etc/searxng") || !slices.Contains(init.volumes, "./searxng-settings.yml:/mcpsearch/searxng-settings.yml:ro") {
		t.Errorf("searxng-config mounts %q; want the settings file and the %s volume", init.volumes, confVolume)
	}
	if init.image != searxng.image || !strings.Contains(strings.Join(init.command, " "), "cp /mcpsearch/searxng-settings.yml /etc/searxng/settings.yml") {
		t.Errorf("searxng-config (%s %q) does not copy the settings into the volume", init.image, init.command)
	}
	if got := searxng.dependsOn["searxng-config"]; got != "service_completed_successfully" {
		t.Errorf("searxng waits for searxng-config with %q, want service_completed_successfully", got)
	}
	if got := searxng.environment["SEARXNG_SECRET"]; got != s.vars["SEARXNG_SECRET"] {
		t.Errorf("searxng's SEARXNG_SECRET is %q, not the one of .env", got)
	}
	settings := read("searxng-settings.yml")
	// Without json in search.formats SearXNG answers 403; with the limiter
	// on it answers 429 to a server that calls it often. A secret_key in
	// the file would be committed to the repository.
	for _, want := range []string{"- json", "limiter: false"} {
		if !strings.Contains(settings, want) {
			t.Errorf("searxng-settings.yml lacks %q", want)
		}
	}
	if strings.Contains(settings, "\n  secret_key:") {
		t.Error("searxng-settings.yml sets server.secret_key; it must come from SEARXNG_SECRET")
	}

	// Every published port is on the host's loopback.
	for name, sv := range svc {
		for _, p := range sv.ports {
			if ip, _, _ := strings.Cut(p, ":"); ip != "127.0.0.1" {
				t.Errorf("service %s publishes %q beyond loopback", name, p)
			}
		}
	}

	for _, want := range []string{"./cmd/mcpsearch", "CGO_ENABLED=0", "USER nonroot", "ca-certificates"} {
		if !strings.Contains(read("Dockerfile"), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}

	// The embedding model: mcpsearch-models pulls it into a named volume
	// that mcpsearch reads, at the folder the image names, and mcpsearch
	// starts only once the pull succeeded, with the same model.
	models := modelsMount(t, s)
	pull, serve := svc["mcpsearch-models"], svc["mcpsearch"]
	if got := strings.Join(pull.command, " "); got != "models pull" || pull.build != "." {
		t.Errorf("mcpsearch-models runs %q (build %q), want models pull from the Dockerfile", got, pull.build)
	}
	if got := serve.dependsOn["mcpsearch-models"]; got != "service_completed_successfully" {
		t.Errorf("mcpsearch waits for mcpsearch-models with %q, want service_completed_successfully", got)
	}
	if _, ok := s.compose.volumes[models.volume]; !ok {
		t.Errorf("the models folder is %q, not a named volume of the compose file", models.volume)
	}
	if !slices.Contains(pull.volumes, models.volume+":"+models.dir) {
		t.Errorf("mcpsearch-models mounts %q; want %s:%s, writable", pull.volumes, models.volume, models.dir)
	}
	if !slices.Contains(serve.volumes, models.volume+":"+models.dir+":ro") {
		t.Errorf("mcpsearch mounts %q; want %s:%s:ro", serve.volumes, models.volume, models.dir)
	}
	for _, k := range []string{"MCP_embed_provider", "MCP_embed_model", "MCP_embed_model_dir"} {
		if pull.environment[k] != serve.environment[k] {
			t.Errorf("%s is %q for mcpsearch-models and %q for mcpsearch", k, pull.environment[k], serve.environment[k])
		}
	}
	// The volume starts as the image's folder: nonroot must own it.
	var owned bool
	for _, r := range s.final.runs {
		owned = owned || strings.Contains(r, "mkdir -p "+models.dir) && strings.Contains(r, "chown -R nonroot:nonroot")
	}
	if !owned || s.final.user != "nonroot:nonroot" {
		t.Errorf("Dockerfile: %s is not made and given to nonroot before USER nonroot (runs %q, user %q)", models.dir, s.final.runs, s.final.user)
	}
	if !slices.Contains(s.final.expose, containerPort(t, svc["mcpsearch"])) {
		t.Errorf("Dockerfile exposes %v, compose publishes container port %s", s.final.expose, containerPort(t, svc["mcpsearch"]))
	}
	// The secrets stay out of git and out of the image build context.
	for file, want := range map[string]string{".gitignore": "/.env", ".dockerignore": ".env"} {
		if !slices.Contains(strings.Split(read(file), "\n"), want) {
			t.Errorf("%s lacks %s", file, want)
		}
	}
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/embed/model2vec"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// containerPATH and containerHome are what Docker gives a process of the
// distroless nonroot image besides the environment of the compose file.
const containerPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// stack is the deployment as the compose file and the Dockerfile describe
// it, with the secrets of an env file made by scripts/compose-env.sh.
type stack struct {
	vars    map[string]string // the .env file
	compose compose
	final   dockerStage // the image mcpsearch runs in
	build   dockerStage // the stage that builds the binary
}

// loadStack writes the .env file the README has users create, with the
// script it names, and reads the deployment files with it.
func loadStack(t *testing.T) stack {
	t.Helper()
	envFile := filepath.Join(t.TempDir(), ".env")
	runIn(t, repoRoot, nil, "bash", filepath.Join("scripts", "compose-env.sh"), envFile)
	vars, err := readEnvFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := loadCompose(vars)
	if err != nil {
		t.Fatal(err)
	}
	stages, err := loadDockerfile()
	if err != nil {
		t.Fatal(err)
	}
	s := stack{vars: vars, compose: c, final: stages[len(stages)-1]}
	from := s.binaryCopy(t)[0]
	for _, st := range stages {
		if st.name == from {
			s.build = st
		}
	}
	if s.build.name == "" {
		t.Fatalf("Dockerfile: the final stage copies from %q, which is no stage", from)
	}
	return s
}

// binaryCopy returns the build stage, source and destination of the final
// stage's COPY --from of the mcpsearch binary.
func (s stack) binaryCopy(t *testing.T) [3]string {
	t.Helper()
	for _, c := range s.final.copies {
		if len(c) == 3 && strings.HasPrefix(c[0], "--from=") && filepath.Base(c[2]) == "mcpsearch" {
			return [3]string{strings.TrimPrefix(c[0], "--from="), c[1], c[2]}
		}
	}
	t.Fatalf("Dockerfile: the final stage has no COPY --from=STAGE SRC .../mcpsearch (copies: %v)", s.final.copies)
	return [3]string{}
}

// buildBinary runs the Dockerfile's `go build` step on this repository,
// writing the binary into dir instead of the image, and returns its path.
func (s stack) buildBinary(t *testing.T, dir string) string {
	t.Helper()
	out := s.binaryCopy(t)[1]
	var step string
	for _, r := range s.build.runs {
		if strings.Contains(r, "go build") {
			step = r
		}
	}
	if step == "" || !strings.Contains(step, "-o "+out+" ") {
		t.Fatalf("Dockerfile: stage %s has no RUN ... go build ... -o %s ... (runs: %q)", s.build.name, out, s.build.runs)
	}
	bin := filepath.Join(dir, "mcpsearch")
	step = strings.Replace(step, "-o "+out+" ", "-o '"+bin+"' ", 1)
	// Docker gives RUN its stage's ARGs as environment variables; the
	// stage's WORKDIR holds the repository (COPY . .).
	var env []string
	for k, v := range s.build.args {
		env = append(env, k+"="+v)
	}
	runIn(t, repoRoot, env, "sh", "-c", step)
	return bin
}

// process returns the command line and environment Docker gives the
// container of service name: the image's ENTRYPOINT with the service's
// command (or the image's CMD), the image's ENV and the service's
// environment. bin stands in for the binary's path in the image, and every
// URL naming another service of the stack is sent to its stand-in in
// endpoints ("service:port" -> base URL or, for PostgreSQL, database URL).
func (s stack) process(t *testing.T, name, bin, home string, endpoints map[string]string) (argv, env []string) {
	t.Helper()
	svc, ok := s.compose.services[name]
	if !ok {
		t.Fatalf("docker-compose.yml has no service %s", name)
	}
	if svc.build != "." || svc.image != "" {
		t.Fatalf("service %s: want build: . (the Dockerfile), got build %q image %q", name, svc.build, svc.image)
	}
	argv = slices.Clone(s.final.entrypoint)
	if svc.entrypoint != nil {
		argv = slices.Clone(svc.entrypoint)
	}
	if len(argv) == 0 || argv[0] != s.binaryCopy(t)[2] {
		t.Fatalf("service %s runs %q, not the binary the Dockerfile installs at %s", name, argv, s.binaryCopy(t)[2])
	}
	argv[0] = bin
	if svc.command != nil {
		argv = append(argv, svc.command...)
	} else {
		argv = append(argv, s.final.cmd...)
	}
	env = append([]string{"PATH=" + containerPATH, "HOME=" + home}, s.final.env...)
	keys := make([]string, 0, len(svc.environment))
	for k := range svc.environment {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+s.redirect(t, svc.environment[k], endpoints))
	}
	return argv, env
}

// redirect returns v, or its stand-in when v is a URL naming a service of
// the stack.
func (s stack) redirect(t *testing.T, v string, endpoints map[string]string) string {
	t.Helper()
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return v
	}
	if _, ok := s.compose.services[u.Hostname()]; !ok {
		return v
	}
	stand, ok := endpoints[u.Host]
	if !ok {
		t.Fatalf("%s names %s, which has no stand-in in this test", v, u.Host)
	}
	if strings.HasPrefix(u.Scheme, "postgres") {
		return stand
	}
	su, err := url.Parse(stand)
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme, u.Host = su.Scheme, su.Host
	return u.String()
}

// modelsVolume is where the stack keeps the embedding model.
type modelsVolume struct {
	// dir is the models folder inside the containers: the
	// MCP_embed_models_dir the image (or the service) sets.
	dir string
	// volume is the named volume mcpsearch mounts there.
	volume string
}

// modelsMount returns the models folder of the mcpsearch service and the
// volume mounted on it.
func modelsMount(t *testing.T, s stack) modelsVolume {
	t.Helper()
	var m modelsVolume
	for _, kv := range s.final.env {
		if v, ok := strings.CutPrefix(kv, "MCP_embed_models_dir="); ok {
			m.dir = v
		}
	}
	if v, ok := s.compose.services["mcpsearch"].environment["MCP_embed_models_dir"]; ok {
		m.dir = v
	}
	if m.dir == "" {
		t.Fatal("neither the Dockerfile nor the mcpsearch service sets MCP_embed_models_dir")
	}
	for _, v := range s.compose.services["mcpsearch"].volumes {
		if src, rest, _ := strings.Cut(v, ":"); strings.TrimSuffix(rest, ":ro") == m.dir {
			m.volume = src
		}
	}
	if m.volume == "" {
		t.Fatalf("mcpsearch mounts nothing at its models folder %s (volumes %q)", m.dir, s.compose.services["mcpsearch"].volumes)
	}
	return m
}

// setEnv returns env with name set to value.
func setEnv(env []string, name, value string) []string {
	return append(without(env, name), name+"="+value)
}

// containerPort returns the container side of the one port svc publishes.
func containerPort(t *testing.T, svc composeService) string {
	t.Helper()
	if len(svc.ports) != 1 {
		t.Fatalf("want one published port, got %q", svc.ports)
	}
	f := strings.Split(strings.TrimSuffix(svc.ports[0], "/tcp"), ":")
	return f[len(f)-1]
}

// without returns env without the variable name.
func without(env []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

// flagValue returns the value of --name in argv.
func flagValue(argv []string, name string) (string, int) {
	for i, a := range argv {
		if a == "--"+name && i+1 < len(argv) {
			return argv[i+1], i + 1
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, i
		}
	}
	return "", -1
}

// TestComposeStack starts the binary the way docker compose starts the
// stack: built by the Dockerfile's build step, run with exactly the command
// and environment docker-compose.yml and the Dockerfile give the
// mcpsearch-migrate and mcpsearch containers, with the secrets of a .env
// file made by scripts/compose-env.sh. The services it reaches stand in for
// the other containers: the test PostgreSQL for postgres:5432 and the fake
// SearXNG for searxng:8080. The published port becomes a port of this
// machine's loopback.
func TestComposeStack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	s := loadStack(t)
	dir := t.TempDir()
	bin := s.buildBinary(t, dir)
	searx := searxngtest.New(t)
	db := pgtest.NewEmptyDatabase(t)
	// SearXNG listens on the container port its service publishes;
	// PostgreSQL on the image's default port, published nowhere.
	endpoints := map[string]string{"postgres:5432": db, "searxng:" + containerPort(t, s.compose.services["searxng"]): searx.URL}
	ctx := context.Background()

	t.Run("database URL matches the postgres service", func(t *testing.T) {
		pg := s.compose.services["postgres"].environment
		for _, name := range []string{"mcpsearch-migrate", "mcpsearch"} {
			u, err := url.Parse(s.compose.services[name].environment["DATABASE_URL"])
			if err != nil {
				t.Fatalf("%s DATABASE_URL: %v", name, err)
			}
			pass, _ := u.User.Password()
			if u.Host != "postgres:5432" || u.User.Username() != pg["POSTGRES_USER"] || pass != pg["POSTGRES_PASSWORD"] || u.Path != "/"+pg["POSTGRES_DB"] {
				t.Errorf("%s DATABASE_URL %s does not reach the postgres service as %s/%s with its password", name, u.Redacted(), pg["POSTGRES_USER"], pg["POSTGRES_DB"])
			}
		}
	})

	argv, env := s.process(t, "mcpsearch-migrate", bin, dir, endpoints)
	migrate := exec.Command(argv[0], argv[1:]...)
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("mcpsearch-migrate (%q): %v\n%s", argv[1:], err, out)
	}

	// The models volume is a folder of this machine. The hub stand-in
	// serves a small model of its own, named in place of the catalogue's,
	// whose checksums are those of the real files.
	models := modelsMount(t, s)
	volume := filepath.Join(dir, "volume-"+models.volume)
	h := newFakeHub(t)
	standIn := func(env []string) []string {
		env = setEnv(env, "MCP_embed_models_dir", volume)
		env = setEnv(env, "MCP_embed_hub_url", h.URL)
		if slices.Contains(env, "MCP_embed_model="+model2vec.DefaultModel) {
			env = setEnv(env, "MCP_embed_model", "org/tiny")
		}
		return env
	}
	argv, env = s.process(t, "mcpsearch-models", bin, dir, endpoints)
	env = standIn(env)
	t.Run("model missing", func(t *testing.T) {
		// Before the pull, the server refuses to start and says why.
		argv, env := s.process(t, "mcpsearch", bin, dir, endpoints)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = standIn(env)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "run `mcpsearch models pull org/tiny`") {
			t.Errorf("mcpsearch without its model: %v\n%s", err, out)
		}
	})
	for i, want := range []string{"installed org--tiny", "is installed and intact"} {
		pull := exec.Command(argv[0], argv[1:]...)
		pull.Env = env
		out, err := pull.CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("mcpsearch-models (%q), start %d: %v\n%s", argv[1:], i+1, err, out)
		}
	}
	if got := h.downloads(); len(got) != len(fixtureModelFiles) {
		t.Errorf("two starts of mcpsearch-models downloaded %q; want each file once", got)
	}

	argv, env = s.process(t, "mcpsearch", bin, dir, endpoints)
	env = standIn(env)
	addr, i := flagValue(argv, "addr")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("mcpsearch service: --addr %q: %v", addr, err)
	}
	// Docker publishes a port only if the process listens on the
	// container's own interface, hence all interfaces, and so the keys.
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		t.Errorf("mcpsearch service listens on %s; Docker can only publish a port the container listens on for every interface", addr)
	}
	published := s.compose.services["mcpsearch"].ports
	if len(published) == 0 {
		t.Fatal("mcpsearch service publishes no port")
	}
	for _, p := range published {
		f := strings.Split(strings.TrimSuffix(p, "/tcp"), ":")
		if len(f) != 3 || !net.ParseIP(f[0]).IsLoopback() || f[2] != port {
			t.Errorf("mcpsearch service publishes %q; want 127.0.0.1:HOSTPORT:%s (loopback only)", p, port)
		}
	}

	t.Run("refuses without the key", func(t *testing.T) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = without(env, "MCP_API_KEYS")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Fatalf("without MCP_API_KEYS the server ran or failed otherwise: %v\n%s", err, out)
		}
		for _, want := range []string{"refusing to listen on " + addr + " without API keys", "MCP_API_KEYS", "make compose-env"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("refusal does not say %q:\n%s", want, out)
			}
		}
	})

	// The kernel picks the port, as Docker picks none: the test reads the
	// one bound from the server's log.
	argv = slices.Clone(argv)
	argv[i] = strings.Replace(argv[i], addr, net.JoinHostPort(host, "0"), 1)
	base := startServer(t, argv, env)
	key := s.vars["MCP_API_KEYS"]

	t.Run("healthz", func(t *testing.T) {
		code, body := get(t, base+"/healthz", "")
		if code != http.StatusOK {
			t.Errorf("/healthz: %d %s", code, body)
		}
	})
	t.Run("readyz", func(t *testing.T) {
		code, body := get(t, base+"/readyz", "")
		var r struct {
			Status string
			Checks map[string]struct{ Status string }
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("/readyz: %d %s: %v", code, body, err)
		}
		if code != http.StatusOK || r.Checks["searxng"].Status != "ok" || r.Checks["database"].Status != "ok" {
			t.Errorf("/readyz: %d %s; want 200 with searxng and database ok", code, body)
		}
	})
	t.Run("no key", func(t *testing.T) {
		for _, path := range []string{"/mcp", "/sse", "/metrics"} {
			if code, body := get(t, base+path, ""); code != http.StatusUnauthorized {
				t.Errorf("GET %s without a key: %d %s, want 401", path, code, body)
			}
			if code, body := get(t, base+path, "not-"+key); code != http.StatusUnauthorized {
				t.Errorf("GET %s with a wrong key: %d %s, want 401", path, code, body)
			}
		}
	})
	for _, tc := range []struct{ name, path string }{{"streamable HTTP", "/mcp"}, {"SSE", "/sse"}} {
		t.Run(tc.name, func(t *testing.T) {
			hc := &http.Client{Transport: bearer{key: key, next: http.DefaultTransport}}
			var transport mcp.Transport = &mcp.StreamableClientTransport{Endpoint: base + tc.path, HTTPClient: hc, MaxRetries: -1}
			if tc.path == "/sse" {
				transport = &mcp.SSEClientTransport{Endpoint: base + tc.path, HTTPClient: hc}
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "deploy-test", Version: "1.0.0"}, nil)
			session, err := client.Connect(cctx, transport, nil)
			if err != nil {
				t.Fatalf("initialize over %s: %v", tc.path, err)
			}
			defer session.Close()
			tools, err := session.ListTools(cctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			for _, want := range []string{"web_search", "search_docs", "list_files", "get_chunk"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list = %v, lacks %s", names, want)
				}
			}
			before := searx.Requests()
			res, err := session.CallTool(cctx, &mcp.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "compose " + tc.name}})
			if err != nil || res.IsError {
				t.Fatalf("web_search: %v %+v", err, res)
			}
			if searx.Requests() == before {
				t.Error("web_search did not reach the SearXNG the compose file names")
			}
		})
	}
}

// startServer starts argv with env, waits until it logs the address it
// listens on, and returns its base URL on the loopback interface. At the
// end of the test it sends SIGTERM and checks the server exits with 0.
func startServer(t *testing.T, argv, env []string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs strings.Builder
	output := func() string { mu.Lock(); defer mu.Unlock(); return logs.String() }
	listening := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			var rec struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
				select {
				case listening <- rec.Addr:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	waited := make(chan error, 1)
	go func() {
		<-scanned
		waited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		select {
		case err := <-waited:
			t.Errorf("server exited before the end of the test: %v\n%s", err, output())
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-waited:
			if err != nil {
				t.Errorf("server exit after SIGTERM: %v\n%s", err, output())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("server still running 30s after SIGTERM\n%s", output())
		}
	})
	select {
	case addr := <-listening:
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("listening on %q: %v", addr, err)
		}
		return "http://127.0.0.1:" + port
	case err := <-waited:
		// Put it back for the cleanup, which reports it with the output.
		waited <- err
		t.FailNow()
	case <-time.After(2 * time.Minute):
		t.Fatalf("server did not log its address within 2 minutes\n%s", output())
	}
	return ""
}

// get sends GET url with key as bearer token (none when empty) and returns
// the status and at most 64 KiB of the body. Event streams (SSE) are not
// read past their headers.
func get(t *testing.T, url, key string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, body
}

// bearer adds an Authorization header to every request.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// TestComposeNeedsEnvFile checks that the stack cannot come up without
// the secrets of .env: each missing one stops Compose with a message
// saying how to make the file, before any container starts.
func TestComposeNeedsEnvFile(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), ".env")
	runIn(t, repoRoot, nil, "bash", filepath.Join("scripts", "compose-env.sh"), envFile)
	vars, err := readEnvFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"MCP_API_KEYS", "SEARXNG_SECRET", "POSTGRES_PASSWORD"} {
		if len(vars[name]) < 32 {
			t.Errorf("compose-env.sh made %s=%q; want at least 32 random hex digits", name, vars[name])
		}
		for _, value := range []string{"", "unset"} {
			v := maps.Clone(vars)
			if value == "" {
				v[name] = ""
			} else {
				delete(v, name)
			}
			_, err := loadCompose(v)
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "make compose-env") {
				t.Errorf("docker-compose.yml with %s %s: %v; want it refused, naming the variable and make compose-env", name, map[bool]string{true: "empty", false: "unset"}[value == ""], err)
			}
		}
	}
	if vars["MCP_API_KEYS"] == vars["SEARXNG_SECRET"] || vars["SEARXNG_SECRET"] == vars["POSTGRES_PASSWORD"] {
		t.Error("compose-env.sh reused one secret for two variables")
	}

	// A second run keeps the file: the database volume already has the
	// password and clients already hold the key.
	before, _ := os.ReadFile(envFile)
	runIn(t, repoRoot, nil, "bash", filepath.Join("scripts", "compose-env.sh"), envFile)
	if after, _ := os.ReadFile(envFile); string(after) != string(before) {
		t.Error("compose-env.sh rewrote an existing .env")
	}
	if fi, err := os.Stat(envFile); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf(".env is readable by others: %v %v", fi.Mode(), err)
	}

	// .env.example, copied unchanged, must not start the stack either,
	// and must list every variable the compose file reads.
	example, err := readEnvFile(filepath.Join(repoRoot, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loadCompose(example); err == nil {
		t.Error("docker-compose.yml accepts .env.example unchanged, with its empty secrets")
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range interpolateRE.FindAllStringSubmatch(string(raw), -1) {
		name := m[2] + m[6]
		if _, ok := example[name]; name != "" && !ok {
			t.Errorf("docker-compose.yml reads %s, which .env.example does not list", name)
		}
		if _, ok := vars[name]; name != "" && !ok {
			t.Errorf("docker-compose.yml reads %s, which compose-env.sh does not write", name)
		}
	}
}

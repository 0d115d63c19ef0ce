package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// nodeRunLimit bounds one run of a Node client; ts-client.mjs has its own
// watchdog below this.
const nodeRunLimit = 90 * time.Second

// requireNode skips the test, or fails it when MCPSEARCH_INTEROP=1, unless
// node and the npm packages of interop/ are installed: the TypeScript SDK,
// the Inspector and the packages named in extra (as under node_modules/).
func requireNode(t *testing.T, extra ...string) {
	t.Helper()
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node is not on PATH")
	}
	pkgs := []string{"@modelcontextprotocol/sdk", "@modelcontextprotocol/inspector"}
	for _, pkg := range append(pkgs, extra...) {
		p := "node_modules/" + pkg + "/package.json"
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, "interop/"+p+" is missing")
			break
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := strings.Join(missing, "; ") + ": run `npm ci` in interop/ (or `make test`)"
	if os.Getenv("MCPSEARCH_INTEROP") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// tsReport is the JSON line ts-client.mjs and langchain-client.mjs print.
type tsReport struct {
	Scenario  string         `json:"scenario"`
	Transport string         `json:"transport"`
	OK        bool           `json:"ok"`
	Checks    int            `json:"checks"`
	Error     string         `json:"error"`
	Details   map[string]any `json:"details"`
}

// tsArgs are the ts-client.mjs flags that reach tg.
func tsArgs(tg target) []string {
	if tg.transport != "stdio" {
		args := []string{"--transport", tg.transport, "--url", tg.url}
		if tg.key != "" {
			args = append(args, "--header", "Authorization: Bearer "+tg.key)
		}
		return args
	}
	args := []string{"--transport", "stdio", "--command", binPath, "--arg", "serve", "--arg", "--transport", "--arg", "stdio"}
	for _, kv := range tg.cfg.pairs() {
		args = append(args, "--env", kv)
	}
	return args
}

// runTS runs one scenario of ts-client.mjs against tg and fails the test
// unless it reports success.
func runTS(t *testing.T, tg target, scenario string, extra ...string) tsReport {
	t.Helper()
	return runNodeScript(t, "ts-client.mjs", scenario, tg.transport, append(tsArgs(tg), extra...))
}

// runNodeScript runs one scenario of a client script that reports like
// ts-client.mjs (langchain-client.mjs does too) and fails the test unless
// it reports success.
func runNodeScript(t *testing.T, script, scenario, transport string, flags []string) tsReport {
	t.Helper()
	args := append([]string{script, "--scenario", scenario}, flags...)
	ctx, cancel := context.WithTimeout(context.Background(), nodeRunLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	rep, perr := lastJSONLine[tsReport](stdout.String())
	switch {
	case err != nil:
		t.Fatalf("node %s: %v\nreport: %s\nstderr:\n%s", strings.Join(args, " "), err, strings.TrimSpace(stdout.String()), tail(stderr.String(), 60))
	case perr != nil:
		t.Fatalf("node %s exited 0 without a report: %v\nstdout:\n%s", strings.Join(args, " "), perr, stdout.String())
	case !rep.OK || rep.Scenario != scenario || rep.Checks == 0:
		t.Fatalf("node %s exited 0 with a report that is not a success of %s: %+v", strings.Join(args, " "), scenario, rep)
	}
	t.Logf("%s %s over %s: %d checks passed %v", script, scenario, transport, rep.Checks, rep.Details)
	return rep
}

// lastJSONLine decodes the last non-empty line of out.
func lastJSONLine[T any](out string) (T, error) {
	var v T
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return v, fmt.Errorf("no output")
	}
	if err := json.Unmarshal([]byte(last), &v); err != nil {
		return v, fmt.Errorf("last line %q: %w", last, err)
	}
	return v, nil
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = append([]string{"..."}, ls[len(ls)-lines:]...)
	}
	return strings.Join(ls, "\n")
}

// TestTypeScriptSDK runs every scenario of ts-client.mjs, the official
// TypeScript SDK's Client, over every transport.
func TestTypeScriptSDK(t *testing.T) {
	requireNode(t)
	for _, tc := range transportCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Each transport has its own fake, so modes set below do not
			// leak into the other transports running in parallel.
			fake := searxngtest.New(t)
			cfg := baseConfig(fake.URL)
			tg := newTarget(t, tc, cfg)

			t.Run("basic", func(t *testing.T) {
				const q = "golang generics"
				before := fake.Requests()
				// The fake has PerPage distinct URLs plus one repeated by
				// another engine; asking for more must give exactly PerPage.
				rep := runTS(t, tg, "basic", "--query", q, "--max-results", "10",
					"--expect-results", strconv.Itoa(searxngtest.PerPage),
					"--expect-first-url", searxngtest.ResultURL(q, 1),
					"--expect-merged-engine", searxngtest.DuplicateEngine)
				if got := fake.Requests() - before; got != 1 {
					t.Errorf("SearXNG got %d requests for one web_search, want 1", got)
				}
				if tc.transport == "http" && !tc.stateless && rep.Details["session_terminated"] != true {
					t.Errorf("stateful streamable HTTP gave the TypeScript client no session to terminate: %v", rep.Details)
				}
			})
			t.Run("invalid", func(t *testing.T) {
				before := fake.Requests()
				runTS(t, tg, "invalid")
				if got := fake.Requests() - before; got != 0 {
					t.Errorf("invalid arguments reached SearXNG %d times, want 0", got)
				}
			})
			t.Run("unknown-tool", func(t *testing.T) {
				runTS(t, tg, "unknown-tool")
			})
			for _, uc := range upstreamCases {
				t.Run("upstream/"+uc.name, func(t *testing.T) {
					setMode(t, fake, uc.mode)
					runTS(t, tg, "upstream", "--query", "upstream "+uc.mode.String(),
						"--expect-code", uc.code, "--expect-retryable", strconv.FormatBool(uc.retryable),
						"--expect-message-substring", uc.substring)
				})
			}
			t.Run("timeout", func(t *testing.T) {
				slow := newTarget(t, tc, timeoutConfig(cfg))
				setDelay(t, fake, 30*time.Second)
				runTS(t, slow, "timeout", "--query", "slow search")
			})
			t.Run("upstream/searxng down", func(t *testing.T) {
				down := newTarget(t, tc, cfg.with("MCP_web_search_searxng_url="+fake.URLDown()))
				runTS(t, down, "upstream", "--query", "nobody listens",
					"--expect-code", "TOOL_ERROR", "--expect-retryable", "true", "--expect-message-substring", "unreachable")
			})
			t.Run("ratelimited", func(t *testing.T) {
				// A server of its own: the bucket is per process and tool.
				limited := newTarget(t, tc, cfg.with("MCP_rate_limit_per_minute=1", "MCP_rate_limit_burst=2"))
				before := fake.Requests()
				rep := runTS(t, limited, "ratelimited", "--burst", "2", "--query", "limited")
				if got := fake.Requests() - before; got != 2 {
					t.Errorf("SearXNG got %d requests for 2 allowed calls and 1 limited one, want 2", got)
				}
				if ms, _ := rep.Details["retry_after_ms"].(float64); ms > float64(time.Minute.Milliseconds()) {
					t.Errorf("retry_after_ms %v exceeds the refill interval of one token per minute", ms)
				}
			})
		})
	}
}

// inspectorBin is the MCP Inspector's command, installed by npm ci.
const inspectorBin = "node_modules/.bin/mcp-inspector"

// runInspector runs the MCP Inspector in CLI mode against a stdio mcpsearch
// configured by cfg, decodes the JSON result it prints into out and returns
// its exit status.
func runInspector(t *testing.T, cfg config, out any, args ...string) int {
	t.Helper()
	full := []string{inspectorBin, "--cli"}
	for _, kv := range cfg.pairs() {
		full = append(full, "-e", kv)
	}
	full = append(full, binPath, "serve", "--transport", "stdio")
	full = append(full, args...)
	ctx, cancel := context.WithTimeout(context.Background(), nodeRunLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", full...)
	// The Inspector keeps a server catalog; keep it out of the home directory.
	cmd.Env = append(os.Environ(), "MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "catalog.json"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("node %s: %v", strings.Join(full, " "), err)
		}
		code = ee.ExitCode()
	}
	// Its stdout is the method's result as one JSON document.
	if err := json.NewDecoder(&stdout).Decode(out); err != nil {
		t.Fatalf("inspector %s printed no JSON result (exit %d): %v\nstdout:\n%s\nstderr:\n%s",
			strings.Join(args, " "), code, err, stdout.String(), tail(stderr.String(), 40))
	}
	return code
}

// inspectorCall is the tools/call result as the Inspector prints it.
type inspectorCall struct {
	IsError           bool         `json:"isError"`
	Content           []content    `json:"content"`
	StructuredContent searchOutput `json:"structuredContent"`
}

// TestInspectorCLI drives mcpsearch over stdio with the MCP Inspector's CLI
// mode, a second client built on the TypeScript SDK's newer client package.
func TestInspectorCLI(t *testing.T) {
	requireNode(t)
	fake := searxngtest.New(t)
	cfg := baseConfig(fake.URL)

	t.Run("tools/list", func(t *testing.T) {
		var res struct {
			Tools []struct {
				Name        string `json:"name"`
				InputSchema struct {
					Required []string `json:"required"`
				} `json:"inputSchema"`
			} `json:"tools"`
		}
		if code := runInspector(t, cfg, &res, "--method", "tools/list"); code != 0 {
			t.Fatalf("inspector tools/list exited %d", code)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			if tool.Name == "web_search" && strings.Join(tool.InputSchema.Required, ",") != "query" {
				t.Errorf("web_search inputSchema.required = %v, want [query]", tool.InputSchema.Required)
			}
		}
		if strings.Join(names, ",") != "web_search" {
			t.Errorf("tools with documents disabled = %v, want [web_search]", names)
		}
	})

	t.Run("tools/call", func(t *testing.T) {
		const q = "inspector check"
		var res inspectorCall
		code := runInspector(t, cfg, &res, "--method", "tools/call", "--tool-name", "web_search",
			"--tool-arg", "query="+q, "max_results=3")
		if code != 0 || res.IsError {
			t.Fatalf("inspector tools/call exited %d, isError %v: %+v", code, res.IsError, res.Content)
		}
		if got := len(res.StructuredContent.Results); got != 3 {
			t.Fatalf("got %d results, want 3", got)
		}
		if got, want := res.StructuredContent.Results[0].URL, searxngtest.ResultURL(q, 1); got != want {
			t.Errorf("first URL = %q, want %q", got, want)
		}
		if len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "1. "+searxngtest.ResultTitle(q, 1)) {
			t.Errorf("text block does not list the first result: %+v", res.Content)
		}
	})

	t.Run("tools/call error", func(t *testing.T) {
		setMode(t, fake, searxngtest.FormatDisabled)
		var res inspectorCall
		// The Inspector exits non-zero for a result with isError set.
		if code := runInspector(t, cfg, &res, "--method", "tools/call", "--tool-name", "web_search", "--tool-arg", "query=forbidden"); code == 0 {
			t.Errorf("inspector exited 0 for an error result")
		}
		if !res.IsError || len(res.Content) == 0 {
			t.Fatalf("want an error result, got %+v", res)
		}
		var body struct {
			Error toolError `json:"error"`
		}
		if err := json.Unmarshal([]byte(res.Content[0].Text), &body); err != nil {
			t.Fatalf("error text is not JSON: %q", res.Content[0].Text)
		}
		if body.Error.Code != "TOOL_ERROR" || body.Error.Retryable == nil || *body.Error.Retryable {
			t.Errorf("error = %+v, want TOOL_ERROR not retryable", body.Error)
		}
	})
}

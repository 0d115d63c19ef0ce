package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/internal/closedport"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
)

// replicaKey is the one API key the replicas of these tests are called with.
const replicaKey = "replica-key-0123456789abcdef"

// serveReplicas builds n servers from vars as `mcpsearch serve` does and
// serves their HTTP surfaces until the test ends, when they are stopped as
// serve stops, all at once: a stop can wait for the audit rows a database
// does not take.
func serveReplicas(t *testing.T, vars map[string]string, n int) []*httptest.Server {
	t.Helper()
	var environ []string
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	env := &environment{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, environ: environ}
	cfg, _, err := loadConfig(env, "serve", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var hss []*httptest.Server
	var stops []func()
	t.Cleanup(func() {
		for _, hs := range hss {
			hs.Close()
		}
		var wg sync.WaitGroup
		for _, stop := range stops {
			wg.Go(stop)
		}
		wg.Wait()
	})
	for range n {
		srv, stop, err := newServer(context.Background(), cfg, newLogger(io.Discard, cfg.LogFormat, cfg.LogLevel), nil)
		if err != nil {
			t.Fatal(err)
		}
		stops = append(stops, stop)
		hss = append(hss, httptest.NewServer(srv.Handler()))
	}
	return hss
}

// replicaVars configures a replica serving web_search over HTTP behind
// replicaKey, with a burst of 5 and perMinute tokens a minute, on top of
// extra.
func replicaVars(searxngURL string, perMinute int, extra map[string]string) map[string]string {
	vars := map[string]string{
		"MCP_transport":              "http",
		"MCP_API_KEYS":               replicaKey,
		"MCP_web_search_searxng_url": searxngURL,
		"MCP_web_search_cache_ttl":   "0",
		"MCP_docs_enabled":           "false",
		"MCP_fetch_url_enabled":      "false",
		"MCP_rate_limit_burst":       "5",
		"MCP_rate_limit_per_minute":  strconv.Itoa(perMinute),
		"MCP_log_level":              "error",
	}
	for k, v := range extra {
		vars[k] = v
	}
	return vars
}

// session opens an MCP session over streamable HTTP on hs with replicaKey.
func session(t *testing.T, hs *httptest.Server) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: bearer{key: replicaKey, next: http.DefaultTransport}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "replica-test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// quickCalls makes n web_search calls in turn, alternating between the
// sessions, and returns how many passed and how long they took. Every
// other outcome than a pass or RATE_LIMITED fails the test.
func quickCalls(t *testing.T, sessions []*mcp.ClientSession, n int) (int, time.Duration) {
	t.Helper()
	passed := 0
	start := time.Now()
	for i := range n {
		res, err := sessions[i%len(sessions)].CallTool(context.Background(), &mcp.CallToolParams{Name: "web_search",
			Arguments: map[string]any{"query": fmt.Sprintf("replicas %d", i), "max_results": 1}})
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		if !res.IsError {
			passed++
			continue
		}
		var body struct{ Error struct{ Code string } }
		text := ""
		if len(res.Content) > 0 {
			if tc, ok := res.Content[0].(*mcp.TextContent); ok {
				text = tc.Text
			}
		}
		if err := json.Unmarshal([]byte(text), &body); err != nil || body.Error.Code != "RATE_LIMITED" {
			t.Fatalf("call %d failed with %q, want a pass or RATE_LIMITED", i+1, text)
		}
	}
	return passed, time.Since(start)
}

// TestReplicasShareOneBudget: two servers built as serve builds them, on
// one DATABASE_URL, behind one key, let 20 quick calls through as one
// would: the burst, and what refills while the calls are made. With the
// memory store each replica has its budget.
func TestReplicasShareOneBudget(t *testing.T) {
	fake := searxngtest.New(t)
	tests := []struct {
		name      string
		perMinute int
		store     string
	}{
		// One token a minute: the test's own duration adds nothing.
		{"1 a minute", 1, "auto"},
		{"30 a minute, the default", 30, "auto"},
		{"1 a minute, store postgres", 1, "postgres"},
		{"1 a minute, store memory", 1, "memory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := replicaVars(fake.URL, tt.perMinute, map[string]string{
				"DATABASE_URL":         pgtest.NewDatabase(t),
				"MCP_rate_limit_store": tt.store,
			})
			replicas := serveReplicas(t, vars, 2)
			sessions := []*mcp.ClientSession{session(t, replicas[0]), session(t, replicas[1])}
			passed, took := quickCalls(t, sessions, 20)
			const burst = 5
			// The limiter's own pool is in /metrics when it exists, and
			// served the calls.
			acquired := metric(t, replicas[0], `mcpsearch_db_pool_acquire_total{pool="rate_limits"}`)
			if tt.store == "memory" {
				// Each replica spends its own burst.
				if passed < 2*burst {
					t.Errorf("%d of 20 calls passed through two replicas with buckets in memory, want at least %d", passed, 2*burst)
				}
				if acquired >= 0 {
					t.Errorf("buckets in memory, yet /metrics has a rate_limits pool (%v acquired)", acquired)
				}
				return
			}
			if acquired <= 0 {
				t.Errorf("/metrics: the rate_limits pool acquired %v connections; want the calls' (missing: -1)", acquired)
			}
			// A token comes back every 60/perMinute seconds, from the first
			// call on.
			bound := burst + int(took.Seconds()*float64(tt.perMinute)/60)
			t.Logf("%d of 20 calls passed in %s; bound %d", passed, took.Round(time.Millisecond), bound)
			if passed < burst || passed > bound {
				t.Errorf("%d of 20 calls through two replicas passed, want the burst, %d, up to %d with what refilled in %s",
					passed, burst, bound, took.Round(time.Millisecond))
			}
		})
	}
}

// TestReplicasWithTheDatabaseDown: with DATABASE_URL unreachable, calls are
// decided as MCP_rate_limit_on_db_failure says (local: each replica on its
// own, so two let through twice the burst), each counted in /metrics.
func TestReplicasWithTheDatabaseDown(t *testing.T) {
	fake := searxngtest.New(t)
	down := fmt.Sprintf("postgres://mcpsearch@%s/mcpsearch?sslmode=disable&connect_timeout=1", closedport.Reserve(t).Addr())
	tests := []struct {
		onFailure string
		passed    int
	}{
		{"local", 10},
		{"open", 20},
		{"closed", 0},
	}
	for _, tt := range tests {
		t.Run(tt.onFailure, func(t *testing.T) {
			// Stopping waits for the audit rows the database does not
			// take: the cases wait together.
			t.Parallel()
			vars := replicaVars(fake.URL, 1, map[string]string{
				"DATABASE_URL":                 down,
				"MCP_rate_limit_on_db_failure": tt.onFailure,
			})
			replicas := serveReplicas(t, vars, 2)
			passed, took := quickCalls(t, []*mcp.ClientSession{session(t, replicas[0]), session(t, replicas[1])}, 20)
			bound := tt.passed
			if tt.onFailure == "local" {
				// Each replica's own bucket gets a token a minute back.
				bound += 2 * int(took/time.Minute)
			}
			if passed < tt.passed || passed > bound {
				t.Errorf("%d of 20 calls passed with the database down and %s, want %d, up to %d with what refilled in %s",
					passed, tt.onFailure, tt.passed, bound, took.Round(time.Millisecond))
			}
			for i, r := range replicas {
				if got := metric(t, r, `mcpsearch_rate_limit_fallbacks_total{tool="web_search"}`); got != 10 {
					t.Errorf("replica %d: mcpsearch_rate_limit_fallbacks_total %v, want its 10 calls", i, got)
				}
			}
		})
	}
}

func TestBucketIdle(t *testing.T) {
	for _, tt := range []struct {
		name  string
		base  config.RateLimit
		tools map[string]config.RateLimit
		want  time.Duration
	}{
		{"defaults fill in seconds: an hour", config.RateLimit{PerMinute: 30, Burst: 5}, nil, time.Hour},
		{"a slow default", config.RateLimit{PerMinute: 1, Burst: 100}, nil, 200 * time.Minute},
		{"a slow tool", config.RateLimit{PerMinute: 30, Burst: 5},
			map[string]config.RateLimit{"fetch_url": {PerMinute: 2, Burst: -1}, "web_search": {PerMinute: 1, Burst: 90}}, 180 * time.Minute},
		{"unlimited", config.RateLimit{PerMinute: 0, Burst: 1000}, nil, time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.RateLimit, cfg.RateLimits = tt.base, tt.tools
			if got := bucketIdle(cfg); got != tt.want {
				t.Errorf("bucketIdle = %v, want %v", got, tt.want)
			}
		})
	}
}

// metric returns the value of series (a name and its labels) in hs's
// /metrics, or -1 when hs does not export it.
func metric(t *testing.T, hs *httptest.Server, series string) float64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, hs.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+replicaKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("/metrics: %q: %v", line, err)
			}
			return n
		}
	}
	return -1
}

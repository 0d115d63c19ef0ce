package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/internal/closedport"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/ratelimit"
)

// openTestPool opens a pool on url, closed when the test ends.
func openTestPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// replica is one replica of a deployment behind the two test keys, served
// over HTTP, whose rate limits are kept in the database at limitsURL
// through a pool of its own.
func replica(t *testing.T, limitsURL string, opts ratelimit.Options, tweak func(*config.Config), deps func(*Deps)) *httptest.Server {
	t.Helper()
	keys, err := LoadAPIKeys([]string{fullKey, scopedKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessDeps(t, func(c *config.Config) {
		c.Transports = []string{"http"}
		c.WebSearchCacheTTL = 0
		if tweak != nil {
			tweak(c)
		}
	}, func(d *Deps) {
		d.APIKeys = keys
		d.RateLimits = ratelimit.New(openTestPool(t, limitsURL), opts)
		if deps != nil {
			deps(d)
		}
	})
	hs := httptest.NewServer(h.srv.Handler())
	t.Cleanup(hs.Close)
	return hs
}

// invoke calls web_search through the REST facade of hs with key and
// returns the response, its body read.
func invoke(t *testing.T, hs *httptest.Server, key string, n int) (*http.Response, restResult) {
	t.Helper()
	resp := post(t, hs.URL+"/mcp/tools/web_search", key, fmt.Sprintf(`{"query":"shared %d","max_results":1}`, n), nil)
	var out restResult
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("call %d: %v", n, err)
	}
	return resp, out
}

// TestReplicasShareRateLimits: two replicas on one database spend from one
// bucket per key and tool, and from one global ceiling per tool; the
// X-RateLimit-* headers describe that one bucket.
func TestReplicasShareRateLimits(t *testing.T) {
	opts := ratelimit.Options{Timeout: 10 * time.Second}
	t.Run("per key", func(t *testing.T) {
		url := pgtest.NewDatabase(t)
		// One token a minute: none comes back during the test.
		limits := func(c *config.Config) {
			c.RateLimits = map[string]config.RateLimit{"web_search": {PerMinute: 1, Burst: 3}}
		}
		rs := []*httptest.Server{replica(t, url, opts, limits, nil), replica(t, url, opts, limits, nil)}
		for i := range 6 {
			resp, out := invoke(t, rs[i%2], fullKey, i)
			want := http.StatusOK
			if i >= 3 {
				want = http.StatusTooManyRequests
			}
			if resp.StatusCode != want {
				t.Errorf("call %d (replica %d): status %d %s, want %d", i+1, i%2, resp.StatusCode, out.ErrorType, want)
			}
			remaining, err := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining"))
			if err != nil || remaining != max(2-i, 0) || resp.Header.Get("X-RateLimit-Limit") != "1" {
				t.Errorf("call %d: X-RateLimit-Limit %q, -Remaining %q; want 1 and %d, the shared bucket's tokens left",
					i+1, resp.Header.Get("X-RateLimit-Limit"), resp.Header.Get("X-RateLimit-Remaining"), max(2-i, 0))
			}
			if want == http.StatusTooManyRequests && (out.ErrorType != CodeRateLimited || out.RetryAfterMS <= 0 || !strings.Contains(out.Error, "exceeded")) {
				t.Errorf("call %d: %s %q (retry after %d ms), want RATE_LIMITED with a wait", i+1, out.ErrorType, out.Error, out.RetryAfterMS)
			}
		}
		// The other key's bucket is its own.
		if resp, out := invoke(t, rs[1], scopedKey, 6); resp.StatusCode != http.StatusOK {
			t.Errorf("the other key's first call: %d %s %q", resp.StatusCode, out.ErrorType, out.Error)
		}
	})
	t.Run("global ceiling", func(t *testing.T) {
		url := pgtest.NewDatabase(t)
		limits := func(c *config.Config) {
			c.RateLimits = map[string]config.RateLimit{"web_search": {PerMinute: 600, Burst: 100, Global: 3}}
		}
		rs := []*httptest.Server{replica(t, url, opts, limits, nil), replica(t, url, opts, limits, nil)}
		passed := 0
		start := time.Now()
		for i, key := range []string{fullKey, scopedKey, fullKey, scopedKey, fullKey, scopedKey} {
			resp, out := invoke(t, rs[i%2], key, i)
			switch resp.StatusCode {
			case http.StatusOK:
				passed++
			case http.StatusTooManyRequests:
				// The caller's own bucket kept its token: it is full
				// but for the calls that passed.
				if out.ErrorType != CodeRateLimited || resp.Header.Get("X-RateLimit-Remaining") == "" {
					t.Errorf("call %d refused: %s %q, X-RateLimit-Remaining %q", i+1, out.ErrorType, out.Error, resp.Header.Get("X-RateLimit-Remaining"))
				}
			default:
				t.Errorf("call %d: %d %s %q", i+1, resp.StatusCode, out.ErrorType, out.Error)
			}
		}
		// The ceiling refills a call every 20 seconds.
		if bound := 3 + int(time.Since(start)/(20*time.Second)); passed < 3 || passed > bound {
			t.Errorf("%d of 6 calls by two keys through two replicas passed, want the ceiling, 3, up to %d with what refilled", passed, bound)
		}
	})
}

// downURL is a database URL on a local port that refuses connections for
// the rest of the test.
func downURL(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("postgres://mcpsearch@%s/mcpsearch?sslmode=disable&connect_timeout=1", closedport.Reserve(t).Addr())
}

// TestSharedRateLimitsDatabaseDown: with the buckets' database unreachable
// calls are decided as MCP_rate_limit_on_db_failure says, each counted in
// mcpsearch_rate_limit_fallbacks_total, and refused ones are audited as
// RATE_LIMITED like any other.
func TestSharedRateLimitsDatabaseDown(t *testing.T) {
	tests := []struct {
		onFailure ratelimit.Failure
		passed    int
		refills   bool // whether a token a minute comes back
		message   string
	}{
		// This process's own bucket: the burst.
		{ratelimit.FailLocal, 2, true, "rate limit of web_search exceeded"},
		{ratelimit.FailOpen, 6, false, ""},
		{ratelimit.FailClosed, 0, false, "the rate limit of web_search cannot be checked right now"},
	}
	for _, tt := range tests {
		t.Run(tt.onFailure.String(), func(t *testing.T) {
			auditPool := openTestPool(t, pgtest.NewDatabase(t))
			w := audit.NewWriter(auditPool, audit.Options{FlushInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			hs := replica(t, downURL(t), ratelimit.Options{OnFailure: tt.onFailure, Cooldown: time.Hour}, func(c *config.Config) {
				c.RateLimits = map[string]config.RateLimit{"web_search": {PerMinute: 1, Burst: 2}}
			}, func(d *Deps) { d.Audit = w })
			passed := 0
			start := time.Now()
			for i := range 6 {
				resp, out := invoke(t, hs, fullKey, i)
				switch {
				case resp.StatusCode == http.StatusOK:
					passed++
				case resp.StatusCode != http.StatusTooManyRequests || out.ErrorType != CodeRateLimited || out.RetryAfterMS <= 0 || !strings.Contains(out.Error, tt.message):
					t.Errorf("call %d: %d %s %q, want 429 RATE_LIMITED saying %q", i+1, resp.StatusCode, out.ErrorType, out.Error, tt.message)
				}
			}
			bound := tt.passed
			if tt.refills {
				bound += int(time.Since(start) / time.Minute)
			}
			if passed < tt.passed || passed > bound {
				t.Errorf("%d of 6 calls passed, want %d, up to %d with what refilled", passed, tt.passed, bound)
			}
			if got := metricValue(t, hs, `mcpsearch_rate_limit_fallbacks_total{tool="web_search"}`); got != 6 {
				t.Errorf("mcpsearch_rate_limit_fallbacks_total = %v, want 6", got)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			rows, err := auditPool.Query(ctx, `SELECT coalesce(error_code, 'ok') FROM chat_mcp_tool_calls`)
			if err != nil {
				t.Fatal(err)
			}
			codes, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			audited := map[string]int{}
			for _, c := range codes {
				audited[c]++
			}
			if audited["ok"] != passed || audited[CodeRateLimited] != 6-passed {
				t.Errorf("audit rows by outcome %v, want %d ok and %d %s", audited, passed, 6-passed, CodeRateLimited)
			}
		})
	}
}

// metricValue reads one series of hs's /metrics.
func metricValue(t *testing.T, hs *httptest.Server, series string) float64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+fullKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no series %s in /metrics", series)
	return 0
}

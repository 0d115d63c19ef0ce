package config

import (
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/readmetest"
)

func env(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func load(t *testing.T, vars map[string]string, args ...string) (Config, error) {
	t.Helper()
	c := Default()
	if err := c.LoadEnv(env(vars)); err != nil {
		return c, err
	}
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func TestEnvAndFlags(t *testing.T) {
	c, err := load(t, map[string]string{
		"MCP_web_search_searxng_url":                   "http://searx:8080",
		"MCP_web_search_timeout_ms":                    "2500",
		"MCP_web_search_max_results":                   "8",
		"MCP_rate_limit_per_minute":                    "60",
		"MCP_web_search_rate_limit_burst":              "2",
		"MCP_search_docs_rate_limit_per_minute":        "600",
		"MCP_search_docs_rate_limit_global_per_minute": "100",
		"MCP_web_search_cache_ttl":                     "90",
		"MCP_transport":                                "http,sse",
	}, "--web-search-max-results", "9", "--stateless", "--rate-limit", "get_chunk=5/1")
	if err != nil {
		t.Fatal(err)
	}
	if c.SearXNGURL != "http://searx:8080" || c.WebSearchTimeout != 2500*time.Millisecond || c.WebSearchCacheTTL != 90*time.Second {
		t.Errorf("env not applied: %+v", c)
	}
	if c.WebSearchMaxResults != 9 || !c.Stateless {
		t.Errorf("flags did not override: max %d stateless %v", c.WebSearchMaxResults, c.Stateless)
	}
	for tool, want := range map[string]RateLimit{
		"web_search":  {60, 2, 0},
		"search_docs": {600, 5, 100},
		"get_chunk":   {5, 1, 0},
		"list_files":  {60, 5, 0},
	} {
		if got := c.RateLimitFor(tool); got != want {
			t.Errorf("RateLimitFor(%s) = %+v, want %+v", tool, got, want)
		}
	}
	if !c.Serves("http") || !c.Serves("sse") || c.Serves("stdio") {
		t.Errorf("transports %v", c.Transports)
	}
}

// TestVectorWeight checks how the hybrid weight is read: auto (0, which
// the documents store resolves for its embedder) or a number.
func TestVectorWeight(t *testing.T) {
	tests := []struct {
		vars map[string]string
		args []string
		want float64
	}{
		{nil, nil, 0},
		{map[string]string{"MCP_docs_vector_weight": "0.5"}, nil, 0.5},
		{map[string]string{"MCP_docs_vector_weight": "2"}, []string{"--vector-weight", "AUTO"}, 0},
		{nil, []string{"--vector-weight", "10"}, 10},
	}
	for _, tt := range tests {
		c, err := load(t, tt.vars, tt.args...)
		if err != nil {
			t.Fatalf("%v %v: %v", tt.vars, tt.args, err)
		}
		if c.VectorWeight != tt.want {
			t.Errorf("%v %v: VectorWeight = %v, want %v", tt.vars, tt.args, c.VectorWeight, tt.want)
		}
	}
}

func TestBadValuesNameTheVariable(t *testing.T) {
	tests := []struct {
		vars map[string]string
		args []string
		want string
	}{
		{map[string]string{"MCP_web_search_timeout_ms": "soon"}, nil, "MCP_web_search_timeout_ms"},
		{map[string]string{"MCP_docs_vector_weight": "0"}, nil, "MCP_docs_vector_weight"},
		{map[string]string{"MCP_docs_vector_weight": "11"}, nil, "MCP_docs_vector_weight"},
		{nil, []string{"--vector-weight", "heavy"}, "auto or a number"},
		{map[string]string{"MCP_web_search_enabled": "perhaps"}, nil, "MCP_web_search_enabled"},
		{map[string]string{"MCP_rate_limit_burst": "-3"}, nil, "MCP_rate_limit_burst"},
		{map[string]string{"MCP_web_search_searxng_url": "searx:8080"}, nil, "MCP_web_search_searxng_url"},
		{map[string]string{"MCP_transport": "stdio,http"}, nil, "stdio cannot be combined"},
		{map[string]string{"MCP_web_search_max_results": "0"}, nil, "MCP_web_search_max_results"},
		{map[string]string{"MCP_web_search_rate_limit_burst": "x"}, nil, "MCP_web_search_rate_limit_burst"},
		{map[string]string{"MCP_auth": "keys"}, nil, "MCP_API_KEYS"},
		{map[string]string{"MCP_allowed_origins": "not a url"}, nil, "MCP_allowed_origins"},
		{nil, []string{"--rate-limit", "=3"}, "TOOL=PER_MINUTE"},
		{nil, []string{"--transport", "carrier-pigeon"}, "unknown transport"},
		{map[string]string{"MCP_rate_limit_store": "redis"}, nil, "MCP_rate_limit_store"},
		{map[string]string{"MCP_rate_limit_store": "postgres"}, nil, "set DATABASE_URL"},
		{map[string]string{"MCP_rate_limit_on_db_failure": "sometimes"}, nil, "MCP_rate_limit_on_db_failure"},
		{nil, []string{"--rate-limit-db-timeout-ms", "0"}, "positive number of milliseconds"},
		{map[string]string{"MCP_auth_issuer": "http://sso.example.com/realms/acme"}, nil, "use https"},
		{map[string]string{"MCP_auth_issuer": "https://sso.example.com", "MCP_addr": "0.0.0.0:8080"}, nil, "set MCP_public_url"},
		{map[string]string{"MCP_auth_issuer": "https://sso.example.com", "MCP_auth": "none"}, nil, "MCP_auth=none turns access control off"},
		{map[string]string{"MCP_public_url": "mcp.example.com"}, nil, "MCP_public_url"},
		{map[string]string{"MCP_auth_scope_write": "mcpsearch:read"}, nil, "must differ"},
		{map[string]string{"MCP_auth_scope_read": "read write"}, nil, "want one scope"},
		{map[string]string{"MCP_auth_client_id": "mcpsearch"}, nil, "both MCP_auth_client_id and MCP_auth_client_secret"},
	}
	for _, tt := range tests {
		_, err := load(t, tt.vars, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("vars %v args %v: error %v, want one naming %q", tt.vars, tt.args, err, tt.want)
		}
	}
}

// TestSharedRateLimits: auto keeps the buckets in the database when one is
// set and HTTP is served (replicas may run), in memory otherwise; memory
// and postgres are kept to.
func TestSharedRateLimits(t *testing.T) {
	const db = "postgres://db/x"
	tests := []struct {
		store, transport, databaseURL string
		want                          bool
	}{
		{"", "http", db, true},
		{"auto", "sse", db, true},
		{"AUTO", "http,sse", db, true},
		{"auto", "stdio", db, false},
		{"auto", "http", "", false},
		{"memory", "http", db, false},
		{"postgres", "stdio", db, true},
		{" Postgres ", "http", db, true},
	}
	for _, tt := range tests {
		vars := map[string]string{"MCP_transport": tt.transport, "DATABASE_URL": tt.databaseURL, "MCP_rate_limit_store": tt.store}
		c, err := load(t, vars)
		if err != nil {
			t.Fatalf("%v: %v", vars, err)
		}
		if got := c.SharedRateLimits(); got != tt.want {
			t.Errorf("%v: SharedRateLimits() = %v, want %v", vars, got, tt.want)
		}
	}
	c, err := load(t, nil, "--rate-limit-on-db-failure", "Closed", "--rate-limit-db-timeout-ms", "40")
	if err != nil {
		t.Fatal(err)
	}
	if c.RateLimitOnDBFailure != "closed" || c.RateLimitDBTimeout != 40*time.Millisecond {
		t.Errorf("on failure %q, timeout %s; want closed, 40ms", c.RateLimitOnDBFailure, c.RateLimitDBTimeout)
	}
	if d := Default(); d.RateLimitStore != "auto" || d.RateLimitOnDBFailure != "local" || d.RateLimitDBTimeout != 250*time.Millisecond {
		t.Errorf("defaults: store %q, on failure %q, timeout %s; want auto, local, 250ms", d.RateLimitStore, d.RateLimitOnDBFailure, d.RateLimitDBTimeout)
	}
}

func TestDescribeRedactsSecrets(t *testing.T) {
	c, err := load(t, map[string]string{
		"DATABASE_URL":      "postgres://u:hunter2@db/x",
		"MCP_embed_api_key": "sk-123",
		"MCP_API_KEYS":      "k1-secret,k2-secret",
	})
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, kv := range c.Describe([]string{"web_search"}) {
		all.WriteString(kv[0] + "=" + kv[1] + "\n")
	}
	for _, secret := range []string{"hunter2", "sk-123", "k1-secret"} {
		if strings.Contains(all.String(), secret) {
			t.Errorf("Describe shows %q:\n%s", secret, all.String())
		}
	}
	if !strings.Contains(all.String(), "DATABASE_URL=postgres://u:xxxxx@db/x") {
		t.Errorf("database URL not shown redacted:\n%s", all.String())
	}
}

var update = flag.Bool("update", false, "rewrite the table of settings in doc/configuration.md")

// TestREADMESettingsTable keeps the table of settings (doc/configuration.md) in step
// with the settings themselves (go test ./config -run README -update
// rewrites it).
func TestREADMESettingsTable(t *testing.T) {
	readmetest.Check(t, filepath.Join("..", "doc", "configuration.md"), "settings", settingsTable(), *update, "go test ./config -run README -update")
}

// TestSettings checks the list of settings itself: names and flags are
// unique, every setting has help, the defaults are a valid configuration,
// and every value shown reads back as itself, so that `mcpsearch config`
// output can be fed back. The defaults' values are pinned by the
// table (TestREADMESettingsTable).
func TestSettings(t *testing.T) {
	envs, flags := map[string]bool{}, map[string]bool{}
	for _, s := range settings() {
		if envs[s.env] || flags[s.flag] || s.help == "" || s.value.set == nil || s.value.get == nil {
			t.Errorf("setting %s (--%s): duplicate, or without help or value", s.env, s.flag)
		}
		envs[s.env], flags[s.flag] = true, true
	}
	c := Default()
	if err := c.Validate(); err != nil {
		t.Errorf("the defaults are invalid: %v", err)
	}
	if c.RateLimits == nil {
		t.Error("Default() has no map for per-tool rate limits")
	}
	for _, s := range settings() {
		shown := s.value.get(&c)
		if shown == "" || strings.HasPrefix(shown, "<") {
			continue
		}
		var back Config
		if err := s.value.set(&back, shown); err != nil || s.value.get(&back) != shown {
			t.Errorf("%s: the default shown as %q reads back as %q (%v)", s.env, shown, s.value.get(&back), err)
		}
	}
}

// TestEmbedDimensions checks the dimensions the store takes: up to
// pgvector's 16,000, of which up to 4,000 are indexed.
func TestEmbedDimensions(t *testing.T) {
	for _, tt := range []struct {
		dims string
		ok   bool
	}{{"0", true}, {"384", true}, {"3072", true}, {"4000", true}, {"4096", true}, {"16000", true}, {"16001", false}, {"-1", false}} {
		_, err := load(t, map[string]string{"MCP_embed_dimensions": tt.dims, "MCP_embed_provider": "openai"})
		if (err == nil) != tt.ok {
			t.Errorf("MCP_embed_dimensions=%s: error %v, want ok=%v", tt.dims, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "MCP_embed_dimensions (--embed-dimensions): want 0 to 16000") {
			t.Errorf("MCP_embed_dimensions=%s: error %v does not say what to send", tt.dims, err)
		}
	}
}

func TestUnknownVars(t *testing.T) {
	tools := []string{"web_search", "search_docs"}
	tests := []struct {
		environ []string
		want    string // "" for no warning
	}{
		{[]string{"MCP_web_serch_rate_limit_burst=3"}, "did you mean MCP_web_search_rate_limit_burst?"},
		{[]string{"MCP_web_search_timout_ms=10"}, "did you mean MCP_web_search_timeout_ms?"},
		{[]string{"MCP_API_KEY=x"}, "did you mean MCP_API_KEYS?"},
		{[]string{"MCP_completely_different_thing=1"}, "is not a setting"},
		{[]string{"MCP_web_search_rate_limit_burst=3", "MCP_addr=:1", "PATH=/bin", "DATABASE_URL=x"}, ""},
	}
	for _, tt := range tests {
		got := UnknownVars(tt.environ, tools)
		switch {
		case tt.want == "" && len(got) > 0:
			t.Errorf("UnknownVars(%v) = %q, want none", tt.environ, got)
		case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
			t.Errorf("UnknownVars(%v) = %q, want one warning with %q", tt.environ, got, tt.want)
		}
	}
}

func TestToolRateLimitOfAnyToolName(t *testing.T) {
	// Which tools exist is the server's to say; config keeps what it reads.
	c, err := load(t, map[string]string{"MCP_fetch_url_rate_limit_per_minute": "7"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RateLimitFor("fetch_url"); got.PerMinute != 7 {
		t.Errorf("RateLimitFor(fetch_url) = %+v", got)
	}
}

// TestPublicBase: the URL clients reach the server at is MCP_public_url,
// or on a loopback listener with a fixed port its own address.
func TestPublicBase(t *testing.T) {
	for _, tt := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"MCP_public_url": "https://mcp.example.com/"}, "https://mcp.example.com"},
		{map[string]string{"MCP_addr": "127.0.0.1:8080"}, "http://127.0.0.1:8080"},
		{map[string]string{"MCP_addr": "0.0.0.0:8080"}, ""},
		{map[string]string{"MCP_addr": "127.0.0.1:0"}, ""},
	} {
		c, err := load(t, tt.vars)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.PublicBase(); got != tt.want {
			t.Errorf("%v: PublicBase = %q, want %q", tt.vars, got, tt.want)
		}
	}
}

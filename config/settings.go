package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config is the effective configuration of one mcpsearch process. Each
// field is set by one entry of settings, which gives its environment
// variable, flag, default, help and check.
type Config struct {
	// Transports is a subset of stdio, sse, http; stdio stands alone.
	Transports []string
	Addr       string
	Stateless  bool
	LogFormat  string
	LogLevel   string
	// Trace* decide what spans may hold when tracing is on (the OTEL_*
	// environment): statements' text, what calls search for, and
	// conversation ids rather than their hashes.
	TraceSQLText        bool
	TraceQueryText      bool
	TraceConversationID bool
	// UIEnabled serves the web page at /ui/ on the HTTP listener.
	UIEnabled bool
	// UISearch is the bucket of the web page's search playground, per
	// signed-in caller: a budget apart from the agents'.
	UISearch RateLimit
	// UIOAuthClientID and UIOAuthClientSecret make the web page a client
	// of the identity provider (MCP_auth_issuer), through which people
	// sign in to it.
	UIOAuthClientID     string
	UIOAuthClientSecret string

	WebSearchEnabled    bool
	SearXNGURL          string
	WebSearchTimeout    time.Duration
	WebSearchMaxResults int
	WebSearchCacheTTL   time.Duration
	WebSearchCacheSize  int
	// WebSearchRead* configure web_search's reading of its results'
	// pages (the read argument).
	WebSearchReadMax     int
	WebSearchReadTimeout time.Duration
	WebSearchReadPerHost int

	// Rerank* configure the optional reranker of search_docs and of
	// web_search's passages.
	RerankURL     string
	RerankAPIKey  string
	RerankModel   string
	RerankTimeout time.Duration

	// FetchURL* configure the fetch_url tool and ingestion by URL.
	FetchURLEnabled    bool
	FetchURLTimeout    time.Duration
	FetchURLMaxBytes   int64
	FetchURLMaxLength  int
	FetchURLRedirects  int
	FetchURLAllowHosts []string
	FetchURLProxy      string
	FetchURLUserAgent  string
	FetchURLCacheTTL   time.Duration
	FetchURLCacheSize  int

	// ToolTimeout bounds every tool call that has no timeout of its own.
	ToolTimeout time.Duration
	// ToolResultMaxKB bounds one tool result: its text, and its structured
	// content as JSON, are each at most this many kilobytes.
	ToolResultMaxKB int
	// RateLimit is the default bucket; RateLimits are the operator's own
	// settings of single tools (MCP_<tool>_rate_limit_*), and
	// BuiltinRateLimits the tools' own defaults (WriteToolRateLimits),
	// which apply while RateLimit is on (RateLimitFor).
	RateLimit         RateLimit
	RateLimits        map[string]RateLimit
	BuiltinRateLimits map[string]RateLimit
	// RateLimitStore is where the buckets are kept: auto, memory or
	// postgres. SharedRateLimits resolves auto.
	RateLimitStore string
	// RateLimitOnDBFailure decides the calls the database does not, with
	// the postgres store: local, open or closed.
	RateLimitOnDBFailure string
	// RateLimitDBTimeout bounds the database's answer to one call's rate
	// limit, with the postgres store.
	RateLimitDBTimeout time.Duration

	DocsEnabled bool
	// WriteToolsEnabled offers the tools that change documents; ReadOnly
	// turns every write off (WriteToolsOn, WritesOn).
	WriteToolsEnabled bool
	ReadOnly          bool
	// JobLeaseSeconds is how long a process holds a job without renewing
	// its lease.
	JobLeaseSeconds int
	// CrawlPerHost bounds a crawl's requests to one host at once.
	CrawlPerHost int
	// CrawlDelayMS, when above 0, spaces the starts of two requests of a
	// crawl to one host by at least that many milliseconds.
	CrawlDelayMS int
	// CrawlRenderMax bounds the pages rendered in a headless browser at
	// once, every crawl of the process together.
	CrawlRenderMax int
	// SyncInterval re-syncs every site source this often; 0 is off.
	SyncInterval time.Duration
	// DefaultConversation is used by the documents tools when a call names
	// no conversation: a single-user setup's one conversation.
	DefaultConversation string
	DatabaseURL         string
	ChunkSize           int
	ChunkOverlap        int
	MaxFileBytes        int64
	Workers             int
	// IndexBuildMemoryMB is PostgreSQL's maintenance_work_mem for a build
	// of the vector index, in megabytes.
	IndexBuildMemoryMB int
	// VectorWeight is the weight of vector similarity against keywords in
	// hybrid search; 0 means auto, which the documents store resolves for
	// its embedder (docs.Store.VectorWeight).
	VectorWeight float64
	// OCR* configure the reading of scans and images with tesseract.
	OCRMode      string
	OCRLanguages string
	OCRDPI       int
	OCRWorkers   int
	OCRTimeout   time.Duration
	OCRMaxPages  int
	// Threshold is the similarity threshold of searches that set none; 0
	// means auto, which the documents store resolves for its embedder
	// (docs.Store.DefaultThreshold).
	Threshold float64

	EmbedProvider string
	EmbedModel    string
	// EmbedModelsDir is where `mcpsearch models pull` installs model2vec
	// models. LoadEnv sets it to the user's data folder when the
	// environment names none.
	EmbedModelsDir string
	// EmbedModelDir is a model2vec model folder used as it is (copied by
	// hand to a machine without network).
	EmbedModelDir   string
	EmbedBaseURL    string
	EmbedAPIKey     string
	EmbedDimensions int
	EmbedBatchSize  int
	// HubURL and HubToken are the Hugging Face hub models are pulled from
	// and the token sent to it (gated or private models).
	HubURL   string
	HubToken string

	// Auth is "" (keys when any are configured), "keys" or "none".
	Auth           string
	APIKeys        []string
	APIKeysFile    string
	AllowedOrigins []string
	// AllowedHosts are Host header values accepted on a loopback listener
	// besides loopback names (a reverse proxy on the same machine).
	AllowedHosts []string

	// PublicURL is the URL clients reach the server at; PublicBase
	// resolves its default.
	PublicURL string
	// Auth* configure sign-in through an OAuth authorization server, on
	// when AuthIssuer is set (OAuth): its issuer, the audiences a token
	// must name (none: the server's resource identifiers), the scopes that
	// read and write, the claim limiting conversations, the signature
	// algorithms accepted, and the client that introspects opaque tokens.
	AuthIssuer             string
	AuthAudiences          []string
	AuthScopeRead          string
	AuthScopeWrite         string
	AuthConversationsClaim string
	AuthAlgorithms         []string
	AuthClientID           string
	AuthClientSecret       string
	AuthIntrospectionURL   string
}

// Groups of settings that commands other than serve read.
const (
	// Database is the connection to PostgreSQL.
	Database Group = "database"
	// Embed is the embedding model.
	Embed Group = "embed"
	// Pipeline is how files are read and cut into chunks.
	Pipeline Group = "pipeline"
	// Download is how pages are fetched by URL for ingestion.
	Download Group = "download"
	// Hub is where embedding models are downloaded from.
	Hub Group = "hub"
)

// MinToolResultKB is the smallest MCP_tool_result_max_kb: room for a
// result's fields, a few items and the note on what was left out.
const MinToolResultKB = 8

// MaxFetchLength bounds the characters one fetch_url call returns.
const MaxFetchLength = 100_000

// maxVectorWeight matches docs.MaxVectorWeight.
const maxVectorWeight = 10

// maxEmbedDimensions is the most dimensions pgvector's vector type holds.
// The documents store indexes embeddings of up to 4,000 dimensions (as
// halfvec above 2,000) and ranks larger ones exactly, unindexed.
const maxEmbedDimensions = 16000

// settings lists every setting, in the order the table in doc/configuration.md and
// `mcpsearch config` show them. A new setting is a field of Config and one
// entry here.
func settings() []setting {
	return []setting{
		{env: "MCP_transport", flag: "transport", def: "stdio",
			help: "transports to serve: stdio, or one or both of http,sse",
			doc:  "`stdio`, `http`, `sse` or `http,sse`",
			value: value{
				set: func(c *Config, v string) error {
					t, err := parseTransports(v)
					c.Transports = t
					return err
				},
				get: func(c *Config) string { return strings.Join(c.Transports, ",") },
			},
			check: func(c *Config) []string {
				if len(c.Transports) == 0 {
					return []string{"choose stdio, http, sse or http,sse"}
				}
				return nil
			}},
		{env: "MCP_addr", flag: "addr", def: "127.0.0.1:8080",
			help: "HOST:PORT the HTTP transports listen on", doc: "listen address of the HTTP transports",
			value: textValue(func(c *Config) *string { return &c.Addr }, nil),
			check: func(c *Config) []string {
				if _, _, err := net.SplitHostPort(c.Addr); c.HTTP() && err != nil {
					return []string{fmt.Sprintf("want HOST:PORT such as 127.0.0.1:8080, got %q", c.Addr)}
				}
				return nil
			}},
		{env: "MCP_stateless", flag: "stateless", def: "false",
			help:  "streamable HTTP without server-side sessions (replicas behind a load balancer)",
			doc:   "streamable HTTP without sessions",
			value: boolValue(func(c *Config) *bool { return &c.Stateless })},
		{env: "MCP_ui_enabled", flag: "ui-enabled", def: "true",
			help:  "serve the web page at /ui/ on the HTTP listener (documents, jobs, search playground, audit, status; signed in with an API key)",
			doc:   "serve the [web page](web-page.md) at `/ui/` on the HTTP listener",
			value: boolValue(func(c *Config) *bool { return &c.UIEnabled })},
		{env: "MCP_ui_search_per_minute", flag: "ui-search-per-minute", def: "60",
			help: "searches per minute of the web page's search playground, per signed-in key or person: a budget of its own, apart from the agents' rate limits (0 disables)",
			doc:  "searches (and passages opened) per minute of the web page's playground, per signed-in key or person: its own budget, never the agents' (`0` disables)",
			value: intValue(func(c *Config) *int { return &c.UISearch.PerMinute }, func(n int) string {
				if n < 0 {
					return "must not be negative"
				}
				return ""
			})},
		{env: "MCP_ui_search_burst", flag: "ui-search-burst", def: "20",
			help: "burst of the web page's search playground", doc: "bucket size of the playground",
			value: intValue(func(c *Config) *int { return &c.UISearch.Burst }, nil),
			check: func(c *Config) []string {
				if c.UISearch.Burst < 1 && c.UISearch.PerMinute > 0 {
					return []string{fmt.Sprintf("want at least 1 when the playground is limited, got %d", c.UISearch.Burst)}
				}
				return nil
			}},
		{env: "MCP_ui_oauth_client_id", flag: "ui-oauth-client-id",
			help:  "client id of the web page at the identity provider (MCP_auth_issuer): people then sign in to the page there (authorization code with PKCE, redirect MCP_public_url/ui/oauth/callback), beside API keys",
			doc:   "client id of the [web page](web-page.md) at the identity provider: people sign in to the page there (authorization code with PKCE; redirect URI `MCP_public_url` + `/ui/oauth/callback`), beside API keys",
			value: textValue(func(c *Config) *string { return &c.UIOAuthClientID }, strings.TrimSpace),
			check: func(c *Config) []string {
				switch {
				case c.UIOAuthClientID == "" && c.UIOAuthClientSecret == "":
					return nil
				case c.UIOAuthClientID == "" || c.UIOAuthClientSecret == "":
					return []string{"signing in to the web page through the identity provider needs both MCP_ui_oauth_client_id and MCP_ui_oauth_client_secret"}
				case c.AuthIssuer == "":
					return []string{"set MCP_auth_issuer: the web page signs people in through that identity provider"}
				}
				return nil
			}},
		{env: "MCP_ui_oauth_client_secret", flag: "ui-oauth-client-secret",
			help:  "client secret of MCP_ui_oauth_client_id; it also signs the page's sessions of people signed in there, so every replica needs the same",
			doc:   "client secret of `MCP_ui_oauth_client_id`; it also signs those sessions, so every replica needs the same",
			value: textValue(func(c *Config) *string { return &c.UIOAuthClientSecret }, nil).shown(redact)},
		{env: "MCP_log_format", flag: "log-format", def: "text",
			help: "text or json (logs always go to stderr)", doc: "`text` or `json`, always to stderr",
			value: textValue(func(c *Config) *string { return &c.LogFormat }, nil),
			check: oneOf(func(c *Config) string { return c.LogFormat }, "text", "json")},
		{env: "MCP_log_level", flag: "log-level", def: "info",
			help: "debug, info, warn or error", doc: "`debug`, `info`, `warn`, `error`",
			value: textValue(func(c *Config) *string { return &c.LogLevel }, nil),
			check: oneOf(func(c *Config) string { return c.LogLevel }, "debug", "info", "warn", "error")},
		{env: "MCP_trace_sql_text", flag: "trace-sql-text", def: "false",
			help:  "with tracing on (OTEL_EXPORTER_OTLP_ENDPOINT), put each SQL statement's text in its span (never its arguments)",
			doc:   "with [tracing](operations.md#tracing) on, SQL statements' text in their spans (never their arguments)",
			value: boolValue(func(c *Config) *bool { return &c.TraceSQLText })},
		{env: "MCP_trace_query_text", flag: "trace-query-text", def: "false",
			help:  "with tracing on, put what a call searches for (its query argument) in its span",
			doc:   "with tracing on, the text a call searches for in its span",
			value: boolValue(func(c *Config) *bool { return &c.TraceQueryText })},
		{env: "MCP_trace_conversation_id", flag: "trace-conversation-id", def: "false",
			help:  "with tracing on, put conversation ids in spans; false puts a hash of them",
			doc:   "with tracing on, conversation ids in spans; `false`: a SHA-256 hash of them",
			value: boolValue(func(c *Config) *bool { return &c.TraceConversationID })},

		{env: "MCP_web_search_enabled", flag: "web-search-enabled", def: "true",
			help: "offer the web_search tool", doc: "offer `web_search` (a disabled tool is not listed)",
			value: boolValue(func(c *Config) *bool { return &c.WebSearchEnabled })},
		{env: "MCP_web_search_searxng_url", flag: "searxng-url", def: "http://localhost:8888",
			help:  "base URL of the SearXNG instance, or several separated by commas: the next is tried when one fails",
			doc:   "your SearXNG; several separated by commas fail over in order (see [SearXNG](searxng.md))",
			value: textValue(func(c *Config) *string { return &c.SearXNGURL }, nil),
			check: func(c *Config) []string {
				if !c.WebSearchEnabled {
					return nil
				}
				urls := c.SearXNGURLs()
				if len(urls) == 0 {
					return []string{"want an http(s) URL such as http://localhost:8888"}
				}
				var bad []string
				for _, raw := range urls {
					if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
						bad = append(bad, fmt.Sprintf("want http(s) URLs such as http://localhost:8888, separated by commas, got %q", raw))
					}
				}
				return bad
			}},
		{env: "MCP_web_search_timeout_ms", flag: "web-search-timeout-ms", def: "10000",
			help: "timeout of one web_search call in milliseconds", doc: "timeout of one `web_search` call",
			value: msValue(func(c *Config) *time.Duration { return &c.WebSearchTimeout })},
		{env: "MCP_web_search_max_results", flag: "web-search-max-results", def: "5",
			help: "most results one web_search may return", doc: "the most results a call may ask for",
			value: intValue(func(c *Config) *int { return &c.WebSearchMaxResults }, between(1, 100, ""))},
		{env: "MCP_web_search_cache_ttl", flag: "web-search-cache-ttl", def: "5m",
			help:  "how long identical searches are served from memory (e.g. 5m, 300s; 0 disables)",
			doc:   "identical searches within this window are served from memory; `0` disables",
			value: durationValue(func(c *Config) *time.Duration { return &c.WebSearchCacheTTL })},
		{env: "MCP_web_search_cache_size", flag: "web-search-cache-size", def: "512",
			help: "most searches held in the cache", doc: "searches held in that cache",
			value: intValue(func(c *Config) *int { return &c.WebSearchCacheSize }, atLeast(1))},
		{env: "MCP_web_search_read_max", flag: "web-search-read-max", def: "10",
			help:  "most result pages one web_search may read for passages (its read argument); 0 turns reading off",
			doc:   "the most pages `read` may ask for; `0` turns reading off (see [Research in one call](research.md))",
			value: intValue(func(c *Config) *int { return &c.WebSearchReadMax }, between(0, 10, " pages"))},
		{env: "MCP_web_search_read_timeout_ms", flag: "web-search-read-timeout-ms", def: "8000",
			help:  "time web_search spends reading result pages in milliseconds; pages not read by then are reported as a time-out",
			doc:   "the time a call with `read` gives the pages; a page not read by then is failed with reason `time-out`",
			value: msValue(func(c *Config) *time.Duration { return &c.WebSearchReadTimeout })},
		{env: "MCP_web_search_read_per_host", flag: "web-search-read-per-host", def: "2",
			help: "most pages of one host web_search reads at once", doc: "pages of one host read at once",
			value: intValue(func(c *Config) *int { return &c.WebSearchReadPerHost }, between(1, 10, ""))},
		{env: "MCP_rerank_url", flag: "rerank-url",
			help:  "a reranker that reorders the best 50 candidates of search_docs and of web_search's passages: Hugging Face TEI's /rerank, or the v1/rerank of Cohere or Jina",
			doc:   "a reranker for `search_docs` and `web_search`'s passages: TEI's `/rerank`, or Cohere's or Jina's `v1/rerank` (see [Research in one call](research.md#a-reranker))",
			value: textValue(func(c *Config) *string { return &c.RerankURL }, strings.TrimSpace).shown(redactURL),
			check: func(c *Config) []string {
				if c.RerankURL == "" {
					return nil
				}
				if u, err := url.Parse(c.RerankURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return []string{fmt.Sprintf("want an http(s) URL such as http://localhost:8081/rerank, got %q", c.RerankURL)}
				}
				return nil
			}},
		{env: "MCP_rerank_api_key", flag: "rerank-api-key",
			help:  "bearer token of the reranker (Cohere, Jina)",
			doc:   "sent as `Authorization: Bearer` to the reranker",
			value: textValue(func(c *Config) *string { return &c.RerankAPIKey }, nil).shown(redact)},
		{env: "MCP_rerank_model", flag: "rerank-model",
			help: "model the reranker is asked for (Cohere and Jina need one, e.g. rerank-v3.5; TEI serves one)", doc: "model name sent to the reranker",
			value: textValue(func(c *Config) *string { return &c.RerankModel }, strings.TrimSpace)},
		{env: "MCP_rerank_timeout_ms", flag: "rerank-timeout-ms", def: "2000",
			help: "time the reranker has to answer in milliseconds; past it the fused order is kept", doc: "past it, the fused order is kept and the result says so",
			value: msValue(func(c *Config) *time.Duration { return &c.RerankTimeout })},

		{env: "MCP_fetch_url_enabled", flag: "fetch-url-enabled", def: "true",
			help: "offer the fetch_url tool and ingestion by URL", doc: "offer `fetch_url` and ingestion by URL",
			value: boolValue(func(c *Config) *bool { return &c.FetchURLEnabled })},
		{env: "MCP_fetch_url_timeout_ms", flag: "fetch-url-timeout-ms", def: "20000", group: Download,
			help:  "timeout of one fetch_url call (or URL download) in milliseconds",
			doc:   "timeout of one `fetch_url` call or URL download",
			value: msValue(func(c *Config) *time.Duration { return &c.FetchURLTimeout })},
		{env: "MCP_fetch_url_max_mb", flag: "fetch-url-max-mb", def: "10", group: Download,
			help: "largest page body fetch_url reads, in megabytes", doc: "largest page body read; a larger one is refused",
			value: mbValue(func(c *Config) *int64 { return &c.FetchURLMaxBytes })},
		{env: "MCP_fetch_url_max_length", flag: "fetch-url-max-length", def: "8000",
			help:  "characters one fetch_url call returns by default (max_length)",
			doc:   "characters one call returns unless `max_length` says otherwise (up to 100,000)",
			value: intValue(func(c *Config) *int { return &c.FetchURLMaxLength }, between(100, MaxFetchLength, " characters"))},
		{env: "MCP_fetch_url_max_redirects", flag: "fetch-url-max-redirects", def: "5", group: Download,
			help: "redirects fetch_url follows", doc: "redirects followed, each checked like the first URL",
			value: intValue(func(c *Config) *int { return &c.FetchURLRedirects }, between(0, 20, ""))},
		{env: "MCP_fetch_url_allow_hosts", flag: "fetch-url-allow-hosts", group: Download,
			help:  "comma-separated hosts or networks fetch_url may read although private (wiki.corp.example, *.corp.example, 10.0.0.0/8)",
			doc:   "private hosts or networks that may be read: `wiki.corp.example`, `*.corp.example`, `10.0.0.0/8`",
			value: listValue(func(c *Config) *[]string { return &c.FetchURLAllowHosts })},
		{env: "MCP_fetch_url_proxy", flag: "fetch-url-proxy", group: Download,
			help:  "proxy URL for fetch_url only (default: HTTP_PROXY, HTTPS_PROXY, NO_PROXY)",
			doc:   "proxy for fetches only (default: `HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY`)",
			value: textValue(func(c *Config) *string { return &c.FetchURLProxy }, strings.TrimSpace).shown(redactURL)},
		{env: "MCP_fetch_url_user_agent", flag: "fetch-url-user-agent", group: Download,
			help:  "User-Agent of fetch_url requests (default mcpsearch/VERSION)",
			doc:   "`User-Agent` of fetches (default `mcpsearch/VERSION`)",
			value: textValue(func(c *Config) *string { return &c.FetchURLUserAgent }, nil)},
		{env: "MCP_fetch_url_cache_ttl", flag: "fetch-url-cache-ttl", def: "5m",
			help:  "how long a fetched page is reused, so paging does not refetch it (e.g. 5m; 0 disables)",
			doc:   "a page fetched again within this window comes from memory (paging with `start_index`); `0` disables",
			value: durationValue(func(c *Config) *time.Duration { return &c.FetchURLCacheTTL })},
		{env: "MCP_fetch_url_cache_size", flag: "fetch-url-cache-size", def: "16",
			help: "most pages held in the fetch_url cache", doc: "pages held in that cache",
			value: intValue(func(c *Config) *int { return &c.FetchURLCacheSize }, atLeast(1))},

		{env: "MCP_tool_timeout_ms", flag: "tool-timeout-ms", def: "30000",
			help: "timeout of one call of any other tool in milliseconds", doc: "timeout of one call of any other tool",
			value: msValue(func(c *Config) *time.Duration { return &c.ToolTimeout })},
		{env: "MCP_tool_result_max_kb", flag: "tool-result-max-kb", def: "64",
			help:  "most kilobytes of one tool result's text, and of its structured content; a longer result is cut, with a note saying how to get the rest",
			doc:   "most kilobytes of one tool result's text, and of its structured content: a longer result is cut, with a note saying how to get the rest (see [Tools](tools.md))",
			value: intValue(func(c *Config) *int { return &c.ToolResultMaxKB }, between(MinToolResultKB, 4096, " KB"))},
		{env: "MCP_rate_limit_per_minute", flag: "rate-limit-per-minute", def: "30",
			help: "default calls per minute per tool (0 disables every default, the write tools' lower ones too; a tool's own setting still applies)",
			doc:  "token bucket refill per tool; `0` turns every default off (the write tools' lower ones too): only a tool's own `MCP_<tool>_rate_limit_*` then limits it",
			value: intValue(func(c *Config) *int { return &c.RateLimit.PerMinute }, func(n int) string {
				if n < 0 {
					return "must not be negative"
				}
				return ""
			})},
		{env: "MCP_rate_limit_burst", flag: "rate-limit-burst", def: "5",
			help: "default burst per tool", doc: "bucket size per tool", more: perToolRows,
			value: intValue(func(c *Config) *int { return &c.RateLimit.Burst }, nil),
			check: func(c *Config) []string {
				if c.RateLimit.Burst < 1 && c.RateLimit.PerMinute > 0 {
					return []string{fmt.Sprintf("want at least 1 when rate limiting is on, got %d", c.RateLimit.Burst)}
				}
				return nil
			}},
		{env: "MCP_rate_limit_store", flag: "rate-limit-store", def: "auto",
			help:  "where the token buckets are kept: memory (each process its own), postgres (one budget per key and tool for every replica on DATABASE_URL) or auto (postgres when DATABASE_URL is set and HTTP or SSE is served, memory otherwise)",
			doc:   "where the buckets are kept: `memory` (each process its own), `postgres` (one budget per key and tool for every replica on `DATABASE_URL`, one round trip per call) or `auto`: `postgres` when `DATABASE_URL` is set and HTTP or SSE is served, `memory` otherwise (see [shared rate limits](errors-and-rate-limits.md#shared-rate-limits))",
			value: textValue(func(c *Config) *string { return &c.RateLimitStore }, func(v string) string { return strings.ToLower(strings.TrimSpace(v)) }),
			check: func(c *Config) []string {
				if p := oneOf(func(c *Config) string { return c.RateLimitStore }, "auto", "memory", "postgres")(c); p != nil {
					return p
				}
				if c.RateLimitStore == "postgres" && c.DatabaseURL == "" {
					return problem("postgres keeps the buckets in the database: set DATABASE_URL, or choose memory")
				}
				return nil
			}},
		{env: "MCP_rate_limit_on_db_failure", flag: "rate-limit-on-db-failure", def: "local",
			help:  "with the postgres store, how calls are decided while the database fails or is slow: local (each process enforces the limits alone), open (let every call through) or closed (refuse every call)",
			doc:   "with the `postgres` store, how calls are decided while the database fails or does not answer in time: `local` (each replica enforces the limits alone), `open` (every call passes) or `closed` (every call is refused, `RATE_LIMITED`)",
			value: textValue(func(c *Config) *string { return &c.RateLimitOnDBFailure }, func(v string) string { return strings.ToLower(strings.TrimSpace(v)) }),
			check: oneOf(func(c *Config) string { return c.RateLimitOnDBFailure }, "local", "open", "closed")},
		{env: "MCP_rate_limit_db_timeout_ms", flag: "rate-limit-db-timeout-ms", def: "250",
			help:  "with the postgres store, time the database has to decide one call's rate limit, in milliseconds; past it the call is decided as MCP_rate_limit_on_db_failure says",
			doc:   "with the `postgres` store, time the database has to decide one call; past it the call is decided as `MCP_rate_limit_on_db_failure` says",
			value: msValue(func(c *Config) *time.Duration { return &c.RateLimitDBTimeout })},

		{env: "MCP_docs_enabled", flag: "docs-enabled", def: "true",
			help:  "offer search_docs, list_files and get_chunk",
			doc:   "offer the documents tools and upload API (needs `DATABASE_URL`)",
			value: boolValue(func(c *Config) *bool { return &c.DocsEnabled })},
		{env: "MCP_docs_write_tools_enabled", flag: "docs-write-tools-enabled", def: "true",
			help:  "offer the tools that add and delete documents (add_document, cancel_job, delete_document) to callers whose key may write, and to stdio",
			doc:   "offer `add_document`, `cancel_job` and `delete_document` to keys that may write, and over stdio",
			value: boolValue(func(c *Config) *bool { return &c.WriteToolsEnabled })},
		{env: "MCP_read_only", flag: "read-only", def: "false",
			help:  "turn every write off, whatever the keys may do: no write tool, no upload, no deletion",
			doc:   "turn every write off server-wide: no write tool, upload or deletion, whatever a key's scopes",
			value: boolValue(func(c *Config) *bool { return &c.ReadOnly })},
		{env: "MCP_crawl_per_host", flag: "crawl-per-host", def: "4", group: Download,
			help:  "the most requests a crawl sends to one host at once; fewer while the host answers slowly",
			doc:   "the most requests a site crawl sends to one host at once; fewer while the host's answers slow down (no fixed delay unless the site's `Crawl-delay` or `MCP_crawl_delay_ms` asks for one)",
			value: intValue(func(c *Config) *int { return &c.CrawlPerHost }, between(1, 16, ""))},
		{env: "MCP_crawl_delay_ms", flag: "crawl-delay-ms", def: "0", group: Download,
			help:  "the least time between the starts of two requests of a crawl to one host, in milliseconds (0: none; a crawl's delay_ms or the site's Crawl-delay may ask for more)",
			doc:   "the least time between two requests of a crawl to one host (`0`: none, the crawl adapts to the host's speed); a crawl's `delay_ms` or the site's `Crawl-delay` may ask for more",
			value: intValue(func(c *Config) *int { return &c.CrawlDelayMS }, between(0, 60000, " ms"))},
		{env: "MCP_crawl_render_max", flag: "crawl-render-max", def: "2", group: Download,
			help:  "pages rendered in a headless browser (chromium) at once, every crawl together",
			doc:   "pages of script-built sites rendered in headless Chromium at once, every crawl of the process together",
			value: intValue(func(c *Config) *int { return &c.CrawlRenderMax }, between(1, 16, ""))},
		{env: "MCP_sync_interval", flag: "sync-interval", def: "0",
			help:  "re-sync every site source this often (a duration such as 6h; 0: off), one replica at a time",
			doc:   "re-sync every site source this often (`6h`, `24h`; `0`: off), one replica at a time",
			value: durationValue(func(c *Config) *time.Duration { return &c.SyncInterval })},
		{env: "MCP_jobs_lease_seconds", flag: "jobs-lease-seconds", def: "10",
			help:  "how long a job's first part (a download, an archive, a crawl) is held by a process without news (renewed every third of it); a job of a process that stopped is resumed or failed after it",
			doc:   "how long a process holds a job without renewing it (it renews every third of it): a job of a process that stopped is resumed by another replica, or failed, within it and a third of it",
			value: intValue(func(c *Config) *int { return &c.JobLeaseSeconds }, between(5, 3600, " seconds"))},
		{env: "MCP_docs_default_conversation", flag: "default-conversation",
			help:  "conversation the documents tools use when a call names none (a single-user setup's files, ingested with mcpsearch ingest --conversation)",
			doc:   "conversation the documents tools use when a call names none (single-user setups)",
			value: textValue(func(c *Config) *string { return &c.DefaultConversation }, strings.TrimSpace)},
		{env: "DATABASE_URL", flag: "database-url", group: Database,
			help: "PostgreSQL URL of the documents store", doc: "PostgreSQL with pgvector",
			value: textValue(func(c *Config) *string { return &c.DatabaseURL }, nil).shown(redactURL)},
		{env: "MCP_docs_chunk_size", flag: "chunk-size", def: "1000", group: Pipeline,
			help:  "characters per chunk",
			value: intValue(func(c *Config) *int { return &c.ChunkSize }, between(100, 20000, " characters"))},
		{env: "MCP_docs_chunk_overlap", flag: "chunk-overlap", def: "150", group: Pipeline,
			help:  "characters shared by neighbouring chunks",
			value: intValue(func(c *Config) *int { return &c.ChunkOverlap }, nil),
			check: func(c *Config) []string {
				if c.ChunkOverlap < 0 || c.ChunkOverlap*2 >= c.ChunkSize {
					return []string{fmt.Sprintf("want 0 up to half the chunk size, got %d", c.ChunkOverlap)}
				}
				return nil
			}},
		{env: "MCP_docs_max_file_mb", flag: "max-file-mb", def: "50", group: Pipeline,
			help: "largest upload in megabytes", doc: "largest upload",
			value: mbValue(func(c *Config) *int64 { return &c.MaxFileBytes })},
		{env: "MCP_docs_workers", flag: "workers", def: "2", group: Pipeline,
			help: "files processed at once by the upload worker pool", doc: "files processed at once",
			value: intValue(func(c *Config) *int { return &c.Workers }, between(1, 64, ""))},
		// PostgreSQL accepts maintenance_work_mem from 1 MB to 2 TB.
		{env: "MCP_docs_index_build_memory_mb", flag: "index-build-memory-mb", def: "1024",
			help:  "memory PostgreSQL may use to build the vector index, in megabytes (its maintenance_work_mem for the build; about 2 KB per chunk of 384 dimensions builds fastest)",
			doc:   "memory PostgreSQL may use to build the vector index (its `maintenance_work_mem` for the build); about 2 KB per chunk of 384 dimensions builds fastest",
			value: intValue(func(c *Config) *int { return &c.IndexBuildMemoryMB }, between(1, 2<<20, " megabytes"))},
		{env: "MCP_docs_vector_weight", flag: "vector-weight", def: "auto",
			help:  "weight of vector similarity against keywords (1) in hybrid search_docs: auto (calibrated for the embedder: 0.01 for local, 0.5 for model2vec, 1 otherwise) or a number above 0 up to 10",
			doc:   "weight of vector similarity against keywords (1) in hybrid search: `auto` is calibrated for the embedder (0.01 for `local`, 0.5 for `model2vec`, 1 otherwise; see [search modes](documents.md))",
			value: vectorWeightValue()},
		{env: "MCP_docs_ocr_mode", flag: "ocr-mode", def: "auto", group: Pipeline,
			help:  "reading scans and images with tesseract: auto (pages without a text layer, and images), force (every page) or off",
			doc:   "`auto` (pages of a PDF without a text layer, and PNG, JPEG and TIFF uploads), `force` (every page, its text layer replaced) or `off`",
			value: textValue(func(c *Config) *string { return &c.OCRMode }, strings.TrimSpace),
			check: oneOf(func(c *Config) string { return c.OCRMode }, "auto", "force", "off")},
		{env: "MCP_docs_ocr_languages", flag: "ocr-languages", def: "eng", group: Pipeline,
			help:  "tesseract languages, joined with + (eng+deu); each needs its package (tesseract-ocr-deu)",
			doc:   "tesseract languages, joined with `+` (`eng+deu`); each needs its package (`tesseract-ocr-deu`); languages not installed are left out with a warning",
			value: textValue(func(c *Config) *string { return &c.OCRLanguages }, strings.TrimSpace),
			check: func(c *Config) []string {
				for _, l := range strings.Split(c.OCRLanguages, "+") {
					if l == "" || strings.ContainsFunc(l, func(r rune) bool {
						return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
					}) {
						return problem(fmt.Sprintf("want tesseract language codes joined with +, such as eng+deu, got %q", c.OCRLanguages))
					}
				}
				return nil
			}},
		{env: "MCP_docs_ocr_dpi", flag: "ocr-dpi", def: "300", group: Pipeline,
			help:  "resolution PDF pages are rendered at for OCR",
			value: intValue(func(c *Config) *int { return &c.OCRDPI }, between(70, 1200, " dpi"))},
		{env: "MCP_docs_ocr_workers", flag: "ocr-workers", def: "1", group: Pipeline,
			help: "pages recognised at once by the process (a tesseract each)", doc: "pages recognised at once by the process",
			value: intValue(func(c *Config) *int { return &c.OCRWorkers }, between(1, 64, ""))},
		{env: "MCP_docs_ocr_timeout_ms", flag: "ocr-timeout-ms", def: "60000", group: Pipeline,
			help: "time allowed to render and recognise one page, in milliseconds", doc: "time allowed to render and recognise one page",
			value: msValue(func(c *Config) *time.Duration { return &c.OCRTimeout })},
		{env: "MCP_docs_ocr_max_pages", flag: "ocr-max-pages", def: "200", group: Pipeline,
			help: "most pages of one document recognised; the others are noted as needing OCR", doc: "most pages of one document recognised; the others are noted as needing OCR",
			value: intValue(func(c *Config) *int { return &c.OCRMaxPages }, between(1, 100000, " pages"))},
		{env: "MCP_docs_threshold", flag: "threshold", def: "auto",
			help:  "similarity threshold of search_docs calls that set none: auto (calibrated for the embedder: 0.17 for local at 384 dimensions, 0.3 for model2vec, 0.7 otherwise) or a number above 0 up to 1",
			doc:   "similarity threshold of `search_docs` calls that set none: `auto` is calibrated for the embedder (see [default similarity threshold](documents.md))",
			value: thresholdValue()},

		{env: "MCP_embed_provider", flag: "embed-provider", def: "local", group: Embed,
			help: "local, model2vec, openai or ollama", doc: "`local`, `model2vec`, `openai` or `ollama`",
			value: textValue(func(c *Config) *string { return &c.EmbedProvider }, func(v string) string { return strings.ToLower(strings.TrimSpace(v)) }),
			check: oneOf(func(c *Config) string { return c.EmbedProvider }, "local", "model2vec", "openai", "ollama")},
		{env: "MCP_embed_model", flag: "embed-model", group: Embed,
			help:  "embedding model: the model name for openai and ollama; for model2vec a catalogue name (potion-retrieval-32M, the default, or potion-base-8M) or a pulled hub repository owner/name",
			doc:   "model name (openai, ollama); for `model2vec` a catalogue name (empty: `potion-retrieval-32M`) or a pulled hub repository `owner/name`",
			value: textValue(func(c *Config) *string { return &c.EmbedModel }, strings.TrimSpace)},
		{env: "MCP_embed_models_dir", flag: "embed-models-dir", group: Embed,
			help:  "folder mcpsearch models pull installs model2vec models into (default $XDG_DATA_HOME/mcpsearch/models, else ~/.local/share/mcpsearch/models)",
			doc:   "folder `mcpsearch models pull` installs `model2vec` models into (empty: `$XDG_DATA_HOME/mcpsearch/models`, else `~/.local/share/mcpsearch/models`; the Docker image sets `/var/lib/mcpsearch/models`)",
			value: textValue(func(c *Config) *string { return &c.EmbedModelsDir }, strings.TrimSpace)},
		{env: "MCP_embed_model_dir", flag: "embed-model-dir", group: Embed,
			help:  "a model2vec model folder to use as it is, such as one copied by hand to a machine without network (instead of a pulled model)",
			doc:   "a `model2vec` model folder used as it is (copied by hand to a machine without network), instead of a pulled model",
			value: textValue(func(c *Config) *string { return &c.EmbedModelDir }, strings.TrimSpace),
			check: func(c *Config) []string {
				if c.EmbedModelDir != "" && c.EmbedProvider != "model2vec" {
					return []string{fmt.Sprintf("a model folder is for MCP_embed_provider=model2vec, not %s", c.EmbedProvider)}
				}
				return nil
			}},
		{env: "MCP_embed_base_url", flag: "embed-base-url", group: Embed,
			help: "base URL of the embedding API (openai: .../v1; ollama: http://host:11434)", doc: "remote API base URL",
			value: textValue(func(c *Config) *string { return &c.EmbedBaseURL }, nil)},
		{env: "MCP_embed_api_key", flag: "embed-api-key", group: Embed,
			help: "API key of the embedding API", doc: "remote API key",
			value: textValue(func(c *Config) *string { return &c.EmbedAPIKey }, nil).shown(redact)},
		{env: "MCP_embed_dimensions", flag: "embed-dimensions", def: "0", group: Embed,
			help: "vector dimensions (0: 384 for local, learnt from the server for openai and ollama)",
			doc:  "vector size (0: 384 for local, learnt for remote); up to 4,000 are indexed, larger ones (up to 16,000) are ranked exactly",
			value: intValue(func(c *Config) *int { return &c.EmbedDimensions }, func(n int) string {
				if n < 0 || n > maxEmbedDimensions {
					return fmt.Sprintf("want 0 to %d (pgvector stores up to %d dimensions and indexes up to 4000; larger embeddings are ranked exactly), got %d",
						maxEmbedDimensions, maxEmbedDimensions, n)
				}
				return ""
			})},
		{env: "MCP_embed_batch_size", flag: "embed-batch-size", def: "64", group: Embed,
			help:  "texts per embedding request",
			value: intValue(func(c *Config) *int { return &c.EmbedBatchSize }, atLeast(1))},

		{env: "MCP_embed_hub_url", flag: "hub-url", def: "https://huggingface.co", group: Hub,
			help:  "the Hugging Face hub (or a mirror of it) mcpsearch models pull downloads from",
			doc:   "the Hugging Face hub, or a mirror serving its `/resolve/` and `/api/models/` paths, that `mcpsearch models pull` downloads from",
			value: textValue(func(c *Config) *string { return &c.HubURL }, strings.TrimSpace),
			check: func(c *Config) []string {
				if u, err := url.Parse(c.HubURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return []string{fmt.Sprintf("want an http(s) URL such as https://huggingface.co, got %q", c.HubURL)}
				}
				return nil
			}},
		{env: "MCP_embed_hub_token", flag: "hub-token", group: Hub,
			help:  "token sent to the hub by mcpsearch models pull, for gated or private models",
			doc:   "token `mcpsearch models pull` sends to the hub (gated or private models)",
			value: textValue(func(c *Config) *string { return &c.HubToken }, strings.TrimSpace).shown(redact)},

		{env: "MCP_API_KEYS", flag: "api-keys",
			help:  "comma-separated bearer API keys accepted on the HTTP transports and upload API",
			doc:   "comma-separated bearer keys for the HTTP surfaces",
			value: listValue(func(c *Config) *[]string { return &c.APIKeys }).shown(func(s string) string { return redactList(splitList(s)) })},
		{env: "MCP_API_KEYS_FILE", flag: "api-keys-file",
			help:  "file of API keys, one per line: KEY [name=NAME] [conversations=ID,ID...]",
			doc:   "keys file, see [Access control](access-control.md)",
			value: textValue(func(c *Config) *string { return &c.APIKeysFile }, nil)},
		{env: "MCP_auth", flag: "auth",
			help:  "access control of the HTTP transports: keys, or none to serve without keys beyond loopback",
			doc:   "`none` to listen beyond loopback without keys",
			value: textValue(func(c *Config) *string { return &c.Auth }, func(v string) string { return strings.ToLower(strings.TrimSpace(v)) }),
			check: func(c *Config) []string {
				switch c.Auth {
				case "", "keys", "none":
				default:
					return []string{fmt.Sprintf("want keys or none, got %q", c.Auth)}
				}
				if c.Auth == "keys" && len(c.APIKeys) == 0 && c.APIKeysFile == "" {
					return []string{"keys needs MCP_API_KEYS or MCP_API_KEYS_FILE"}
				}
				return nil
			}},
		{env: "MCP_allowed_origins", flag: "allowed-origins",
			help:  "comma-separated browser Origins allowed to call the HTTP transports (loopback origins always are on a loopback listener)",
			doc:   "browser origins allowed to call the HTTP surfaces",
			value: listValue(func(c *Config) *[]string { return &c.AllowedOrigins }),
			check: func(c *Config) []string {
				var bad []string
				for _, o := range c.AllowedOrigins {
					if u, err := url.Parse(o); err != nil || u.Scheme == "" || u.Host == "" {
						bad = append(bad, fmt.Sprintf("want origins such as https://chat.example.com, got %q", o))
					}
				}
				return bad
			}},
		{env: "MCP_allowed_hosts", flag: "allowed-hosts",
			help:  "comma-separated Host header values accepted on a loopback listener besides localhost and loopback addresses (a reverse proxy on the same machine)",
			doc:   "`Host` header values accepted on a loopback listener besides localhost and loopback addresses (a reverse proxy on the same machine)",
			value: listValue(func(c *Config) *[]string { return &c.AllowedHosts })},

		{env: "MCP_public_url", flag: "public-url",
			help:  "the URL clients reach this server at, such as https://mcp.example.com: it names the resource in OAuth metadata and the audience tokens must carry (default on a loopback listener: http://MCP_addr)",
			doc:   "the URL clients reach the server at (`https://mcp.example.com`): names the resource in the OAuth metadata and the audience tokens must carry; empty on a loopback listener: `http://` + `MCP_addr`",
			value: textValue(func(c *Config) *string { return &c.PublicURL }, func(v string) string { return strings.TrimSuffix(strings.TrimSpace(v), "/") }),
			check: func(c *Config) []string {
				if c.PublicURL == "" {
					return nil
				}
				if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
					return []string{fmt.Sprintf("want the server's base URL such as https://mcp.example.com, got %q", c.PublicURL)}
				}
				return nil
			}},
		{env: "MCP_auth_issuer", flag: "auth-issuer",
			help:  "issuer URL of the OAuth authorization server (a Keycloak realm, an Entra ID tenant's v2.0 issuer, ...): turns on sign-in with its access tokens, beside API keys",
			doc:   "issuer URL of your identity provider: turns on sign-in with its access tokens beside API keys, see [Signing in with your identity provider](identity-provider.md)",
			value: textValue(func(c *Config) *string { return &c.AuthIssuer }, strings.TrimSpace),
			check: func(c *Config) []string {
				if c.AuthIssuer == "" {
					return nil
				}
				var out []string
				if msg := secureURL(c.AuthIssuer); msg != "" {
					out = append(out, msg)
				}
				if c.Auth == "none" {
					out = append(out, "MCP_auth=none turns access control off; unset it to sign in with the identity provider")
				}
				if c.PublicBase() == "" {
					out = append(out, "set MCP_public_url to the URL clients reach this server at: tokens must be minted for it")
				}
				return out
			}},
		{env: "MCP_auth_audience", flag: "auth-audience",
			help:  "comma-separated audiences a token must carry one of (default: the server's resource identifiers, MCP_public_url and its /mcp and /sse)",
			doc:   "audiences a token must carry one of; empty: `MCP_public_url` and its `/mcp` and `/sse` (Entra ID: the application ID URI or client id)",
			value: listValue(func(c *Config) *[]string { return &c.AuthAudiences })},
		{env: "MCP_auth_scope_read", flag: "auth-scope-read", def: "mcpsearch:read",
			help:  "the scope that lets a token read (search, list, fetch)",
			value: textValue(func(c *Config) *string { return &c.AuthScopeRead }, strings.TrimSpace),
			check: scopeCheck(func(c *Config) string { return c.AuthScopeRead })},
		{env: "MCP_auth_scope_write", flag: "auth-scope-write", def: "mcpsearch:write",
			help:  "the scope that lets a token also add and delete documents",
			value: textValue(func(c *Config) *string { return &c.AuthScopeWrite }, strings.TrimSpace),
			check: func(c *Config) []string {
				out := scopeCheck(func(c *Config) string { return c.AuthScopeWrite })(c)
				if c.AuthScopeWrite != "" && c.AuthScopeWrite == c.AuthScopeRead {
					out = append(out, "the write scope must differ from the read scope")
				}
				return out
			}},
		{env: "MCP_auth_conversations_claim", flag: "auth-conversations-claim",
			help:  "claim of a token listing the conversations it may touch (a list, or ids separated by spaces or commas; * for all); when set, a token without it touches none",
			doc:   "claim listing the conversations a token may touch (`*`: all); when set, a token without it touches none",
			value: textValue(func(c *Config) *string { return &c.AuthConversationsClaim }, strings.TrimSpace)},
		{env: "MCP_auth_algorithms", flag: "auth-algorithms", def: "RS256,ES256,EdDSA",
			help:  "signature algorithms accepted on tokens (public-key ones: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)",
			doc:   "signature algorithms accepted on tokens; public-key ones only (`RS*`, `PS*`, `ES*`, `EdDSA`), never `none` or `HS*`",
			value: listValue(func(c *Config) *[]string { return &c.AuthAlgorithms })},
		{env: "MCP_auth_client_id", flag: "auth-client-id",
			help:  "client id of this server at the identity provider, to introspect opaque tokens (RFC 7662)",
			value: textValue(func(c *Config) *string { return &c.AuthClientID }, strings.TrimSpace),
			check: func(c *Config) []string {
				if (c.AuthClientID == "") != (c.AuthClientSecret == "") {
					return []string{"introspection needs both MCP_auth_client_id and MCP_auth_client_secret"}
				}
				return nil
			}},
		{env: "MCP_auth_client_secret", flag: "auth-client-secret",
			help:  "client secret of MCP_auth_client_id",
			value: textValue(func(c *Config) *string { return &c.AuthClientSecret }, nil).shown(redact)},
		{env: "MCP_auth_introspection_url", flag: "auth-introspection-url",
			help:  "introspection endpoint (default: the one the issuer's metadata names)",
			value: textValue(func(c *Config) *string { return &c.AuthIntrospectionURL }, strings.TrimSpace),
			check: func(c *Config) []string {
				if c.AuthIntrospectionURL == "" {
					return nil
				}
				return problem(secureURL(c.AuthIntrospectionURL))
			}},
	}
}

// scopeCheck refuses an empty scope or one with spaces, which separate
// scopes.
func scopeCheck(field func(*Config) string) func(*Config) []string {
	return func(c *Config) []string {
		if v := field(c); v == "" || strings.ContainsAny(v, " \t\"") {
			return []string{fmt.Sprintf("want one scope, such as mcpsearch:read, got %q", v)}
		}
		return nil
	}
}

// secureURL says what is wrong with an identity provider's URL: it must be
// https, or http on loopback (a provider on the same machine).
func secureURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Sprintf("want an https URL such as https://sso.example.com/realms/acme, got %q", s)
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && loopbackHost(u.Hostname())) {
		return fmt.Sprintf("%s: use https (http only for a provider on loopback): the server trusts the keys it fetches there", s)
	}
	return ""
}

func loopbackHost(h string) bool {
	ip := net.ParseIP(h)
	return h == "localhost" || (ip != nil && ip.IsLoopback())
}

// perToolRows document the per-tool settings in doc/configuration.md, after the
// defaults they override.
const perToolRows = "| `MCP_<tool>_rate_limit_per_minute`, `MCP_<tool>_rate_limit_burst` | `--rate-limit TOOL=N[/BURST]` | the defaults above | one tool's own bucket, e.g. `MCP_web_search_rate_limit_per_minute=10` |\n" +
	"| `MCP_<tool>_rate_limit_global_per_minute` | | none | a ceiling on one tool for all callers together, on top of each key's bucket, e.g. `MCP_web_search_rate_limit_global_per_minute=120` to protect a small SearXNG |\n"

// thresholdValue reads auto (0) or a similarity above 0 up to 1.
func thresholdValue() value {
	return value{
		set: func(c *Config, v string) error {
			v = strings.TrimSpace(v)
			if strings.EqualFold(v, "auto") {
				c.Threshold = 0
				return nil
			}
			th, err := strconv.ParseFloat(v, 64)
			if err != nil || !(th > 0 && th <= 1) {
				return fmt.Errorf("want auto or a number above 0 up to 1, got %q", v)
			}
			c.Threshold = th
			return nil
		},
		get: func(c *Config) string {
			if c.Threshold == 0 {
				return "auto"
			}
			return strconv.FormatFloat(c.Threshold, 'g', -1, 64)
		},
	}
}

// vectorWeightValue reads auto (0) or a weight above 0 up to
// maxVectorWeight.
func vectorWeightValue() value {
	return value{
		set: func(c *Config, v string) error {
			v = strings.TrimSpace(v)
			if strings.EqualFold(v, "auto") {
				c.VectorWeight = 0
				return nil
			}
			w, err := strconv.ParseFloat(v, 64)
			if err != nil || !(w > 0 && w <= maxVectorWeight) {
				return fmt.Errorf("want auto or a number above 0 up to %d, got %q", maxVectorWeight, v)
			}
			c.VectorWeight = w
			return nil
		},
		get: func(c *Config) string {
			if c.VectorWeight == 0 {
				return "auto"
			}
			return strconv.FormatFloat(c.VectorWeight, 'g', -1, 64)
		},
	}
}

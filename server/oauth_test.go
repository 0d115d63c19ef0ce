package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpsearch/mcpsearch/audit"
	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/internal/oidctest"
	"github.com/mcpsearch/mcpsearch/internal/pgtest"
	"github.com/mcpsearch/mcpsearch/oauth"
)

// oauthKey is the API key accepted beside the provider's tokens.
const oauthKey = "static-key-for-the-ci-0123456789"

// oauthHarness is an OpenID provider and a server that accepts its tokens
// beside an API key, with documents and the audit table in a fresh
// database. Alice and the reader may touch conv-a, Bob conv-b, the admin
// every conversation.
type oauthHarness struct {
	op    *oidctest.Provider
	srv   *Server
	base  string
	pool  *pgxpool.Pool
	audit *audit.Writer
	// log holds the server's log, at debug level, as JSON lines.
	log *logBuffer
}

func newOAuthHarness(t *testing.T, opts oidctest.Options, tweak func(*config.Config), verifier func(*config.Config) *oauth.Verifier) *oauthHarness {
	t.Helper()
	op := oidctest.New(t, opts)
	op.AddUser("alice", []string{"conv-a"})
	op.AddUser("reader", []string{"conv-a"})
	op.AddUser("bob", []string{"conv-b"})
	op.AddUser("admin", []string{"*"})
	ts := httptest.NewUnstartedServer(nil)
	o := &oauthHarness{op: op, base: "http://" + ts.Listener.Addr().String()}
	setup := func(c *config.Config) {
		c.Transports = []string{"http", "sse"}
		c.PublicURL = o.base
		c.AuthIssuer = op.URL
		c.AuthConversationsClaim = oidctest.DefaultConversationsClaim
		if opts.Opaque {
			c.AuthClientID, c.AuthClientSecret = oidctest.IntrospectionClientID, oidctest.IntrospectionSecret
		}
		if tweak != nil {
			tweak(c)
		}
	}
	cfg := config.Default()
	setup(&cfg)
	url := pgtest.NewDatabase(t)
	h := newHarnessDeps(t, setup, func(d *Deps) {
		o.pool = setDocs(t, d, url).Pool()
		o.audit = audit.NewWriter(o.pool, audit.Options{FlushInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		d.Audit = o.audit
		d.APIKeys = []APIKey{NewAPIKey(oauthKey, "ci", nil)}
		if verifier != nil {
			d.Tokens = verifier(&cfg)
			return
		}
		v, err := NewTokenVerifier(cfg)
		if err != nil {
			t.Fatal(err)
		}
		d.Tokens = v
	})
	o.srv = h.srv
	o.log = &logBuffer{}
	h.srv.log = slog.New(slog.NewJSONHandler(o.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ts.Config.Handler = h.srv.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	return o
}

// auditRows flushes the audit and returns its rows as "subject key tool
// outcome conversation", oldest first.
func (o *oauthHarness) auditRows(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := o.audit.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := o.pool.Query(ctx, `SELECT coalesce(subject, '-'), coalesce(api_key_name, '-'), tool_name, coalesce(error_code, 'ok'),
		coalesce(conversation_id, '-') FROM chat_mcp_tool_calls ORDER BY created_at, id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var f [5]string
		if err := rows.Scan(&f[0], &f[1], &f[2], &f[3], &f[4]); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join(f[:], " "))
	}
	return out
}

// auditHolds reports whether any column of any audit row holds s.
func (o *oauthHarness) auditHolds(t *testing.T, s string) bool {
	t.Helper()
	var n int
	err := o.pool.QueryRow(context.Background(), `SELECT count(*) FROM chat_mcp_tool_calls c WHERE strpos(c::text, $1) > 0`, s).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// signIn connects an MCP client the way an agent does: the go-sdk's
// authorization code handler, answering the server's 401 with discovery,
// authorization with PKCE and the resource indicator, and the token
// exchange, as subject.
func (o *oauthHarness) signIn(t *testing.T, subject string) (*mcp.ClientSession, *auth.AuthorizationCodeHandler) {
	t.Helper()
	o.op.SignInAs(subject)
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient:      &oauthex.ClientCredentials{ClientID: oidctest.ClientID},
		RedirectURL:              oidctest.RedirectURL,
		AuthorizationCodeFetcher: o.op.Fetcher(),
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := &mcp.StreamableClientTransport{Endpoint: o.base + "/mcp", OAuthHandler: handler, DisableStandaloneSSE: true}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("sign in as %s: %v", subject, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, handler
}

// callTool calls tool and returns its error code, "" on success.
func callTool(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if !res.IsError {
		return ""
	}
	return toolErr(t, res).Code
}

func TestSignInWithIdentityProvider(t *testing.T) {
	for _, kind := range []string{"jwt", "opaque"} {
		t.Run(kind, func(t *testing.T) {
			o := newOAuthHarness(t, oidctest.Options{Opaque: kind == "opaque"}, nil, nil)
			cs, handler := o.signIn(t, "alice")

			ts, err := handler.TokenSource(context.Background())
			if err != nil || ts == nil {
				t.Fatalf("no token after sign-in: %v", err)
			}
			tok, err := ts.Token()
			if err != nil {
				t.Fatal(err)
			}
			if kind == "jwt" {
				// The token was minted for this server's MCP endpoint: the
				// client sent the resource indicator it discovered.
				if aud := jwtAudience(t, tok.AccessToken); !slices.Contains(aud, o.base+"/mcp") {
					t.Errorf("token audience %v, want %s/mcp", aud, o.base)
				}
			}
			for _, path := range []string{"/.well-known/openid-configuration", "/authorize", "/oauth/token"} {
				if o.op.Hits(path) == 0 {
					t.Errorf("the client never reached the provider's %s", path)
				}
			}

			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "delete_document" }) {
				t.Errorf("alice holds the write scope, but tools/list has no write tool")
			}
			if code := callTool(t, cs, "add_document", map[string]any{"conversation_id": "conv-a", "title": "note.md", "text": "Alice's note on lighthouses.", "wait_seconds": 30}); code != "" {
				t.Fatalf("add_document in alice's conversation: %s", code)
			}
			if code := callTool(t, cs, "search_docs", map[string]any{"conversation_id": "conv-a", "query": "lighthouses"}); code != "" {
				t.Errorf("search_docs in alice's conversation: %s", code)
			}
			// Another tenant's conversation is refused, and listing shows
			// only hers.
			if code := callTool(t, cs, "search_docs", map[string]any{"conversation_id": "conv-b", "query": "x"}); code != CodeAuthError {
				t.Errorf("search_docs in bob's conversation: %q, want AUTH_ERROR", code)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_conversations", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range decode[ListConversationsOutput](t, res).Conversations {
				if c.ID != "conv-a" {
					t.Errorf("alice lists conversation %s", c.ID)
				}
			}
			cs.Close()

			rows := o.auditRows(t)
			want := []string{
				"alice - add_document ok conv-a",
				"alice - search_docs ok conv-a",
				"alice - search_docs AUTH_ERROR conv-b",
				"alice - list_conversations ok -",
			}
			if !slices.Equal(rows, want) {
				t.Errorf("audit rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
			}
			if o.auditHolds(t, tok.AccessToken) {
				t.Error("the access token reached the audit table")
			}
			calls := o.log.records(t, "tool call")
			if len(calls) != len(want) || calls[0]["subject"] != "alice" {
				t.Errorf("tool call log lines: %v, want %d naming subject alice", calls, len(want))
			}
			if o.log.holds(tok.AccessToken) {
				t.Error("the access token reached the log")
			}
		})
	}
}

// jwtAudience reads the aud claim of a JWT without checking it.
func jwtAudience(t *testing.T, raw string) []string {
	t.Helper()
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Aud any `json:"aud"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	switch a := c.Aud.(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, s := range a {
			out = append(out, s.(string))
		}
		return out
	}
	return nil
}

// initialize posts an MCP initialize to path with token as the bearer
// credential ("" for none).
func initialize(t *testing.T, base, path, token string) *http.Response {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	h := map[string]string{"Accept": "application/json, text/event-stream"}
	resp := post(t, base+path, token, body, h)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func TestTokenRefusals(t *testing.T) {
	o := newOAuthHarness(t, oidctest.Options{}, nil, nil)
	other := oidctest.New(t, oidctest.Options{})
	other.AddUser("alice", nil)
	now := time.Now().Unix()
	claims := func(change map[string]any) map[string]any {
		c := map[string]any{"iss": o.op.URL, "sub": "alice", "aud": o.base + "/mcp", "exp": now + 300, "scope": "mcpsearch:read"}
		for k, v := range change {
			c[k] = v
		}
		return c
	}
	stranger := oidctest.New(t, oidctest.Options{Algorithm: "ES256"})
	mcpMeta := `resource_metadata="` + o.base + `/.well-known/oauth-protected-resource/mcp"`

	tests := []struct {
		name   string
		token  string
		status int
		header []string
	}{
		{"no credentials", "", 401, []string{"Bearer " + mcpMeta}},
		{"expired", o.op.Sign(t, claims(map[string]any{"exp": now - 600})), 401, []string{`error="invalid_token"`, "expired at", mcpMeta}},
		{"wrong audience", o.op.Token(t, "alice", "https://other.example.com/mcp", "mcpsearch:read"), 401, []string{`error="invalid_token"`, "not for this server"}},
		{"wrong issuer", o.op.Sign(t, claims(map[string]any{"iss": other.URL})), 401, []string{`error="invalid_token"`, "issued by"}},
		{"another provider", other.Token(t, "alice", o.base+"/mcp", "mcpsearch:read"), 401, []string{`error="invalid_token"`, "does not publish"}},
		{"alg none", unsignedToken(claims(nil)), 401, []string{`error="invalid_token"`, `signature algorithm 'none'`}},
		{"key the JWKS lacks", stranger.Sign(t, claims(nil)), 401, []string{`error="invalid_token"`}},
		{"no mcpsearch scope", o.op.Token(t, "alice", o.base+"/mcp", "openid"), 403, []string{`error="insufficient_scope"`, `scope="mcpsearch:read"`, mcpMeta}},
		{"read scope", o.op.Token(t, "reader", o.base+"/mcp", "mcpsearch:read"), 200, nil},
		{"the API key", oauthKey, 200, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := initialize(t, o.base, "/mcp", tt.token)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d (WWW-Authenticate: %s)", resp.StatusCode, tt.status, resp.Header.Get("WWW-Authenticate"))
			}
			got := resp.Header.Get("WWW-Authenticate")
			for _, want := range tt.header {
				if !strings.Contains(got, want) {
					t.Errorf("WWW-Authenticate = %s, want it to hold %s", got, want)
				}
			}
		})
	}
	// Routes other than a transport point to the server's own metadata.
	resp := post(t, o.base+"/mcp/invoke", "", `{"tool_name":"web_search","params":{"query":"x"}}`, nil)
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 401 || !strings.Contains(got, `resource_metadata="`+o.base+`/.well-known/oauth-protected-resource"`) {
		t.Errorf("REST without credentials: %d, %s", resp.StatusCode, got)
	}
}

// unsignedToken is a JWT with alg none.
func unsignedToken(claims map[string]any) string {
	b, _ := json.Marshal(claims)
	return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + base64.RawURLEncoding.EncodeToString(b) + "."
}

func TestProtectedResourceMetadata(t *testing.T) {
	o := newOAuthHarness(t, oidctest.Options{Opaque: true}, nil, nil)
	for path, resource := range map[string]string{
		"/.well-known/oauth-protected-resource":     o.base,
		"/.well-known/oauth-protected-resource/mcp": o.base + "/mcp",
		"/.well-known/oauth-protected-resource/sse": o.base + "/sse",
	} {
		resp, err := http.Get(o.base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var m oauthex.ProtectedResourceMetadata
		if err := json.Unmarshal(body, &m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		if m.Resource != resource || !slices.Equal(m.AuthorizationServers, []string{o.op.URL}) ||
			!slices.Equal(m.ScopesSupported, []string{"mcpsearch:read", "mcpsearch:write"}) || !slices.Equal(m.BearerMethodsSupported, []string{"header"}) {
			t.Errorf("%s: %s", path, body)
		}
		// Public facts only: nothing of the introspection client.
		for _, secret := range []string{oidctest.IntrospectionSecret, oidctest.IntrospectionClientID, "introspect"} {
			if strings.Contains(string(body), secret) {
				t.Errorf("%s names %q: %s", path, secret, body)
			}
		}
	}
}

// TestProtectedResourceMetadataUnderAPath: with MCP_public_url holding a
// path, a 401 points to the metadata at the well-known path with that
// path inserted, and the metadata is served there (as well as where a
// proxy that strips the path sends it).
func TestProtectedResourceMetadataUnderAPath(t *testing.T) {
	var public string
	o := newOAuthHarness(t, oidctest.Options{}, func(c *config.Config) { c.PublicURL += "/search"; public = c.PublicURL }, nil)
	resp := initialize(t, o.base, "/mcp", "")
	challenge := resp.Header.Get("WWW-Authenticate")
	resp.Body.Close()
	want := o.base + "/.well-known/oauth-protected-resource/search/mcp"
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(challenge, `resource_metadata="`+want+`"`) {
		t.Fatalf("401 without a token: %d %q, want resource_metadata %s", resp.StatusCode, challenge, want)
	}
	for path, resource := range map[string]string{
		"/.well-known/oauth-protected-resource/search/mcp": public + "/mcp",
		"/.well-known/oauth-protected-resource/search/sse": public + "/sse",
		"/.well-known/oauth-protected-resource/search":     public,
		"/.well-known/oauth-protected-resource/mcp":        public + "/mcp",
	} {
		resp, err := http.Get(o.base + path)
		if err != nil {
			t.Fatal(err)
		}
		var m oauthex.ProtectedResourceMetadata
		err = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || m.Resource != resource {
			t.Errorf("%s: %d %+v (%v), want the metadata of %s", path, resp.StatusCode, m, err, resource)
		}
	}
}

func TestReadScopeAndTenants(t *testing.T) {
	o := newOAuthHarness(t, oidctest.Options{}, nil, nil)
	reader := o.op.Token(t, "reader", o.base+"/mcp", "mcpsearch:read")
	alice := o.op.Token(t, "alice", o.base+"/mcp", "mcpsearch:read", "mcpsearch:write")
	admin := o.op.Token(t, "admin", o.base+"/mcp", "mcpsearch:read")

	cs, err := connectHTTP(t, o.base, "http", reader)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		if d, _ := o.srv.tools.lookup(tl.Name); d.write {
			t.Errorf("a read-only token lists %s", tl.Name)
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_document", Arguments: map[string]any{"file_id": "f"}})
	if err != nil {
		t.Fatal(err)
	}
	if te := toolErr(t, res); te.Code != CodeAuthError || !strings.Contains(te.Message, "lacks the scope mcpsearch:write") {
		t.Errorf("read scope calling a write tool: %+v", te)
	}
	// Over REST and the upload API the refusal says which scope to ask for.
	wantChallenge := `error="insufficient_scope", error_description="writing documents needs the scope mcpsearch:write", scope="mcpsearch:read mcpsearch:write"`
	resp := post(t, o.base+"/mcp/invoke", reader, `{"tool_name":"add_document","params":{"conversation_id":"conv-a","title":"t.md","text":"x"}}`, nil)
	resp.Body.Close()
	if got := resp.Header.Get("WWW-Authenticate"); resp.StatusCode != 403 || !strings.Contains(got, wantChallenge) {
		t.Errorf("REST write with a read token: %d, WWW-Authenticate %s", resp.StatusCode, got)
	}
	up := upload(t, o.base, "conv-a", map[string][]byte{"a.txt": []byte("hello")}, http.Header{"Authorization": {"Bearer " + reader}})
	if got := up.Header.Get("WWW-Authenticate"); up.StatusCode != 403 || !strings.Contains(got, wantChallenge) {
		t.Errorf("upload with a read token: %d, WWW-Authenticate %s", up.StatusCode, got)
	}

	// A token for one tenant naming another's conversation: refused on
	// every surface, and its writes too.
	up = upload(t, o.base, "conv-b", map[string][]byte{"a.txt": []byte("hello")}, http.Header{"Authorization": {"Bearer " + alice}})
	if up.StatusCode != 403 {
		t.Errorf("alice uploading into bob's conversation: %d", up.StatusCode)
	}
	resp = post(t, o.base+"/mcp/invoke", alice, `{"tool_name":"search_docs","params":{"conversation_id":"conv-b","query":"x"}}`, nil)
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("alice searching bob's conversation over REST: %d", resp.StatusCode)
	}
	acs, err := connectHTTP(t, o.base, "sse", alice)
	if err != nil {
		t.Fatal(err)
	}
	if code := callTool(t, acs, "search_docs", map[string]any{"conversation_id": "conv-b", "query": "x"}); code != CodeAuthError {
		t.Errorf("alice searching bob's conversation over SSE: %q", code)
	}
	if code := callTool(t, acs, "search_docs", map[string]any{"conversation_id": "conv-a", "query": "x"}); code != "" {
		t.Errorf("alice searching her conversation over SSE: %q", code)
	}
	// A token whose claim holds * may touch every conversation.
	resp = post(t, o.base+"/mcp/invoke", admin, `{"tool_name":"search_docs","params":{"conversation_id":"conv-b","query":"x"}}`, nil)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("admin searching conv-b over REST: %d", resp.StatusCode)
	}

	rows := o.auditRows(t)
	for _, want := range []string{
		"reader - delete_document AUTH_ERROR -",
		"reader - add_document AUTH_ERROR conv-a",
		"alice - search_docs AUTH_ERROR conv-b",
		"alice - search_docs ok conv-a",
		"admin - search_docs ok conv-b",
	} {
		if !slices.Contains(rows, want) {
			t.Errorf("no audit row %q in:\n%s", want, strings.Join(rows, "\n"))
		}
	}
	for _, tok := range []string{reader, alice, admin} {
		if o.auditHolds(t, tok) {
			t.Error("an access token reached the audit table")
		}
		if o.log.holds(tok) {
			t.Error("an access token reached the log")
		}
	}
}

func TestSessionsAndRateLimitsPerSubject(t *testing.T) {
	o := newOAuthHarness(t, oidctest.Options{}, func(c *config.Config) {
		c.RateLimits["web_search"] = config.RateLimit{PerMinute: 1, Burst: 1}
	}, nil)
	alice := o.op.Token(t, "alice", o.base+"/mcp", "mcpsearch:read")
	alice2 := o.op.Token(t, "alice", o.base+"/mcp", "mcpsearch:read")
	bob := o.op.Token(t, "bob", o.base+"/mcp", "mcpsearch:read")

	search := func(token string) string {
		cs, err := connectHTTP(t, o.base, "http", token)
		if err != nil {
			t.Fatal(err)
		}
		return callTool(t, cs, "web_search", map[string]any{"query": "q"})
	}
	// Alice's bucket holds one call, whichever of her tokens she uses;
	// Bob's and the key's are their own.
	for _, c := range []struct{ who, token, want string }{
		{"alice", alice, ""}, {"alice again", alice2, CodeRateLimited}, {"bob", bob, ""}, {"key", oauthKey, ""},
	} {
		if got := search(c.token); got != c.want {
			t.Errorf("%s: %q, want %q", c.who, got, c.want)
		}
	}

	// A session Alice opened is hers: Bob's token cannot use it.
	resp := initialize(t, o.base, "/mcp", alice)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("no session id")
	}
	for _, c := range []struct {
		token  string
		status int
	}{{bob, http.StatusForbidden}, {oauthKey, http.StatusForbidden}, {alice2, http.StatusAccepted}} {
		r := post(t, o.base+"/mcp", c.token, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			map[string]string{"Mcp-Session-Id": sid, "Accept": "application/json, text/event-stream"})
		r.Body.Close()
		if r.StatusCode != c.status {
			t.Errorf("notification into alice's session: %d, want %d", r.StatusCode, c.status)
		}
	}
	// Over SSE, a POST with Bob's token finds no session of Alice's.
	endpoint := openSSE(t, o.base, alice)
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if r := post(t, o.base+endpoint, bob, ping, nil); r.StatusCode != http.StatusNotFound {
		t.Errorf("bob posting into alice's SSE session: %d, want 404", r.StatusCode)
	}
	if r := post(t, o.base+endpoint, alice2, ping, nil); r.StatusCode != http.StatusAccepted {
		t.Errorf("alice's other token posting into her SSE session: %d, want 202", r.StatusCode)
	}
}

func TestIssuerDownFailsClosed(t *testing.T) {
	const timeout = 300 * time.Millisecond
	o := newOAuthHarness(t, oidctest.Options{}, nil, func(c *config.Config) *oauth.Verifier {
		v, err := oauth.New(oauth.Config{Issuer: c.AuthIssuer, Audiences: resourceIDs(c.PublicBase()), Timeout: timeout})
		if err != nil {
			t.Fatal(err)
		}
		return v
	})
	token := o.op.Token(t, "alice", o.base+"/mcp", "mcpsearch:read")
	o.op.SetMode(oidctest.Hanging)
	for i := range 2 {
		start := time.Now()
		resp := post(t, o.base+"/mcp", token, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, map[string]string{"Accept": "application/json, text/event-stream"})
		var body envelope
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || body.Error == nil || !body.Error.Retryable ||
			!strings.Contains(body.Error.Message, "identity provider cannot be reached") {
			t.Fatalf("request %d with the issuer hanging: %d, Retry-After %q, %+v", i, resp.StatusCode, resp.Header.Get("Retry-After"), body.Error)
		}
		// The issuer never answers: the refusal is the server's own bound.
		t.Logf("request %d refused after %s (timeout %s)", i, time.Since(start).Round(time.Millisecond), timeout)
	}
	// The API key does not depend on the provider.
	if resp := initialize(t, o.base, "/mcp", oauthKey); resp.StatusCode != 200 {
		t.Errorf("API key with the issuer down: %d", resp.StatusCode)
	}
}

// holds reports whether the log holds s anywhere.
func (l *logBuffer) holds(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Contains(l.b.Bytes(), []byte(s))
}

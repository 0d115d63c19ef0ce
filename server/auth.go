package server

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpsearch/mcpsearch/config"
)

// APIKey is one accepted bearer key. Only its hash is kept.
type APIKey struct {
	// Name identifies the key in logs and audit records; it defaults to a
	// short fingerprint of the key.
	Name string
	// Conversations, when not nil, are the only conversation ids the key may
	// touch.
	Conversations []string
	// write is set for a key that may change documents: add, upload,
	// delete, cancel.
	write bool
	hash  [sha256.Size]byte
}

// NewAPIKey returns a key accepting secret, named and scoped as given,
// that may read and write.
func NewAPIKey(secret, name string, conversations []string) APIKey {
	h := sha256.Sum256([]byte(secret))
	if name == "" {
		name = fmt.Sprintf("key-%x", h[:4])
	}
	return APIKey{Name: name, Conversations: conversations, write: true, hash: h}
}

// ReadOnly returns k limited to reading: no upload, deletion or write
// tool.
func (k APIKey) ReadOnly() APIKey {
	k.write = false
	return k
}

// CanWrite reports whether the key may change documents.
func (k APIKey) CanWrite() bool { return k.write }

// LoadAPIKeys reads keys from the comma-separated list and from r (the
// keys file, may be nil). A file line is `KEY [name=NAME]
// [conversations=ID,ID...] [scopes=read|read,write]`; blank lines and
// lines starting with # are skipped. A key without scopes= may read and
// write, as every key could before scopes existed.
func LoadAPIKeys(list []string, r io.Reader) ([]APIKey, error) {
	var keys []APIKey
	for _, k := range list {
		keys = append(keys, NewAPIKey(k, "", nil))
	}
	if r == nil {
		return keys, nil
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields[0]) < 16 {
			return nil, fmt.Errorf("keys file line %d: a key needs at least 16 characters", n)
		}
		var name string
		var convs []string
		write := true
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			switch {
			case ok && k == "name":
				name = v
			case ok && k == "conversations":
				convs = strings.Split(v, ",")
				if slices.Contains(convs, "") {
					return nil, fmt.Errorf("keys file line %d: empty conversation id in %q", n, f)
				}
			case ok && k == "scopes":
				w, err := parseScopes(v)
				if err != nil {
					return nil, fmt.Errorf("keys file line %d: %w", n, err)
				}
				write = w
			default:
				return nil, fmt.Errorf("keys file line %d: unknown field %q (want name=NAME, conversations=ID,ID or scopes=read,write)", n, f)
			}
		}
		key := NewAPIKey(fields[0], name, convs)
		if !write {
			key = key.ReadOnly()
		}
		keys = append(keys, key)
	}
	return keys, sc.Err()
}

// parseScopes reads a keys file's scopes=: read, or read and write;
// whether the key may write.
func parseScopes(v string) (bool, error) {
	write, read := false, false
	for _, sc := range strings.Split(v, ",") {
		switch strings.TrimSpace(sc) {
		case ScopeRead:
			read = true
		case ScopeWrite:
			write = true
		default:
			return false, fmt.Errorf("unknown scope %q in scopes=%s (the scopes are read and write)", sc, v)
		}
	}
	if !read {
		// Writing documents one cannot read back is not a setup anyone
		// means.
		return false, fmt.Errorf("scopes=%s lacks read: use scopes=read or scopes=read,write", v)
	}
	return write, nil
}

// CheckExposure refuses to serve HTTP beyond loopback without keys or an
// identity provider unless the operator said --auth none.
func CheckExposure(cfg config.Config, keys []APIKey) error {
	if !cfg.HTTP() || len(keys) > 0 || cfg.OAuth() || cfg.Auth == "none" {
		return nil
	}
	if isLoopbackAddr(cfg.Addr) {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without API keys: anyone who can reach it could use the tools. "+
		"Set MCP_API_KEYS (or MCP_API_KEYS_FILE / --api-keys-file; with docker compose, MCP_API_KEYS in the .env file that `make compose-env` writes), "+
		"or MCP_auth_issuer to sign in with your identity provider, "+
		"listen on 127.0.0.1, or pass --auth none to serve without access control", cfg.Addr)
}

func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return isLoopbackHost(host)
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// identity is the caller of a request: the API key it presented, or the
// grant of the access token it brought, or neither (stdio, a server
// without access control).
type identity struct {
	key   *APIKey
	token *tokenGrant
}

// tokenGrant is what a checked access token lets its bearer do.
type tokenGrant struct {
	subject string
	write   bool
	// conversations, when not nil, are the only ones the token may touch.
	conversations []string
	// writeScope is the scope a write needs, and writeChallenge the
	// WWW-Authenticate that asks for it.
	writeScope, writeChallenge string
}

type identityKey struct{}

func withIdentity(ctx context.Context, id identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

func identityFrom(ctx context.Context) identity {
	id, _ := ctx.Value(identityKey{}).(identity)
	return id
}

// name names the caller in messages and jobs: the key's name or the
// token's subject; "" for neither.
func (id identity) name() string {
	switch {
	case id.key != nil:
		return id.key.Name
	case id.token != nil:
		return id.token.subject
	}
	return ""
}

// keyName is the name of the caller's API key, "" without one.
func (id identity) keyName() string {
	if id.key == nil {
		return ""
	}
	return id.key.Name
}

// subject is the subject of the caller's access token, "" without one.
func (id identity) subject() string {
	if id.token == nil {
		return ""
	}
	return id.token.subject
}

// bucket names the caller's rate-limit buckets: the key's name, or the
// token's subject set apart from key names (which hold no space).
func (id identity) bucket() string {
	if id.token != nil {
		return tokenPrefix + id.token.subject
	}
	return id.keyName()
}

// tokenPrefix sets the names of token callers apart from key names, which
// hold no space.
const tokenPrefix = "oauth "

// serverKey names the MCP server, and the SSE handler, that serve the
// caller over transport: one per key, as before tokens. Every token shares
// one server where each request brings its caller (streamable HTTP in its
// TokenInfo, the REST facade in its pending call); over legacy SSE, where
// a message carries nothing of its own, and from the web page, the server
// is the session's and holds the whole grant.
func (id identity) serverKey(transport string) string {
	if id.token == nil {
		return id.keyName()
	}
	if transport != "sse" && transport != uiTransport {
		return tokenPrefix + "shared"
	}
	g := id.token
	convs := "*"
	if g.conversations != nil {
		convs = strings.Join(g.conversations, ",")
	}
	return fmt.Sprintf("%s%q write=%t conversations=%q", tokenPrefix, g.subject, g.write, convs)
}

// userID binds streamable HTTP sessions to the caller: a session opened
// with one key or one person's token refuses the requests of another.
func (id identity) userID() string {
	if id.token != nil {
		return tokenPrefix + id.token.subject
	}
	return id.keyName()
}

// conversations are the only conversations the caller may touch; nil for
// any.
func (id identity) conversations() []string {
	switch {
	case id.key != nil:
		return id.key.Conversations
	case id.token != nil:
		return id.token.conversations
	}
	return nil
}

// allows reports whether the caller may touch conversation conv.
func (id identity) allows(conv string) bool {
	only := id.conversations()
	return only == nil || slices.Contains(only, conv)
}

// identityExtra is the key of the caller in the TokenInfo the SDK hands
// to every message of a streamable HTTP request.
const identityExtra = "mcpsearch.identity"

// requestIdentity is the caller of an MCP request: the one its HTTP
// request authenticated, which streamable HTTP carries in the request's
// TokenInfo and a REST invocation in its pending call; else fallback, the
// caller the MCP server was made for.
func (s *Server) requestIdentity(transport string, req mcp.Request, fallback identity) identity {
	if req == nil {
		return fallback
	}
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
		if id, ok := ex.TokenInfo.Extra[identityExtra].(identity); ok {
			return id
		}
	}
	if ctr, ok := req.(*mcp.CallToolRequest); ok && transport == restTransport {
		if h := s.pendingHeaders(transport, ctr); h != nil && h.caller != nil {
			return *h.caller
		}
	}
	return fallback
}

// match finds the key whose hash equals token's, comparing against every
// key in constant time so timing reveals nothing about which one was close.
func (s *Server) match(token string) *APIKey {
	h := sha256.Sum256([]byte(token))
	var found *APIKey
	for i := range s.deps.APIKeys {
		if subtle.ConstantTimeCompare(h[:], s.deps.APIKeys[i].hash[:]) == 1 {
			found = &s.deps.APIKeys[i]
		}
	}
	return found
}

// protect guards the MCP and upload routes: the Origin allow-list against
// DNS rebinding, then the bearer key when keys are configured. Failures get
// the contract's AUTH_ERROR body.
func (s *Server) protect(next http.Handler) http.Handler { return s.protectWith(writeError, next) }

// protectWith is protect answering failures with fail, for routes whose
// error body has another shape (the REST facade).
func (s *Server) protectWith(fail func(http.ResponseWriter, *http.Request, error), next http.Handler) http.Handler {
	// The SDK binds streamable HTTP sessions to the TokenInfo's UserID, so a
	// session opened by one caller cannot be used by another, and hands the
	// TokenInfo to every message of the request: it carries the caller to
	// the MCP middleware (requestIdentity).
	bind := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		id := identityFrom(ctx)
		if id.key == nil && id.token == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: id.userID(), Extra: map[string]any{identityExtra: id}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	bound := bind(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next.ServeHTTP(w, r) }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin) {
			fail(w, r, &ToolError{Code: CodeAuthError, Status: http.StatusForbidden,
				Message: fmt.Sprintf("origin %s is not allowed (MCP_allowed_origins)", origin)})
			return
		}
		if !s.accessControlled() {
			next.ServeHTTP(w, r.WithContext(withIdentity(r.Context(), identity{})))
			return
		}
		id, err := s.authenticate(r)
		if err != nil {
			fail(w, r, err)
			return
		}
		bound.ServeHTTP(w, r.WithContext(withIdentity(r.Context(), id)))
	})
}

// accessControlled reports whether the HTTP surfaces ask for credentials:
// API keys or an identity provider's tokens, unless MCP_auth=none.
func (s *Server) accessControlled() bool {
	return (len(s.deps.APIKeys) > 0 || s.deps.Tokens != nil) && s.cfg.Auth != "none"
}

// authenticate finds the caller of r by its bearer credential: one of the
// API keys, else an access token of the identity provider.
func (s *Server) authenticate(r *http.Request) (identity, error) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		if s.deps.Tokens != nil {
			return identity{}, s.noCredentials(r)
		}
		return identity{}, errNoKey
	}
	if k := s.match(token); k != nil {
		return identity{key: k}, nil
	}
	if s.deps.Tokens == nil {
		return identity{}, errBadKey
	}
	return s.tokenIdentity(r, token)
}

// authenticated reports whether r carries a valid key or token, or no
// credentials are asked for.
func (s *Server) authenticated(r *http.Request) bool {
	if !s.accessControlled() {
		return true
	}
	_, err := s.authenticate(r)
	return err == nil
}

// originAllowed accepts listed origins and, on a loopback listener,
// loopback origins (a local browser tool), and nothing else: a page on
// another site must not reach a local server through DNS rebinding.
func (s *Server) originAllowed(origin string) bool {
	if slices.Contains(s.cfg.AllowedOrigins, origin) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	return isLoopbackAddr(s.cfg.Addr) && isLoopbackHost(u.Hostname())
}

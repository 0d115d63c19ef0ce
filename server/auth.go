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

// CheckExposure refuses to serve HTTP beyond loopback without keys unless
// the operator said --auth none.
func CheckExposure(cfg config.Config, keys []APIKey) error {
	if !cfg.HTTP() || len(keys) > 0 || cfg.Auth == "none" {
		return nil
	}
	if isLoopbackAddr(cfg.Addr) {
		return nil
	}
	return fmt.Errorf("refusing to listen on %s without API keys: anyone who can reach it could use the tools. "+
		"Set MCP_API_KEYS (or MCP_API_KEYS_FILE / --api-keys-file; with docker compose, MCP_API_KEYS in the .env file that `make compose-env` writes), "+
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

// identity is the caller of a request: the key it presented, if any.
type identity struct {
	key *APIKey
}

type identityKey struct{}

func withIdentity(ctx context.Context, id identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

func identityFrom(ctx context.Context) identity {
	id, _ := ctx.Value(identityKey{}).(identity)
	return id
}

// name is the key's name, or "" without keys.
func (id identity) name() string {
	if id.key == nil {
		return ""
	}
	return id.key.Name
}

// allows reports whether the caller may touch conversation conv.
func (id identity) allows(conv string) bool {
	return id.key == nil || id.key.Conversations == nil || slices.Contains(id.key.Conversations, conv)
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
	keys := len(s.deps.APIKeys) > 0 && s.cfg.Auth != "none"
	// The SDK binds streamable HTTP sessions to the TokenInfo's UserID, so a
	// session opened with one key cannot be used with another.
	bind := auth.RequireBearerToken(func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		k := s.match(token)
		if k == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: k.Name}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	bound := bind(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { next.ServeHTTP(w, r) }))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin) {
			fail(w, r, &ToolError{Code: CodeAuthError, Status: http.StatusForbidden,
				Message: fmt.Sprintf("origin %s is not allowed (MCP_allowed_origins)", origin)})
			return
		}
		if !keys {
			next.ServeHTTP(w, r.WithContext(withIdentity(r.Context(), identity{})))
			return
		}
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
			fail(w, r, errNoKey)
			return
		}
		k := s.match(strings.TrimSpace(token))
		if k == nil {
			fail(w, r, errBadKey)
			return
		}
		bound.ServeHTTP(w, r.WithContext(withIdentity(r.Context(), identity{key: k})))
	})
}

// authenticated reports whether r carries a valid key, or no keys are
// asked for.
func (s *Server) authenticated(r *http.Request) bool {
	if len(s.deps.APIKeys) == 0 || s.cfg.Auth == "none" {
		return true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	return ok && strings.EqualFold(scheme, "bearer") && s.match(strings.TrimSpace(token)) != nil
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

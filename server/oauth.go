package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/mcpsearch/mcpsearch/config"
	"github.com/mcpsearch/mcpsearch/oauth"
)

// The paths whose resource identifiers a token may name, besides the
// server's base URL: the MCP transports.
var resourcePaths = []string{"/mcp", "/sse"}

// NewTokenVerifier returns the checker of the identity provider's access
// tokens that cfg asks for, nil when MCP_auth_issuer is not set. Tokens
// must name one of MCP_auth_audience or, by default, one of the server's
// resource identifiers: MCP_public_url and its MCP paths.
func NewTokenVerifier(cfg config.Config) (*oauth.Verifier, error) {
	if !cfg.OAuth() {
		return nil, nil
	}
	for _, a := range cfg.AuthAlgorithms {
		if err := oauth.CheckAlgorithm(a); err != nil {
			return nil, fmt.Errorf("MCP_auth_algorithms: %w", err)
		}
	}
	audiences := cfg.AuthAudiences
	if len(audiences) == 0 {
		audiences = resourceIDs(cfg.PublicBase())
	}
	v, err := oauth.New(oauth.Config{
		Issuer: cfg.AuthIssuer, Audiences: audiences, Algorithms: cfg.AuthAlgorithms,
		ConversationsClaim: cfg.AuthConversationsClaim, ClientID: cfg.AuthClientID, ClientSecret: cfg.AuthClientSecret,
		IntrospectionURL: cfg.AuthIntrospectionURL,
	})
	if err != nil {
		return nil, fmt.Errorf("MCP_auth_issuer %s: %w", cfg.AuthIssuer, err)
	}
	return v, nil
}

// resourceIDs are the resource identifiers of a server at base: the base
// URL and its MCP transports'.
func resourceIDs(base string) []string {
	ids := []string{base}
	for _, p := range resourcePaths {
		ids = append(ids, base+p)
	}
	return ids
}

// oauthRoutes publishes the protected resource metadata (RFC 9728) when
// tokens are accepted: the server's at the well-known path, each MCP
// transport's below it (/.well-known/oauth-protected-resource/mcp), where
// MCP clients look first.
func (s *Server) oauthRoutes(mux *http.ServeMux) {
	if s.deps.Tokens == nil {
		return
	}
	base := s.cfg.PublicBase()
	mux.Handle(oauth.WellKnownPath, s.metadataHandler(base))
	for _, p := range resourcePaths {
		mux.Handle(oauth.WellKnownPath+p, s.metadataHandler(base+p))
	}
	// Behind a proxy that serves the server under a path
	// (https://host/prefix), the 401 points to the metadata at the
	// well-known path with that path inserted (RFC 9728 §3.1); a proxy
	// that passes it on unchanged finds it here too.
	if prefix := publicPath(base); prefix != "" {
		mux.Handle(oauth.WellKnownPath+prefix, s.metadataHandler(base))
		for _, p := range resourcePaths {
			mux.Handle(oauth.WellKnownPath+prefix+p, s.metadataHandler(base+p))
		}
	}
}

// publicPath is the path of the public URL base ("/prefix"); "" for none.
func publicPath(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(u.Path, "/")
}

func (s *Server) metadataHandler(resource string) http.Handler {
	h := auth.ProtectedResourceMetadataHandler(s.deps.Tokens.Metadata(resource, "mcpsearch", s.tokenScopes()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Public facts, the same for every caller; clients may keep them.
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// tokenScopes are the scopes a client asks for: reading, and writing
// when the server offers writes.
func (s *Server) tokenScopes() []string {
	if !s.cfg.WritesOn() {
		return []string{s.cfg.AuthScopeRead}
	}
	return []string{s.cfg.AuthScopeRead, s.cfg.AuthScopeWrite}
}

// metadataURL is where the client of a refused request finds how to sign
// in: the metadata of the MCP transport it called, else the server's.
func (s *Server) metadataURL(r *http.Request) string {
	base := s.cfg.PublicBase()
	if p := r.URL.Path; slices.Contains(resourcePaths, p) {
		return oauth.MetadataURL(base + p)
	}
	return oauth.MetadataURL(base)
}

// noCredentials is the refusal of a request without a bearer credential
// when tokens are accepted: the challenge points to the metadata, which
// points to the identity provider.
func (s *Server) noCredentials(r *http.Request) error {
	what := "an access token"
	if len(s.deps.APIKeys) > 0 {
		what = "an API key or an access token"
	}
	mu := s.metadataURL(r)
	return &ToolError{Code: CodeAuthError, Status: http.StatusUnauthorized,
		Message:   fmt.Sprintf("missing credentials: send Authorization: Bearer with %s; %s says where to sign in", what, mu),
		challenge: oauth.Challenge{MetadataURL: mu}.String()}
}

// tokenIdentity checks an access token and returns its bearer's grant: its
// subject, whether it may write, and the conversations it may touch. A
// token without the read scope (or the write scope, which reads too) is
// refused with 403 insufficient_scope.
func (s *Server) tokenIdentity(r *http.Request, raw string) (identity, error) {
	tok, err := s.deps.Tokens.Verify(r.Context(), raw)
	var ue *oauth.UnavailableError
	switch {
	case errors.As(err, &ue):
		wait := max(ue.RetryAfter.Round(time.Second), time.Second)
		return identity{}, &ToolError{Code: CodeAuthError, Status: http.StatusServiceUnavailable, Retryable: true,
			RetryAfterMS: wait.Milliseconds(), cause: err,
			Message: fmt.Sprintf("the identity provider cannot be reached to check the access token: retry in %s", wait)}
	case err != nil:
		what := "access token"
		if len(s.deps.APIKeys) > 0 {
			what = "API key or access token"
		}
		reason := strings.TrimPrefix(strings.TrimPrefix(err.Error(), oauth.ErrInvalidToken.Error()), ": ")
		return identity{}, &ToolError{Code: CodeAuthError, Status: http.StatusUnauthorized,
			Message: fmt.Sprintf("invalid %s: %s", what, reason),
			challenge: oauth.Challenge{MetadataURL: s.metadataURL(r), Error: oauth.InvalidToken,
				Description: reason}.String()}
	}
	read, write := s.cfg.AuthScopeRead, s.cfg.AuthScopeWrite
	g := &tokenGrant{subject: tok.Subject, write: tok.HasScope(write), conversations: tok.Conversations, writeScope: write,
		writeChallenge: oauth.Challenge{MetadataURL: s.metadataURL(r), Error: oauth.InsufficientScope,
			Description: "writing documents needs the scope " + write, Scopes: []string{read, write}}.String()}
	if !g.write && !tok.HasScope(read) {
		return identity{}, &ToolError{Code: CodeAuthError, Status: http.StatusForbidden,
			Message: fmt.Sprintf("the access token of %s lacks the scope %s: sign in again asking for it (your identity provider must grant it)", tok.Subject, read),
			challenge: oauth.Challenge{MetadataURL: s.metadataURL(r), Error: oauth.InsufficientScope,
				Description: "reading needs the scope " + read, Scopes: []string{read}}.String()}
	}
	return identity{token: g}, nil
}

package oidctest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// storage is the provider's op.Storage, in memory.
type storage struct {
	issuer string
	opts   Options

	mu       sync.Mutex
	key      *signingKey
	users    map[string]*user
	signedIn string
	clients  map[string]*client
	requests map[string]*authRequest
	codes    map[string]string
	tokens   map[string]*token
}

type user struct {
	subject       string
	conversations []string
	// scopes, when not nil, are the only scopes the user's tokens carry.
	scopes []string
}

// granted are the scopes of asked that subject's tokens carry; s.mu is
// held.
func (s *storage) granted(subject string, asked []string) []string {
	u, ok := s.users[subject]
	if !ok || u.scopes == nil {
		return asked
	}
	var out []string
	for _, sc := range asked {
		if slices.Contains(u.scopes, sc) || sc == "openid" {
			out = append(out, sc)
		}
	}
	return out
}

// token is an access token the provider issued.
type token struct {
	subject  string
	clientID string
	audience []string
	scopes   []string
	expiry   time.Time
}

// complete signs the signed-in user in to authorization request id.
func (s *storage) complete(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return fmt.Errorf("authorization request %q: %w", id, errNotFound)
	}
	if _, ok := s.users[s.signedIn]; !ok {
		return fmt.Errorf("no user %q", s.signedIn)
	}
	r.subject, r.done, r.authTime = s.signedIn, true, time.Now()
	return nil
}

func (s *storage) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &authRequest{id: uuid.NewString(), req: *req}
	r.audience, _ = ctx.Value(resourceKey{}).([]string)
	if c, ok := s.clients[req.ClientID]; len(r.audience) == 0 || (ok && c.web) {
		// A web client's ID tokens must name it (OpenID Connect Core
		// §3.1.3.7), and the library gives them the access token's
		// audience.
		r.audience = append(r.audience, req.ClientID)
	}
	s.requests[r.id] = r
	return r, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.requests[id]; ok {
		return r, nil
	}
	return nil, errNotFound
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errNotFound
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &token{subject: req.GetSubject(), audience: req.GetAudience(), scopes: s.granted(req.GetSubject(), req.GetScopes()),
		expiry: time.Now().Add(s.opts.TokenLifetime)}
	if r, ok := req.(*authRequest); ok {
		t.clientID = r.req.ClientID
	}
	id := uuid.NewString()
	s.tokens[id] = t
	return id, t.expiry, nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, fmt.Errorf("no refresh tokens")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(_ context.Context, id, _, _ string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, id)
	return nil
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.key, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []jose.SignatureAlgorithm{jose.SignatureAlgorithm(s.key.alg)}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []op.Key{publicKey{s.key}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[id]; ok {
		return c, nil
	}
	return nil, errNotFound
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[id]; ok && c.secret != "" && c.secret == secret {
		return nil
	}
	return fmt.Errorf("client %q: wrong secret", id)
}

func (s *storage) SetUserinfoFromScopes(_ context.Context, info *oidc.UserInfo, userID, _ string, _ []string) error {
	info.Subject = userID
	return nil
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, _, subject, _ string) error {
	info.Subject = subject
	return nil
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, id, subject, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tokens[id]
	if !ok || t.subject != subject || time.Now().After(t.expiry) {
		return errNotFound
	}
	resp.Issuer, resp.Subject, resp.ClientID = s.issuer, t.subject, t.clientID
	resp.Audience, resp.Scope = t.audience, t.scopes
	if s.opts.IntrospectionWithoutAudience {
		resp.Audience = nil
	}
	resp.Expiration = oidc.FromTime(t.expiry)
	resp.TokenType = oidc.BearerToken
	resp.Claims = s.claimsOf(t.subject, t.scopes)
	return nil
}

// GetPrivateClaimsFromScopes gives a JWT access token its scope claim (RFC
// 9068) and the user's conversations.
func (s *storage) GetPrivateClaimsFromScopes(_ context.Context, userID, _ string, scopes []string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimsOf(userID, s.granted(userID, scopes)), nil
}

// claimsOf are the claims beyond the standard ones of a token; s.mu is
// held.
func (s *storage) claimsOf(subject string, scopes []string) map[string]any {
	c := map[string]any{"scope": strings.Join(scopes, " ")}
	if u, ok := s.users[subject]; ok && u.conversations != nil {
		c[s.opts.ConversationsClaim] = u.conversations
	}
	return c
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNotFound
}

func (s *storage) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

func (s *storage) Health(context.Context) error { return nil }

// authRequest is one authorization, from its request to its code.
type authRequest struct {
	id       string
	req      oidc.AuthRequest
	audience []string
	subject  string
	done     bool
	authTime time.Time
}

func (r *authRequest) GetID() string                      { return r.id }
func (r *authRequest) GetACR() string                     { return "" }
func (r *authRequest) GetAMR() []string                   { return []string{"pwd"} }
func (r *authRequest) GetAudience() []string              { return r.audience }
func (r *authRequest) GetAuthTime() time.Time             { return r.authTime }
func (r *authRequest) GetClientID() string                { return r.req.ClientID }
func (r *authRequest) GetNonce() string                   { return r.req.Nonce }
func (r *authRequest) GetRedirectURI() string             { return r.req.RedirectURI }
func (r *authRequest) GetState() string                   { return r.req.State }
func (r *authRequest) GetSubject() string                 { return r.subject }
func (r *authRequest) Done() bool                         { return r.done }
func (r *authRequest) GetScopes() []string                { return r.req.Scopes }
func (r *authRequest) GetResponseType() oidc.ResponseType { return r.req.ResponseType }
func (r *authRequest) GetResponseMode() oidc.ResponseMode { return r.req.ResponseMode }

func (r *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	if r.req.CodeChallenge == "" {
		return nil
	}
	return &oidc.CodeChallenge{Challenge: r.req.CodeChallenge, Method: r.req.CodeChallengeMethod}
}

// client is a registered client: a public native one, or a confidential
// one with a secret.
type client struct {
	id        string
	secret    string
	redirects []string
	native    bool
	// web marks a confidential web application (AddWebClient): its
	// redirect may be http on loopback, as the library allows in
	// development mode.
	web       bool
	issuer    string
	tokenType op.AccessTokenType
}

func (c *client) GetID() string                        { return c.id }
func (c *client) RedirectURIs() []string               { return c.redirects }
func (c *client) PostLogoutRedirectURIs() []string     { return nil }
func (c *client) LoginURL(id string) string            { return c.issuer + "/login?id=" + id }
func (c *client) AccessTokenType() op.AccessTokenType  { return c.tokenType }
func (c *client) IDTokenLifetime() time.Duration       { return 5 * time.Minute }
func (c *client) DevMode() bool                        { return c.web }
func (c *client) IsScopeAllowed(string) bool           { return true }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}

func (c *client) ApplicationType() op.ApplicationType {
	if c.native {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}

func (c *client) AuthMethod() oidc.AuthMethod {
	if c.secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}

func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode}
}

func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return slices.Clone(s) }
}

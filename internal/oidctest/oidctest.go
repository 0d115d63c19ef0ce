// Package oidctest runs an OpenID provider on loopback for tests: the op
// package of github.com/zitadel/oidc, with users who sign in without a
// page, a public client for the authorization code flow with PKCE, a
// confidential client that may introspect tokens, and access tokens minted
// for the audience a client names with RFC 8707's resource parameter.
//
// Only the storage is written here; discovery, authorization, PKCE, the
// token and introspection endpoints, signing and the key set are the
// library's.
package oidctest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/oauth2"
)

// Client ids and the redirect address of the provider's clients.
const (
	// ClientID is a public client (a desktop agent) that signs users in
	// with the authorization code flow and PKCE.
	ClientID = "mcp-agent"
	// RedirectURL is where ClientID's authorizations return; nothing
	// listens there, the Fetcher reads the code from the redirect.
	RedirectURL = "http://127.0.0.1/callback"
	// IntrospectionClientID and IntrospectionSecret authenticate the
	// resource server at the introspection endpoint.
	IntrospectionClientID = "mcpsearch-introspection"
	IntrospectionSecret   = "introspection-secret"
)

// DefaultConversationsClaim is the claim that carries a user's
// conversations unless Options names another.
const DefaultConversationsClaim = "mcpsearch_conversations"

// Options shape a Provider.
type Options struct {
	// ConversationsClaim names the claim carrying a user's conversations
	// (default DefaultConversationsClaim).
	ConversationsClaim string
	// Opaque makes access tokens opaque, to be introspected, instead of
	// JSON Web Tokens.
	Opaque bool
	// Algorithm signs the tokens: RS256 (default), ES256 or EdDSA.
	Algorithm string
	// TokenLifetime is how long an access token lasts (default 5 minutes).
	TokenLifetime time.Duration
	// IntrospectionWithoutAudience leaves aud out of introspection
	// answers, as RFC 7662 allows and some providers do.
	IntrospectionWithoutAudience bool
}

// Mode is how the provider answers.
type Mode int32

// The provider's modes.
const (
	// Up answers.
	Up Mode = iota
	// Failing answers every request with 503.
	Failing
	// Hanging answers nothing until the request is given up.
	Hanging
)

// Provider is a running OpenID provider.
type Provider struct {
	// URL is the issuer identifier, the server's base URL.
	URL string

	st   *storage
	srv  *httptest.Server
	mode atomic.Int32
	mu   sync.Mutex
	hits map[string]int
}

// New starts a provider, stopped when the test ends.
func New(t testing.TB, opts Options) *Provider {
	t.Helper()
	if opts.ConversationsClaim == "" {
		opts.ConversationsClaim = DefaultConversationsClaim
	}
	if opts.TokenLifetime == 0 {
		opts.TokenLifetime = 5 * time.Minute
	}
	p := &Provider{hits: map[string]int{}}
	var handler http.Handler
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.hits[r.URL.Path]++
		p.mu.Unlock()
		switch Mode(p.mode.Load()) {
		case Failing:
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		case Hanging:
			<-r.Context().Done()
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	p.URL = p.srv.URL

	key, err := newKey(opts.Algorithm)
	if err != nil {
		t.Fatal(err)
	}
	p.st = &storage{
		issuer:   p.URL,
		opts:     opts,
		key:      key,
		users:    map[string]*user{},
		requests: map[string]*authRequest{},
		codes:    map[string]string{},
		tokens:   map[string]*token{},
		clients: map[string]*client{
			ClientID: {id: ClientID, redirects: []string{RedirectURL}, native: true, issuer: p.URL,
				tokenType: map[bool]op.AccessTokenType{false: op.AccessTokenTypeJWT, true: op.AccessTokenTypeBearer}[opts.Opaque]},
			IntrospectionClientID: {id: IntrospectionClientID, secret: IntrospectionSecret, issuer: p.URL},
		},
	}
	var cryptoKey [32]byte
	_, _ = rand.Read(cryptoKey[:])
	provider, err := op.NewProvider(&op.Config{CryptoKey: cryptoKey, CodeMethodS256: true, AuthMethodPost: true},
		p.st, op.StaticIssuer(p.URL), op.WithAllowInsecure(), op.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/login", p.login)
	mux.Handle("/", provider)
	handler = withResource(mux)
	return p
}

// AddWebClient registers a confidential web application, id with secret,
// whose authorizations return to redirect: a server-side client such as a
// web page that signs its users in (authorization code with PKCE, the
// secret at the token endpoint). Its ID tokens name it as their audience
// besides any resource it asks for, and its access tokens are JWTs, or
// opaque ones with Options.Opaque.
func (p *Provider) AddWebClient(id, secret, redirect string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.clients[id] = &client{id: id, secret: secret, redirects: []string{redirect}, issuer: p.URL, web: true,
		tokenType: map[bool]op.AccessTokenType{false: op.AccessTokenTypeJWT, true: op.AccessTokenTypeBearer}[p.st.opts.Opaque]}
}

// SetMode makes the provider answer, fail or hang.
func (p *Provider) SetMode(m Mode) { p.mode.Store(int32(m)) }

// Hits counts the requests made to path.
func (p *Provider) Hits(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[path]
}

// AddUser adds a user who may sign in. conversations, when not nil, go
// into the conversations claim of the user's tokens.
func (p *Provider) AddUser(subject string, conversations []string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.users[subject] = &user{subject: subject, conversations: conversations}
}

// LimitScopes grants subject's tokens only these of the scopes a client
// asks for: a user the provider does not let write, say.
func (p *Provider) LimitScopes(subject string, scopes ...string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	if u, ok := p.st.users[subject]; ok {
		u.scopes = append([]string{}, scopes...)
	}
}

// SignInAs makes subject the user of the next authorizations.
func (p *Provider) SignInAs(subject string) {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	p.st.signedIn = subject
}

// Fetcher is the part of an agent that opens the authorization URL in a
// browser and catches the redirect: it follows the provider's redirects,
// the user signing in on the way, and returns the code and state that come
// back to RedirectURL.
func (p *Provider) Fetcher() auth.AuthorizationCodeFetcher {
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		q, err := p.authorize(ctx, args.URL)
		if err != nil {
			return nil, err
		}
		return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
}

// authorize follows the redirects of an authorization URL to RedirectURL
// and returns its query.
func (p *Provider) authorize(ctx context.Context, authURL string) (url.Values, error) {
	c := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), RedirectURL) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	loc, err := resp.Location()
	if err != nil || !strings.HasPrefix(loc.String(), RedirectURL) {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("authorization ended at %s with %d: %s", resp.Request.URL, resp.StatusCode, body)
	}
	q := loc.Query()
	if e := q.Get("error"); e != "" {
		return nil, fmt.Errorf("authorization refused: %s: %s", e, q.Get("error_description"))
	}
	return q, nil
}

// Token runs the authorization code flow with PKCE for subject, asking
// for scopes and, when resource is not empty, a token for that resource,
// and returns the access token.
func (p *Provider) Token(t testing.TB, subject, resource string, scopes ...string) string {
	t.Helper()
	p.SignInAs(subject)
	cfg := &oauth2.Config{ClientID: ClientID, RedirectURL: RedirectURL, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: p.URL + "/authorize", TokenURL: p.URL + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	if resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", resource))
	}
	ctx := context.Background()
	q, err := p.authorize(ctx, cfg.AuthCodeURL("state", opts...))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("token exchange: %v", err)
	}
	return tok.AccessToken
}

// Sign signs claims with the provider's current key, as a token of its own
// would be.
func (p *Provider) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	p.st.mu.Lock()
	k := p.st.key
	p.st.mu.Unlock()
	return SignWith(t, k.private, k.alg, k.id, claims)
}

// SignWith signs claims with key under alg and key id kid.
func SignWith(t testing.TB, key crypto.Signer, alg, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// RotateKey replaces the signing key: the old one leaves the key set.
func (p *Provider) RotateKey(t testing.TB) {
	t.Helper()
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	k, err := newKey(p.st.opts.Algorithm)
	if err != nil {
		t.Fatal(err)
	}
	p.st.key = k
}

// signingKey is the provider's key.
type signingKey struct {
	id      string
	alg     string
	private crypto.Signer
}

func newKey(alg string) (*signingKey, error) {
	k := &signingKey{id: uuid.NewString(), alg: alg}
	var err error
	switch alg {
	case "", "RS256":
		k.alg = "RS256"
		k.private, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		k.private, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "EdDSA":
		_, k.private, err = ed25519.GenerateKey(rand.Reader)
	default:
		err = fmt.Errorf("oidctest: no key for %s", alg)
	}
	return k, err
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm {
	return jose.SignatureAlgorithm(k.alg)
}
func (k *signingKey) Key() any   { return k.private }
func (k *signingKey) ID() string { return k.id }

// publicKey is the key set's view of a signingKey.
type publicKey struct{ *signingKey }

func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.SignatureAlgorithm(k.alg) }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.private.Public() }

// resourceKey carries an authorization request's resource parameters to
// the storage, which the library does not hand them to.
type resourceKey struct{}

func withResource(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/authorize" {
			if res := r.URL.Query()["resource"]; len(res) > 0 {
				r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, res))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// login signs in the user SignInAs named, without a page, and returns to
// the library's callback.
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if err := p.st.complete(id); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, p.URL+"/authorize/callback?id="+url.QueryEscape(id), http.StatusFound)
}

var errNotFound = errors.New("not found")

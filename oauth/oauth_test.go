package oauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/mcpsearch/mcpsearch/internal/oidctest"
	"github.com/mcpsearch/mcpsearch/oauth"
)

const resource = "https://mcp.example.com/mcp"

// clock is a settable clock for a Verifier.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newVerifier(t *testing.T, p *oidctest.Provider, tweak func(*oauth.Config)) *oauth.Verifier {
	t.Helper()
	cfg := oauth.Config{Issuer: p.URL, Audiences: []string{resource}, ConversationsClaim: oidctest.DefaultConversationsClaim}
	if tweak != nil {
		tweak(&cfg)
	}
	v, err := oauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestTokensOfARealProvider(t *testing.T) {
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		t.Run(alg, func(t *testing.T) {
			p := oidctest.New(t, oidctest.Options{Algorithm: alg})
			p.AddUser("alice", []string{"conv-a", "conv-b"})
			p.AddUser("bob", nil)
			v := newVerifier(t, p, nil)

			tok, err := v.Verify(context.Background(), p.Token(t, "alice", resource, "mcpsearch:read", "mcpsearch:write"))
			if err != nil {
				t.Fatal(err)
			}
			if tok.Subject != "alice" || tok.ClientID != oidctest.ClientID || !tok.HasScope("mcpsearch:read") || !tok.HasScope("mcpsearch:write") ||
				!slices.Equal(tok.Conversations, []string{"conv-a", "conv-b"}) || time.Until(tok.Expiry) < time.Minute {
				t.Errorf("token = %+v", tok)
			}
			// A configured claim the token lacks limits it to nothing.
			tok, err = v.Verify(context.Background(), p.Token(t, "bob", resource, "mcpsearch:read"))
			if err != nil {
				t.Fatal(err)
			}
			if tok.Conversations == nil || len(tok.Conversations) != 0 || tok.HasScope("mcpsearch:write") {
				t.Errorf("bob's token = %+v, want no conversations and no write scope", tok)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	p := oidctest.New(t, oidctest.Options{})
	p.AddUser("alice", nil)
	v := newVerifier(t, p, nil)
	now := time.Now().Unix()
	claims := func(change map[string]any) map[string]any {
		c := map[string]any{"iss": p.URL, "sub": "alice", "aud": resource, "exp": now + 300, "iat": now, "scope": "mcpsearch:read"}
		for k, val := range change {
			if val == nil {
				delete(c, k)
			} else {
				c[k] = val
			}
		}
		return c
	}
	// A token signed by a key of the right kind that the issuer never
	// published, under a key id it does not have and under its own.
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other := oidctest.New(t, oidctest.Options{})
	other.AddUser("alice", nil)

	tests := []struct {
		name  string
		token string
		want  string
	}{
		{"expired", p.Sign(t, claims(map[string]any{"exp": now - 120})), "expired at"},
		{"not yet valid", p.Sign(t, claims(map[string]any{"nbf": now + 600})), "not valid before"},
		{"no expiry", p.Sign(t, claims(map[string]any{"exp": nil})), "no expiry"},
		{"no subject", p.Sign(t, claims(map[string]any{"sub": nil})), "no subject"},
		{"wrong audience", p.Token(t, "alice", "https://other.example.com/mcp", "mcpsearch:read"), "not for this server"},
		{"no resource asked", p.Token(t, "alice", "", "mcpsearch:read"), "not for this server"},
		{"wrong issuer", p.Sign(t, claims(map[string]any{"iss": "https://login.example.org"})), "issued by"},
		// The issuer is compared exactly as configured (RFC 8414 §3.3).
		{"issuer with a trailing slash", p.Sign(t, claims(map[string]any{"iss": p.URL + "/"})), "issued by"},
		{"no audience", p.Sign(t, claims(map[string]any{"aud": nil})), "not for this server"},
		{"another provider's token", other.Token(t, "alice", resource, "mcpsearch:read"), "does not publish"},
		{"alg none", unsigned(claims(nil)), `unexpected signature algorithm "none"`},
		{"HS256 with the public key as secret", hs256WithPublicKey(t, p, claims(nil)), `unexpected signature algorithm "HS256"`},
		{"key the JWKS lacks", oidctest.SignWith(t, stranger, "ES256", "ghost", claims(nil)), `key "ghost"`},
		{"no key id, no such key", oidctest.SignWith(t, stranger, "ES256", "", claims(nil)), "publishes no ES256 key"},
		{"not a JWT", "opaque-token-without-dots", "introspects no opaque tokens"},
		{"tampered payload", tamper(p.Sign(t, claims(nil))), "bad signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Verify(context.Background(), tt.token)
			if !errors.Is(err, oauth.ErrInvalidToken) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Verify = %v, want ErrInvalidToken saying %q", err, tt.want)
			}
			if strings.Contains(err.Error(), tt.token) {
				t.Errorf("the error quotes the token: %v", err)
			}
		})
	}
	// Within the leeway, a token just expired is still good.
	if _, err := v.Verify(context.Background(), p.Sign(t, claims(map[string]any{"exp": now - 5}))); err != nil {
		t.Errorf("a token 5 s past exp: %v, want it accepted (leeway %s)", err, oauth.Leeway)
	}
}

// unsigned is a token with alg none.
func unsigned(claims map[string]any) string {
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	b, _ := json.Marshal(claims)
	return h + "." + base64.RawURLEncoding.EncodeToString(b) + "."
}

// hs256WithPublicKey signs claims with HS256, the secret being the
// issuer's public key as its JWKS publishes it: the algorithm confusion
// that a verifier trusting the token's alg falls for.
func hs256WithPublicKey(t *testing.T, p *oidctest.Provider, claims map[string]any) string {
	t.Helper()
	resp, err := http.Get(p.URL + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("keys: %v", err)
	}
	kid := set.Keys[0].KeyID
	der, err := x509.MarshalPKIXPublicKey(set.Keys[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	h, _ := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT", "kid": kid})
	b, _ := json.Marshal(claims)
	signing := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(b)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// tamper changes the payload of a signed token, keeping its signature.
func tamper(token string) string {
	parts := strings.Split(token, ".")
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var c map[string]any
	_ = json.Unmarshal(b, &c)
	c["sub"] = "mallory"
	b, _ = json.Marshal(c)
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

func TestRotatedKeyIsFetched(t *testing.T) {
	p := oidctest.New(t, oidctest.Options{Algorithm: "ES256"})
	p.AddUser("alice", nil)
	c := &clock{t: time.Now()}
	v := newVerifier(t, p, func(cfg *oauth.Config) { cfg.Now = c.now })
	if _, err := v.Verify(context.Background(), p.Token(t, "alice", resource, "mcpsearch:read")); err != nil {
		t.Fatal(err)
	}
	if n := p.Hits("/keys"); n != 1 {
		t.Fatalf("keys fetched %d times, want 1", n)
	}
	// A key id the set lacks, just after it was fetched: not fetched again
	// for it, however many such tokens come.
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for range 20 {
		if _, err := v.Verify(context.Background(), oidctest.SignWith(t, stranger, "ES256", "ghost", map[string]any{"sub": "x"})); !errors.Is(err, oauth.ErrInvalidToken) {
			t.Fatalf("unknown key: %v", err)
		}
	}
	if n := p.Hits("/keys"); n != 1 {
		t.Errorf("keys fetched %d times for tokens of an unknown key, want 1", n)
	}
	// The issuer rotates its key; past the refetch interval, its new
	// tokens send the verifier to the key set again, once.
	p.RotateKey(t)
	c.advance(11 * time.Second)
	for range 3 {
		if _, err := v.Verify(context.Background(), p.Token(t, "alice", resource, "mcpsearch:read")); err != nil {
			t.Fatalf("token of the rotated key: %v", err)
		}
	}
	if n := p.Hits("/keys"); n != 2 {
		t.Errorf("keys fetched %d times, want 2", n)
	}
}

func TestIssuerDown(t *testing.T) {
	p := oidctest.New(t, oidctest.Options{Algorithm: "ES256"})
	p.AddUser("alice", nil)
	c := &clock{t: time.Now()}
	const timeout = 300 * time.Millisecond
	v := newVerifier(t, p, func(cfg *oauth.Config) { cfg.Now, cfg.Timeout = c.now, timeout })
	// Signed by the provider's key, good for longer than the clock moves.
	tok := p.Sign(t, map[string]any{"iss": p.URL, "sub": "alice", "aud": resource, "exp": time.Now().Add(3 * time.Hour).Unix()})

	// Down before the keys were ever fetched: refused as unavailable,
	// after one bounded wait.
	p.SetMode(oidctest.Hanging)
	start := time.Now()
	_, err := v.Verify(context.Background(), tok)
	var ue *oauth.UnavailableError
	if !errors.As(err, &ue) || ue.RetryAfter <= 0 {
		t.Fatalf("Verify with the issuer hanging = %v, want an UnavailableError with RetryAfter", err)
	}
	// The issuer never answers: any answer is the verifier's own bound.
	t.Logf("Verify took %s with the issuer hanging (timeout %s)", time.Since(start).Round(time.Millisecond), timeout)
	// Asked again at once, it answers without asking the issuer.
	hits := p.Hits("/.well-known/openid-configuration")
	if _, err := v.Verify(context.Background(), tok); !errors.As(err, &ue) {
		t.Fatalf("second Verify = %v, want UnavailableError", err)
	}
	if p.Hits("/.well-known/openid-configuration") != hits {
		t.Errorf("second Verify asked the issuer again: want a refusal at once")
	}

	// Back up, past the retry delay: the keys are fetched.
	p.SetMode(oidctest.Up)
	c.advance(6 * time.Second)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("issuer back up: %v", err)
	}
	// Down again: the last good keys serve for their cache time (an hour,
	// the provider giving no max-age), refreshed in vain past its half.
	p.SetMode(oidctest.Failing)
	c.advance(40 * time.Minute)
	for range 3 {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Fatalf("cached keys within their cache time: %v", err)
		}
	}
	waitFor(t, func() bool { return p.Hits("/keys") >= 2 || p.Hits("/.well-known/openid-configuration") >= 3 })
	// Past it, tokens are refused as unavailable, not stalled.
	c.advance(21 * time.Minute)
	if _, err := v.Verify(context.Background(), tok); !errors.As(err, &ue) {
		t.Fatalf("keys past their cache time, issuer down: %v, want UnavailableError", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestIntrospection(t *testing.T) {
	p := oidctest.New(t, oidctest.Options{Opaque: true})
	p.AddUser("alice", []string{"conv-a"})
	c := &clock{t: time.Now()}
	v := newVerifier(t, p, func(cfg *oauth.Config) {
		cfg.ClientID, cfg.ClientSecret, cfg.Now = oidctest.IntrospectionClientID, oidctest.IntrospectionSecret, c.now
	})
	raw := p.Token(t, "alice", resource, "mcpsearch:read")
	if strings.Count(raw, ".") == 2 {
		t.Fatalf("the provider issued a JWT, want an opaque token: %s", raw)
	}
	for range 3 {
		tok, err := v.Verify(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Subject != "alice" || !tok.HasScope("mcpsearch:read") || !slices.Equal(tok.Conversations, []string{"conv-a"}) {
			t.Fatalf("token = %+v", tok)
		}
	}
	if n := p.Hits("/oauth/introspect"); n != 1 {
		t.Errorf("introspected %d times, want 1 (the answer is kept a minute)", n)
	}
	c.advance(61 * time.Second)
	if _, err := v.Verify(context.Background(), raw); err != nil || p.Hits("/oauth/introspect") != 2 {
		t.Errorf("after a minute: %v, %d introspections; want it asked again", err, p.Hits("/oauth/introspect"))
	}

	for name, token := range map[string]string{
		"another audience": p.Token(t, "alice", "https://other.example.com/mcp", "mcpsearch:read"),
		"unknown token":    "bm90LWEtdG9rZW4",
	} {
		if _, err := v.Verify(context.Background(), token); !errors.Is(err, oauth.ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", name, err)
		}
	}
	// Wrong client credentials and a failing issuer are the issuer's
	// trouble, not the token's: retryable, and the next call refused at
	// once.
	bad := newVerifier(t, p, func(cfg *oauth.Config) { cfg.ClientID, cfg.ClientSecret = oidctest.IntrospectionClientID, "wrong" })
	var ue *oauth.UnavailableError
	if _, err := bad.Verify(context.Background(), raw); !errors.As(err, &ue) || !strings.Contains(err.Error(), "client id and secret") {
		t.Errorf("wrong secret: %v", err)
	}
	p.SetMode(oidctest.Failing)
	fresh := newVerifier(t, p, func(cfg *oauth.Config) {
		cfg.ClientID, cfg.ClientSecret = oidctest.IntrospectionClientID, oidctest.IntrospectionSecret
	})
	if _, err := fresh.Verify(context.Background(), raw); !errors.As(err, &ue) {
		t.Errorf("issuer failing: %v", err)
	}
}

// TestIntrospectionWithoutAudience: RFC 7662 makes aud optional in an
// introspection answer; one without it is accepted, since this resource's
// own client asked, and the token still needs the server's scopes. An
// answer naming another audience is still refused.
func TestIntrospectionWithoutAudience(t *testing.T) {
	p := oidctest.New(t, oidctest.Options{Opaque: true, IntrospectionWithoutAudience: true})
	p.AddUser("alice", []string{"conv-a"})
	v := newVerifier(t, p, func(cfg *oauth.Config) {
		cfg.ClientID, cfg.ClientSecret = oidctest.IntrospectionClientID, oidctest.IntrospectionSecret
	})
	tok, err := v.Verify(context.Background(), p.Token(t, "alice", "", "mcpsearch:read"))
	if err != nil {
		t.Fatalf("an introspection answer without aud: %v, want it accepted", err)
	}
	if tok.Subject != "alice" || !tok.HasScope("mcpsearch:read") {
		t.Errorf("token = %+v", tok)
	}
	named := oidctest.New(t, oidctest.Options{Opaque: true})
	named.AddUser("alice", nil)
	v = newVerifier(t, named, func(cfg *oauth.Config) {
		cfg.ClientID, cfg.ClientSecret = oidctest.IntrospectionClientID, oidctest.IntrospectionSecret
	})
	if _, err := v.Verify(context.Background(), named.Token(t, "alice", "https://other.example.com/mcp", "mcpsearch:read")); !errors.Is(err, oauth.ErrInvalidToken) ||
		!strings.Contains(err.Error(), "not for this server") {
		t.Errorf("an answer naming another audience: %v, want it refused", err)
	}
}

func TestConfig(t *testing.T) {
	for _, tt := range []struct {
		cfg  oauth.Config
		want string
	}{
		{oauth.Config{Issuer: "http://sso.example.com", Audiences: []string{resource}}, "https URL"},
		{oauth.Config{Issuer: "https://sso.example.com"}, "no audience"},
		{oauth.Config{Issuer: "https://sso.example.com", Audiences: []string{resource}, Algorithms: []string{"none"}}, "never accepted"},
		{oauth.Config{Issuer: "https://sso.example.com", Audiences: []string{resource}, Algorithms: []string{"HS256"}}, "shared secret"},
		{oauth.Config{Issuer: "https://sso.example.com", Audiences: []string{resource}, Algorithms: []string{"RS1"}}, "unknown algorithm"},
	} {
		if _, err := oauth.New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	if _, err := oauth.New(oauth.Config{Issuer: "http://127.0.0.1:9/realms/x", Audiences: []string{resource}}); err != nil {
		t.Errorf("http on loopback: %v", err)
	}
}

func TestScopesAndChallenges(t *testing.T) {
	entra := &oauth.Token{Scopes: []string{"mcpsearch.read"}}
	if !entra.HasScope("api://mcpsearch/mcpsearch.read") || entra.HasScope("api://mcpsearch/mcpsearch.write") || entra.HasScope("mcpsearch:read") {
		t.Errorf("Entra ID scopes matched wrongly")
	}
	if got, want := oauth.MetadataURL("https://mcp.example.com/mcp"), "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"; got != want {
		t.Errorf("MetadataURL = %s, want %s", got, want)
	}
	if got, want := oauth.MetadataURL("https://mcp.example.com"), "https://mcp.example.com/.well-known/oauth-protected-resource"; got != want {
		t.Errorf("MetadataURL = %s, want %s", got, want)
	}
	ch := oauth.Challenge{MetadataURL: "https://m/.well-known/oauth-protected-resource", Error: oauth.InsufficientScope,
		Description: `needs "write"` + "\n", Scopes: []string{"a", "b"}}
	if got, want := ch.String(), `Bearer error="insufficient_scope", error_description="needs 'write'?", scope="a b", resource_metadata="https://m/.well-known/oauth-protected-resource"`; got != want {
		t.Errorf("challenge = %s\nwant        %s", got, want)
	}
}

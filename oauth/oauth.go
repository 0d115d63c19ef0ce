// Package oauth checks the access tokens a resource server receives, as
// OAuth 2.1 and the MCP authorization spec ask: a JSON Web Token is checked
// against the signing keys its issuer publishes (found through the issuer's
// metadata, kept for their cache time, fetched again for a key id they do
// not have), an opaque token is asked about at the issuer's introspection
// endpoint (RFC 7662), and either must name this server as its audience
// (RFC 8707). It also describes the resource to clients (RFC 9728) and
// words the WWW-Authenticate challenges of refusals (RFC 6750).
//
// It knows HTTP and OAuth, not MCP: what a scope allows is the caller's
// business.
package oauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Leeway is the clock difference tolerated between this server and the
// issuer when checking exp, nbf and iat.
const Leeway = 30 * time.Second

// DefaultTimeout bounds one request to the issuer: its metadata and keys
// together, or one introspection.
const DefaultTimeout = 5 * time.Second

// retryDelay is how long after a failed request to the issuer tokens that
// need it are refused at once, without asking again: an issuer that is down
// costs callers one bounded wait, not one per request.
const retryDelay = 5 * time.Second

// DefaultAlgorithms are the signature algorithms accepted unless the
// configuration names others.
var DefaultAlgorithms = []string{"RS256", "ES256", "EdDSA"}

// Algorithms are the signature algorithms a Verifier can be told to
// accept: public-key ones only. A shared-secret algorithm (HS256...) would
// let anyone holding the issuer's public key sign tokens, and "none" signs
// nothing.
var Algorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Config says which tokens a Verifier accepts.
type Config struct {
	// Issuer is the authorization server's issuer identifier: a token's
	// iss must be it, and its metadata is found from it.
	Issuer string
	// Audiences are the resource identifiers of this server: a token's aud
	// must hold one of them.
	Audiences []string
	// Algorithms are the signature algorithms accepted (default
	// DefaultAlgorithms), a subset of Algorithms.
	Algorithms []string
	// ConversationsClaim, when set, names the claim that lists the
	// conversations a token may touch (see Token.Conversations).
	ConversationsClaim string
	// ClientID and ClientSecret authenticate this server at the issuer's
	// introspection endpoint. Without a client id, opaque tokens are
	// refused.
	ClientID, ClientSecret string
	// IntrospectionURL is the introspection endpoint; empty, the one the
	// issuer's metadata names.
	IntrospectionURL string
	// Client makes the requests to the issuer; nil, a client of its own.
	Client *http.Client
	// Timeout bounds one request to the issuer (default DefaultTimeout).
	Timeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Token is what a checked access token says of its bearer.
type Token struct {
	// Subject is the sub claim: who the token was issued to.
	Subject string
	// ClientID is the client the token was issued through (client_id or
	// azp), when the token says.
	ClientID string
	// Scopes are the token's scopes (the scope and scp claims).
	Scopes []string
	// Expiry is when the token expires; zero when introspection gave none.
	Expiry time.Time
	// Conversations are the only conversations the token may touch, when
	// Config.ConversationsClaim is set: the claim's values, or none when
	// the token lacks the claim. nil means any: the claim is not
	// configured, or holds "*".
	Conversations []string
}

// HasScope reports whether the token holds scope. A scope configured as a
// URI also matches the last segment of its path, which is how Microsoft
// Entra ID writes the scopes of its tokens (api://mcpsearch/mcpsearch.read
// is requested, scp says mcpsearch.read).
func (t *Token) HasScope(scope string) bool {
	if slices.Contains(t.Scopes, scope) {
		return true
	}
	if i := strings.LastIndex(scope, "/"); i >= 0 && strings.Contains(scope, "://") {
		return slices.Contains(t.Scopes, scope[i+1:])
	}
	return false
}

// ErrInvalidToken is wrapped by the errors of a token that is refused: bad
// signature, expired, for another audience or issuer, or unknown to the
// issuer. The text after it says which.
var ErrInvalidToken = errors.New("invalid access token")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidToken, fmt.Sprintf(format, args...))
}

// UnavailableError reports a token that could not be checked because the
// issuer did not answer (its keys, metadata or introspection endpoint):
// the request may succeed later.
type UnavailableError struct {
	// RetryAfter is when asking again may help.
	RetryAfter time.Duration
	// Err is what went wrong; its text names the issuer's URLs, for the
	// operator.
	Err error
}

func (e *UnavailableError) Error() string {
	return "the authorization server cannot be reached to check the token: " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Verifier checks access tokens for one issuer and one resource server. It
// is safe for concurrent use.
type Verifier struct {
	cfg    Config
	algs   []jose.SignatureAlgorithm
	client *http.Client
	now    func() time.Time

	keys  keyCache
	meta  metaCache
	intro *introspector
}

// New returns a Verifier for cfg. It checks cfg but asks the issuer
// nothing: the metadata and keys are fetched when the first token needs
// them.
func New(cfg Config) (*Verifier, error) {
	u, err := url.Parse(cfg.Issuer)
	if err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && loopback(u.Hostname()))) ||
		u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("issuer %q: want an https URL without query or fragment (http only on loopback)", cfg.Issuer)
	}
	if len(cfg.Audiences) == 0 {
		return nil, errors.New("no audience: a token must name this server, give its resource identifier")
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = DefaultAlgorithms
	}
	var algs []jose.SignatureAlgorithm
	for _, a := range cfg.Algorithms {
		if err := CheckAlgorithm(a); err != nil {
			return nil, err
		}
		algs = append(algs, jose.SignatureAlgorithm(a))
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	client := cfg.Client
	if client == nil {
		// No redirects: the issuer's URLs are the ones its metadata gives.
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	v := &Verifier{cfg: cfg, algs: algs, client: client, now: cfg.Now}
	if cfg.ClientID != "" {
		v.intro = &introspector{cache: map[[32]byte]cachedToken{}}
	}
	return v, nil
}

// CheckAlgorithm says why alg may not sign the tokens a Verifier accepts,
// nil when it may.
func CheckAlgorithm(alg string) error {
	switch {
	case slices.Contains(Algorithms, alg):
		return nil
	case strings.EqualFold(alg, "none"):
		return errors.New(`algorithm "none" signs nothing: it is never accepted`)
	case strings.HasPrefix(strings.ToUpper(alg), "HS"):
		return fmt.Errorf("algorithm %s is a shared secret: tokens are checked with the issuer's public keys, so accept %s", alg, strings.Join(Algorithms, ", "))
	}
	return fmt.Errorf("unknown algorithm %q: want some of %s", alg, strings.Join(Algorithms, ", "))
}

// Issuer is the issuer identifier tokens must carry.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// Verify checks raw, an access token, and returns what it says. A refused
// token's error wraps ErrInvalidToken; a token that could not be checked
// because the issuer did not answer is an *UnavailableError. Verify waits
// at most the configured timeout for the issuer, and not at all for a
// while after it failed to answer.
func (v *Verifier) Verify(ctx context.Context, raw string) (*Token, error) {
	if strings.Count(raw, ".") == 2 {
		return v.verifyJWT(ctx, raw)
	}
	if v.intro == nil {
		return nil, invalid("not a JSON Web Token, and this server introspects no opaque tokens")
	}
	return v.introspect(ctx, raw)
}

// check applies the rules every token meets, however it was read: issuer,
// subject, lifetime and audience; and reads its scopes and conversations.
// A JWT must name its issuer, audience and expiry; an introspection
// answer, which the issuer gave, may leave them out (RFC 7662 §2.2).
func (v *Verifier) check(c *claims, jwt bool) (*Token, error) {
	now := v.now()
	if c.Issuer != "" || jwt {
		if !sameIssuer(c.Issuer, v.cfg.Issuer) {
			return nil, invalid("issued by %q, not by %s", c.Issuer, v.cfg.Issuer)
		}
	}
	if c.Subject == "" {
		return nil, invalid("no subject (sub)")
	}
	t := &Token{Subject: c.Subject, ClientID: cmpOr(c.ClientID, c.AZP)}
	switch {
	case c.Expiry != nil:
		t.Expiry = c.Expiry.Time()
		if now.After(t.Expiry.Add(Leeway)) {
			return nil, invalid("expired at %s", t.Expiry.UTC().Format(time.RFC3339))
		}
	case jwt:
		return nil, invalid("no expiry (exp)")
	}
	if c.NotBefore != nil && now.Add(Leeway).Before(c.NotBefore.Time()) {
		return nil, invalid("not valid before %s", c.NotBefore.Time().UTC().Format(time.RFC3339))
	}
	if c.IssuedAt != nil && now.Add(Leeway).Before(c.IssuedAt.Time()) {
		return nil, invalid("issued in the future (%s)", c.IssuedAt.Time().UTC().Format(time.RFC3339))
	}
	// An introspection answer may leave aud out (RFC 7662 §2.2): the
	// issuer gave it to this resource's own client, which asked about a
	// token presented here, and the token still needs this server's
	// scopes. An answer that names audiences must name this server, as a
	// JWT must.
	if (jwt || len(c.Audience) > 0) && !matchesAudience(c.Audience, v.cfg.Audiences) {
		return nil, invalid("for audience %s, not for this server (%s)", quoteList(c.Audience), strings.Join(v.cfg.Audiences, ", "))
	}
	for _, s := range append(c.Scope, c.SCP...) {
		if s != "" && !slices.Contains(t.Scopes, s) {
			t.Scopes = append(t.Scopes, s)
		}
	}
	if v.cfg.ConversationsClaim != "" {
		convs, err := conversations(c.extra[v.cfg.ConversationsClaim])
		if err != nil {
			return nil, invalid("claim %s: %v", v.cfg.ConversationsClaim, err)
		}
		t.Conversations = convs
	}
	return t, nil
}

// sameIssuer compares issuer identifiers exactly, as the issuer is
// configured: RFC 8414 §3.3 and RFC 9068 §4 ask for identical strings, and
// a provider that writes a trailing slash is configured with it.
func sameIssuer(a, b string) bool {
	return a != "" && a == b
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func quoteList(l []string) string {
	if len(l) == 0 {
		return "(none)"
	}
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

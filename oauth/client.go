package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"
)

// Client is a confidential OAuth client of the issuer that signs people
// in through a browser: the authorization code flow with PKCE (RFC 7636,
// S256), the client authenticated with its secret at the token endpoint,
// and an OpenID Connect ID token whose nonce ties the sign-in to the
// browser that started it. The access token it receives is checked as the
// Verifier checks any, so that a person signed in this way has exactly
// what their token grants. A Client is safe for concurrent use.
type Client struct {
	v                    *Verifier
	id, secret, redirect string
	scopes               []string
	resource             string
}

// ClientConfig describes a Client.
type ClientConfig struct {
	// ID and Secret are the client's credentials at the issuer.
	ID, Secret string
	// RedirectURL is where the issuer sends the browser back, registered
	// with the client at the issuer.
	RedirectURL string
	// Scopes are asked for besides openid.
	Scopes []string
	// Resource, when set, is sent as RFC 8707's resource parameter: the
	// resource the access token is for.
	Resource string
}

// Client returns a client of v's issuer whose access tokens v checks.
func (v *Verifier) Client(cfg ClientConfig) (*Client, error) {
	if cfg.ID == "" || cfg.Secret == "" {
		return nil, errors.New("a client needs its id and secret")
	}
	if err := secureURL(cfg.RedirectURL); err != nil {
		return nil, fmt.Errorf("redirect URL: %w", err)
	}
	return &Client{v: v, id: cfg.ID, secret: cfg.Secret, redirect: cfg.RedirectURL, scopes: cfg.Scopes, resource: cfg.Resource}, nil
}

// config is the client as golang.org/x/oauth2 takes it, with the
// issuer's endpoints.
func (c *Client) config(ctx context.Context) (*oauth2.Config, error) {
	meta, err := c.v.metadata(ctx)
	if err != nil {
		return nil, &UnavailableError{RetryAfter: retryDelay, Err: err}
	}
	for name, u := range map[string]string{"authorization_endpoint": meta.AuthorizationEndpoint, "token_endpoint": meta.TokenEndpoint} {
		if u == "" {
			return nil, fmt.Errorf("the metadata of %s names no %s", c.v.cfg.Issuer, name)
		}
		if err := secureURL(u); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return &oauth2.Config{ClientID: c.id, ClientSecret: c.secret, RedirectURL: c.redirect,
		Scopes:   append([]string{"openid"}, c.scopes...),
		Endpoint: oauth2.Endpoint{AuthURL: meta.AuthorizationEndpoint, TokenURL: meta.TokenEndpoint, AuthStyle: oauth2.AuthStyleInHeader}}, nil
}

// AuthURL is the issuer's authorization endpoint asking for a code for
// this client, returned with state, an ID token carrying nonce, and the
// S256 challenge of verifier.
func (c *Client) AuthURL(ctx context.Context, state, nonce, verifier string) (string, error) {
	cfg, err := c.config(ctx)
	if err != nil {
		return "", err
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("nonce", nonce)}
	if c.resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", c.resource))
	}
	return cfg.AuthCodeURL(state, opts...), nil
}

// ErrSignInRefused wraps the errors of a sign-in the issuer or this
// client refused: a code it does not take, an ID token that is not for
// this client or this browser, tokens of two different people. The text
// after it says which.
var ErrSignInRefused = errors.New("sign-in refused")

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSignInRefused, fmt.Sprintf(format, args...))
}

// Exchange trades code, with the PKCE verifier, for tokens at the
// issuer's token endpoint, checks the ID token (signed by the issuer,
// issued by it exactly, for this client, carrying nonce, not expired) and
// the access token (Verify), and returns what the access token grants. A
// refusal wraps ErrSignInRefused, or ErrInvalidToken for an access token
// this server would not accept; an issuer that does not answer is an
// *UnavailableError.
func (c *Client) Exchange(ctx context.Context, code, verifier, nonce string) (*Token, error) {
	cfg, err := c.config(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.v.cfg.Timeout)
	defer cancel()
	opts := []oauth2.AuthCodeOption{oauth2.VerifierOption(verifier)}
	if c.resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", c.resource))
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, c.v.client), code, opts...)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < http.StatusInternalServerError {
			what := re.ErrorCode
			if re.ErrorDescription != "" {
				what += ": " + re.ErrorDescription
			}
			if what == "" {
				what = fmt.Sprintf("status %d", re.Response.StatusCode)
			}
			return nil, refused("the token endpoint refused the code (%s)", clip(what, 300))
		}
		return nil, &UnavailableError{RetryAfter: retryDelay, Err: fmt.Errorf("token endpoint: %w", unwrapURLError(err))}
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, refused("the issuer sent no ID token: the client must be allowed the openid scope")
	}
	id, err := c.v.idToken(ctx, raw, c.id, nonce)
	if err != nil {
		return nil, err
	}
	at, err := c.v.Verify(ctx, tok.AccessToken)
	if err != nil {
		return nil, err
	}
	if at.Subject != id.Subject {
		return nil, refused("the ID token is of %q and the access token of %q", id.Subject, at.Subject)
	}
	return at, nil
}

// idToken checks an OpenID Connect ID token (Core §3.1.3.7): signed by
// the issuer with an accepted algorithm, issued by it exactly, for client
// (aud holds it; azp, when present, is it), not expired, and carrying the
// nonce of this sign-in.
func (v *Verifier) idToken(ctx context.Context, raw, client, nonce string) (*claims, error) {
	jws, err := jose.ParseSignedCompact(raw, v.algs)
	if err != nil {
		return nil, refused("ID token: %v", strings.TrimPrefix(err.Error(), "go-jose/go-jose: "))
	}
	if len(jws.Signatures) != 1 {
		return nil, refused("ID token: want one signature, got %d", len(jws.Signatures))
	}
	h := jws.Signatures[0].Protected
	keys, err := v.signingKeys(ctx, h.KeyID, h.Algorithm)
	if err != nil {
		if errors.Is(err, ErrInvalidToken) {
			return nil, refused("ID token: %v", strings.TrimPrefix(err.Error(), ErrInvalidToken.Error()+": "))
		}
		return nil, err
	}
	var payload []byte
	for _, k := range keys {
		if payload, err = jws.Verify(k.Key); err == nil {
			break
		}
	}
	if payload == nil {
		return nil, refused("ID token: bad signature")
	}
	c, err := parseClaims(payload)
	if err != nil {
		return nil, refused("ID token: %v", err)
	}
	now := v.now()
	switch {
	case !sameIssuer(c.Issuer, v.cfg.Issuer):
		return nil, refused("ID token issued by %q, not by %s", c.Issuer, v.cfg.Issuer)
	case c.Subject == "":
		return nil, refused("ID token without a subject (sub)")
	case !slices.Contains(c.Audience, client):
		return nil, refused("ID token for %s, not for this client (%s)", quoteList(c.Audience), client)
	case c.AZP != "" && c.AZP != client:
		return nil, refused("ID token issued to client %q, not to %s", c.AZP, client)
	case c.Expiry == nil:
		return nil, refused("ID token without an expiry (exp)")
	case now.After(c.Expiry.Time().Add(Leeway)):
		return nil, refused("ID token expired")
	case c.Nonce == "" || c.Nonce != nonce:
		return nil, refused("the ID token's nonce is not this sign-in's: start again from the sign-in page")
	}
	return c, nil
}

// clip cuts s to n bytes at most, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

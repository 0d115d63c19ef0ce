package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// introspectionTTL is the longest an introspection's answer is reused: a
// token revoked at the issuer is refused here within this time.
const introspectionTTL = time.Minute

// maxIntrospected bounds the answers kept.
const maxIntrospected = 10_000

// introspector asks the issuer about opaque tokens (RFC 7662) and keeps
// its answers about active tokens for a short while, by the token's hash:
// the tokens themselves are not kept.
type introspector struct {
	mu    sync.Mutex
	cache map[[32]byte]cachedToken
	// failedUntil, after a failed request, is when the next may be made;
	// lastErr is why it failed.
	failedUntil time.Time
	lastErr     error
}

type cachedToken struct {
	tok   *Token
	until time.Time
}

// introspect checks an opaque token by asking the issuer about it.
func (v *Verifier) introspect(ctx context.Context, raw string) (*Token, error) {
	in := v.intro
	sum := sha256.Sum256([]byte(raw))
	now := v.now()
	in.mu.Lock()
	if c, ok := in.cache[sum]; ok && now.Before(c.until) {
		in.mu.Unlock()
		return c.tok, nil
	}
	if now.Before(in.failedUntil) {
		err := &UnavailableError{RetryAfter: in.failedUntil.Sub(now), Err: in.lastErr}
		in.mu.Unlock()
		return nil, err
	}
	in.mu.Unlock()

	c, err := v.askIssuer(ctx, raw)
	if err != nil {
		if ctx.Err() == nil {
			in.mu.Lock()
			in.lastErr, in.failedUntil = err, v.now().Add(retryDelay)
			in.mu.Unlock()
		}
		return nil, &UnavailableError{RetryAfter: retryDelay, Err: err}
	}
	if !c.Active {
		return nil, invalid("the issuer says the token is not active")
	}
	tok, err := v.check(c, false)
	if err != nil {
		return nil, err
	}
	until := now.Add(introspectionTTL)
	if !tok.Expiry.IsZero() && tok.Expiry.Before(until) {
		until = tok.Expiry
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.cache) >= maxIntrospected {
		for k, c := range in.cache {
			if !now.Before(c.until) || len(in.cache) >= maxIntrospected {
				delete(in.cache, k)
			}
		}
	}
	in.cache[sum] = cachedToken{tok: tok, until: until}
	return tok, nil
}

// askIssuer posts the token to the introspection endpoint, authenticated
// as this server's client (client_secret_basic).
func (v *Verifier) askIssuer(ctx context.Context, raw string) (*claims, error) {
	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	endpoint := v.cfg.IntrospectionURL
	if endpoint == "" {
		meta, err := v.metadata(ctx)
		if err != nil {
			return nil, err
		}
		if endpoint = meta.IntrospectionEndpoint; endpoint == "" {
			return nil, fmt.Errorf("the metadata of %s names no introspection_endpoint: set the introspection URL", v.cfg.Issuer)
		}
	}
	if err := secureURL(endpoint); err != nil {
		return nil, fmt.Errorf("introspection endpoint: %w", err)
	}
	form := url.Values{"token": {raw}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 §2.3.1: the id and secret are form-encoded first.
	req.SetBasicAuth(url.QueryEscape(v.cfg.ClientID), url.QueryEscape(v.cfg.ClientSecret))
	var answer json.RawMessage
	status, _, err := v.do(req, &answer)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d (is the client id and secret right?)", endpoint, status)
	}
	c, err := parseClaims(answer)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	return c, nil
}

package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// The keys of the issuer are kept for the max-age its JWKS response gives,
// within these bounds, and for defaultKeyTTL when it gives none.
const (
	minKeyTTL     = 15 * time.Minute
	maxKeyTTL     = 24 * time.Hour
	defaultKeyTTL = time.Hour
)

// refetchInterval is the least time between two fetches of the keys made
// for a key id they lack: a rotated key is found at once, and tokens with
// made-up key ids cost the issuer one request per interval at most.
const refetchInterval = 10 * time.Second

// maxDocument bounds a metadata document, key set or introspection answer.
const maxDocument = 1 << 20

// metaCache holds the issuer's metadata once fetched.
type metaCache struct {
	mu   sync.Mutex
	meta *oauthex.AuthServerMeta
}

func (m *metaCache) get() *oauthex.AuthServerMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.meta
}

func (m *metaCache) set(meta *oauthex.AuthServerMeta) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.meta = meta
}

// metadata returns the issuer's metadata, fetching it when not yet known.
func (v *Verifier) metadata(ctx context.Context) (*oauthex.AuthServerMeta, error) {
	if m := v.meta.get(); m != nil {
		return m, nil
	}
	var lastErr error
	for _, u := range metadataURLs(v.cfg.Issuer) {
		var m oauthex.AuthServerMeta
		status, _, err := v.getJSON(ctx, u, &m)
		switch {
		case err != nil:
			return nil, err
		case status == http.StatusNotFound || status == http.StatusGone:
			lastErr = fmt.Errorf("%s: not found", u)
			continue
		case status != http.StatusOK:
			return nil, fmt.Errorf("%s: status %d", u, status)
		}
		if !sameIssuer(m.Issuer, v.cfg.Issuer) {
			// RFC 8414 §3.3: metadata naming another issuer is not this
			// issuer's.
			return nil, fmt.Errorf("%s names issuer %q, not %s", u, m.Issuer, v.cfg.Issuer)
		}
		v.meta.set(&m)
		return &m, nil
	}
	return nil, fmt.Errorf("no metadata for issuer %s (%v)", v.cfg.Issuer, lastErr)
}

// metadataURLs are where an issuer's metadata may be: OpenID Connect
// discovery below the issuer (Keycloak, Entra ID, Okta, Auth0, Google,
// Zitadel), then RFC 8414's path insertion, for OAuth and OIDC.
func metadataURLs(issuer string) []string {
	u, err := url.Parse(strings.TrimSuffix(issuer, "/"))
	if err != nil {
		return nil
	}
	path := u.Path
	at := func(p string) string {
		c := *u
		c.Path = p
		return c.String()
	}
	urls := []string{at(path + "/.well-known/openid-configuration"), at("/.well-known/oauth-authorization-server" + path)}
	if path != "" {
		urls = append(urls, at("/.well-known/openid-configuration"+path))
	}
	return urls
}

// getJSON fetches u into v: the status, the response's header, and an
// error for a request that failed or a 200 that is not JSON. Other
// statuses leave v alone.
func (v *Verifier) getJSON(ctx context.Context, u string, into any) (int, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	return v.do(req, into)
}

// do sends req and decodes a 200 answer into v.
func (v *Verifier) do(req *http.Request, into any) (int, http.Header, error) {
	resp, err := v.client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocument))
		return resp.StatusCode, resp.Header, nil
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); !strings.HasSuffix(mt, "json") {
		return resp.StatusCode, resp.Header, fmt.Errorf("%s: %q is not JSON", req.URL.Redacted(), mt)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return resp.StatusCode, resp.Header, fmt.Errorf("%s: %w", req.URL.Redacted(), err)
	}
	if len(body) > maxDocument {
		return resp.StatusCode, resp.Header, fmt.Errorf("%s: larger than %d bytes", req.URL.Redacted(), maxDocument)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return resp.StatusCode, resp.Header, fmt.Errorf("%s: %w", req.URL.Redacted(), err)
	}
	return resp.StatusCode, resp.Header, nil
}

// unwrapURLError drops url.Error's repetition of the method and URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// keyCache holds the issuer's signing keys: the last good set, kept for its
// cache time and refreshed in the background once half of it has passed,
// so that a short outage of the issuer goes unnoticed. One fetch runs at a
// time; callers that need its result wait for it, at most the timeout.
type keyCache struct {
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetched time.Time
	ttl     time.Duration
	// tried is when the last fetch started; failedUntil, after a failed
	// one, is when the next may start, and lastErr why it failed.
	tried       time.Time
	failedUntil time.Time
	lastErr     error
	// running is closed when the fetch under way ends; nil when none is.
	running chan struct{}
}

// signingKeys returns the keys that may have signed a token of alg with
// key id kid (any key of the algorithm when kid is empty).
func (v *Verifier) signingKeys(ctx context.Context, kid, alg string) ([]jose.JSONWebKey, error) {
	c := &v.keys
	refetched := false
	for {
		c.mu.Lock()
		now := v.now()
		fresh := c.keys != nil && now.Before(c.fetched.Add(c.ttl))
		if fresh {
			if found := matching(c.keys, kid, alg); len(found) > 0 {
				if now.After(c.fetched.Add(c.ttl/2)) && c.running == nil && !now.Before(c.failedUntil) {
					v.startFetch(now)
				}
				c.mu.Unlock()
				return found, nil
			}
			if c.lastErr != nil && now.Before(c.failedUntil) {
				err := &UnavailableError{RetryAfter: c.failedUntil.Sub(now), Err: c.lastErr}
				c.mu.Unlock()
				return nil, err
			}
			if refetched || (c.running == nil && now.Sub(c.tried) < refetchInterval) {
				c.mu.Unlock()
				if kid == "" {
					return nil, invalid("signed with %s, and the issuer publishes no %s key", alg, alg)
				}
				return nil, invalid("signed with key %q, which the issuer does not publish", kid)
			}
		} else if c.running == nil && now.Before(c.failedUntil) {
			err := &UnavailableError{RetryAfter: c.failedUntil.Sub(now), Err: c.lastErr}
			c.mu.Unlock()
			return nil, err
		}
		done := c.running
		if done == nil {
			done = v.startFetch(now)
		}
		c.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, &UnavailableError{RetryAfter: retryDelay, Err: ctx.Err()}
		}
		refetched = true
	}
}

// startFetch starts fetching the keys; c.mu is held.
func (v *Verifier) startFetch(now time.Time) chan struct{} {
	c := &v.keys
	done := make(chan struct{})
	c.running, c.tried = done, now
	go func() {
		// Not the request's context: the fetch serves every caller, and
		// one that gives up does not end it for the others.
		ctx, cancel := context.WithTimeout(context.Background(), v.cfg.Timeout)
		defer cancel()
		keys, ttl, err := v.fetchKeys(ctx)
		c.mu.Lock()
		defer c.mu.Unlock()
		if err != nil {
			c.lastErr, c.failedUntil = err, v.now().Add(retryDelay)
			// The metadata may be what changed.
			v.meta.set(nil)
		} else {
			c.keys, c.fetched, c.ttl, c.lastErr, c.failedUntil = keys, v.now(), ttl, nil, time.Time{}
		}
		c.running = nil
		close(done)
	}()
	return done
}

// fetchKeys reads the issuer's JWKS, found through its metadata, and how
// long it may be kept.
func (v *Verifier) fetchKeys(ctx context.Context) ([]jose.JSONWebKey, time.Duration, error) {
	meta, err := v.metadata(ctx)
	if err != nil {
		return nil, 0, err
	}
	if meta.JWKSURI == "" {
		return nil, 0, fmt.Errorf("the metadata of %s names no jwks_uri", v.cfg.Issuer)
	}
	if err := secureURL(meta.JWKSURI); err != nil {
		return nil, 0, fmt.Errorf("jwks_uri: %w", err)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	status, header, err := v.getJSON(ctx, meta.JWKSURI, &set)
	if err != nil {
		return nil, 0, err
	}
	if status != http.StatusOK {
		return nil, 0, fmt.Errorf("%s: status %d", meta.JWKSURI, status)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		// A key of a kind this server does not read (or a private or
		// symmetric one, which a JWKS must not publish) is passed over,
		// not a reason to refuse the others.
		if json.Unmarshal(raw, &k) != nil || !k.Valid() || !k.IsPublic() {
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, 0, fmt.Errorf("%s holds no public signing key", meta.JWKSURI)
	}
	return keys, keyTTL(header), nil
}

// keyTTL is how long a key set may be kept, by its response's
// Cache-Control.
func keyTTL(h http.Header) time.Duration {
	for _, d := range strings.Split(h.Get("Cache-Control"), ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(d), "=")
		if strings.EqualFold(k, "max-age") {
			if s, err := strconv.Atoi(strings.Trim(val, `"`)); err == nil {
				return min(max(time.Duration(s)*time.Second, minKeyTTL), maxKeyTTL)
			}
		}
	}
	return defaultKeyTTL
}

// matching are the keys of set that may have signed a token of alg with
// key id kid.
func matching(set []jose.JSONWebKey, kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range set {
		if (kid == "" || k.KeyID == kid) && fits(k.Key, k.Algorithm, k.Use, alg) {
			out = append(out, k)
		}
	}
	return out
}

// secureURL refuses a URL that is not https, but for loopback.
func secureURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme == "https" || (u.Scheme == "http" && loopback(u.Hostname())) {
		return nil
	}
	return fmt.Errorf("%s is not https", u.Redacted())
}

// verifyJWT checks a JSON Web Token: its algorithm, its signature by one of
// the issuer's keys, then its claims.
func (v *Verifier) verifyJWT(ctx context.Context, raw string) (*Token, error) {
	jws, err := jose.ParseSignedCompact(raw, v.algs)
	if err != nil {
		return nil, invalid("%v", strings.TrimPrefix(err.Error(), "go-jose/go-jose: "))
	}
	if len(jws.Signatures) != 1 {
		return nil, invalid("want one signature, got %d", len(jws.Signatures))
	}
	h := jws.Signatures[0].Protected
	keys, err := v.signingKeys(ctx, h.KeyID, h.Algorithm)
	if err != nil {
		return nil, err
	}
	var payload []byte
	for _, k := range keys {
		if payload, err = jws.Verify(k.Key); err == nil {
			break
		}
	}
	if payload == nil {
		return nil, invalid("bad signature")
	}
	c, err := parseClaims(payload)
	if err != nil {
		return nil, invalid("claims: %v", err)
	}
	return v.check(c, true)
}

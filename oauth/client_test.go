package oauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/mcpsearch/mcpsearch/internal/oidctest"
	"github.com/mcpsearch/mcpsearch/oauth"
)

// pageRedirect is where the page client's authorizations return; nothing
// listens there, the test reads the code from the redirect.
const pageRedirect = "http://127.0.0.1:1/ui/oauth/callback"

// authorize follows an authorization URL through the provider, the user
// signing in on the way, to the redirect, and returns its query.
func authorize(t *testing.T, authURL string) url.Values {
	t.Helper()
	c := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), pageRedirect) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, err := c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil || !strings.HasPrefix(loc.String(), pageRedirect) {
		t.Fatalf("the authorization ended at %s (%d), not at the redirect", resp.Request.URL, resp.StatusCode)
	}
	return loc.Query()
}

// TestClientSignsIn runs the page's sign-in against a real OpenID
// provider: authorization code with PKCE and a nonce, the code exchanged
// with the client's secret, the ID token and the access token checked.
// A code is good once, and only with its verifier and nonce.
func TestClientSignsIn(t *testing.T) {
	p := oidctest.New(t, oidctest.Options{})
	p.AddUser("alice", []string{"conv-a"})
	p.AddWebClient("page", "page-secret", pageRedirect)
	v := newVerifier(t, p, nil)
	newClient := func(secret string) *oauth.Client {
		c, err := v.Client(oauth.ClientConfig{ID: "page", Secret: secret, RedirectURL: pageRedirect,
			Scopes: []string{"mcpsearch:read", "mcpsearch:write"}, Resource: resource})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newClient("page-secret")
	ctx := context.Background()
	start := func(state, nonce, verifier string) string {
		t.Helper()
		p.SignInAs("alice")
		u, err := c.AuthURL(ctx, state, nonce, verifier)
		if err != nil {
			t.Fatal(err)
		}
		q, _ := url.Parse(u)
		if q.Query().Get("code_challenge_method") != "S256" || q.Query().Get("nonce") != nonce || !strings.Contains(q.Query().Get("scope"), "openid") {
			t.Fatalf("authorization URL %s", u)
		}
		back := authorize(t, u)
		if back.Get("state") != state {
			t.Fatalf("state %q came back as %q", state, back.Get("state"))
		}
		return back.Get("code")
	}

	verifier := oauth2.GenerateVerifier()
	code := start("state-1", "nonce-1", verifier)
	tok, err := c.Exchange(ctx, code, verifier, "nonce-1")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Subject != "alice" || !tok.HasScope("mcpsearch:write") || !slices.Equal(tok.Conversations, []string{"conv-a"}) {
		t.Fatalf("token: %+v", tok)
	}
	if _, err := c.Exchange(ctx, code, verifier, "nonce-1"); !errors.Is(err, oauth.ErrSignInRefused) {
		t.Errorf("a code used twice: %v", err)
	}

	for _, tt := range []struct {
		name     string
		exchange func(code, verifier string) error
		want     string
	}{
		{"another nonce", func(code, verifier string) error {
			_, err := c.Exchange(ctx, code, verifier, "nonce-of-another-sign-in")
			return err
		}, "nonce"},
		{"another verifier", func(code, _ string) error {
			_, err := c.Exchange(ctx, code, oauth2.GenerateVerifier(), "nonce-2")
			return err
		}, "refused the code"},
		{"a wrong secret", func(code, verifier string) error {
			_, err := newClient("not-the-secret").Exchange(ctx, code, verifier, "nonce-2")
			return err
		}, "refused the code"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			verifier := oauth2.GenerateVerifier()
			err := tt.exchange(start("state-2", "nonce-2", verifier), verifier)
			if !errors.Is(err, oauth.ErrSignInRefused) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%v, want a refusal saying %q", err, tt.want)
			}
		})
	}

	// A user the provider does not let write gets a token without the
	// write scope.
	p.AddUser("reader", nil)
	p.LimitScopes("reader", "mcpsearch:read")
	p.SignInAs("reader")
	verifier = oauth2.GenerateVerifier()
	u, _ := c.AuthURL(ctx, "s", "n", verifier)
	tok, err = c.Exchange(ctx, authorize(t, u).Get("code"), verifier, "n")
	if err != nil || tok.Subject != "reader" || tok.HasScope("mcpsearch:write") || !tok.HasScope("mcpsearch:read") {
		t.Fatalf("the reader's token: %+v %v", tok, err)
	}
	if _, err := v.Client(oauth.ClientConfig{ID: "page", Secret: "x", RedirectURL: "http://example.com/cb"}); err == nil {
		t.Error("a redirect over plain http beyond loopback is accepted")
	}
}

package oauth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpsearch/mcpsearch/internal/oidctest"
)

// TestIDTokenChecks: an ID token is for this client and this sign-in
// only: signed by the issuer, from it exactly, naming the client, not
// expired, with the sign-in's nonce.
func TestIDTokenChecks(t *testing.T) {
	p := oidctest.New(t, oidctest.Options{})
	v, err := New(Config{Issuer: p.URL, Audiences: []string{"https://mcp.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	claims := func(change map[string]any) map[string]any {
		c := map[string]any{"iss": p.URL, "sub": "alice", "aud": []string{"page", "https://mcp.example.com"}, "azp": "page",
			"exp": now + 300, "iat": now, "nonce": "n1"}
		for k, val := range change {
			if val == nil {
				delete(c, k)
			} else {
				c[k] = val
			}
		}
		return c
	}
	ctx := context.Background()
	if c, err := v.idToken(ctx, p.Sign(t, claims(nil)), "page", "n1"); err != nil || c.Subject != "alice" {
		t.Fatalf("a good ID token: %+v %v", c, err)
	}
	for name, tt := range map[string]struct {
		claims map[string]any
		want   string
	}{
		"another nonce":            {claims(map[string]any{"nonce": "n2"}), "nonce"},
		"no nonce":                 {claims(map[string]any{"nonce": nil}), "nonce"},
		"another client":           {claims(map[string]any{"aud": "other"}), "not for this client"},
		"issued to another client": {claims(map[string]any{"azp": "other"}), "issued to client"},
		"expired":                  {claims(map[string]any{"exp": now - 600}), "expired"},
		"another issuer":           {claims(map[string]any{"iss": p.URL + "/"}), "issued by"},
		"no subject":               {claims(map[string]any{"sub": nil}), "subject"},
		"no expiry":                {claims(map[string]any{"exp": nil}), "expiry"},
	} {
		_, err := v.idToken(ctx, p.Sign(t, tt.claims), "page", "n1")
		if !errors.Is(err, ErrSignInRefused) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want a refusal saying %q", name, err, tt.want)
		}
	}
}

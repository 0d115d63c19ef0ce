package oauth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// claims are the claims of a token that the checks read, from a JWT's
// payload or an introspection response.
type claims struct {
	Issuer    string       `json:"iss"`
	Subject   string       `json:"sub"`
	Audience  stringList   `json:"aud"`
	Expiry    *numericDate `json:"exp"`
	NotBefore *numericDate `json:"nbf"`
	IssuedAt  *numericDate `json:"iat"`
	// Scope is RFC 9068's space-separated scope; SCP is what Entra ID and
	// Okta write instead (a string or a list).
	Scope    spaceList `json:"scope"`
	SCP      spaceList `json:"scp"`
	ClientID string    `json:"client_id"`
	AZP      string    `json:"azp"`
	// Nonce is an ID token's: the value the client sent with the
	// authorization request.
	Nonce string `json:"nonce"`
	// Active is the introspection response's verdict.
	Active bool `json:"active"`

	// extra holds every claim, for the configured conversations claim.
	extra map[string]json.RawMessage
}

// parseClaims reads a JSON object of claims.
func parseClaims(b []byte) (*claims, error) {
	var c claims
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &c.extra); err != nil {
		return nil, err
	}
	return &c, nil
}

// numericDate is a JSON number of seconds since 1970 (RFC 7519 §2).
type numericDate float64

func (d *numericDate) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("want a number of seconds, got %s", b)
	}
	*d = numericDate(f)
	return nil
}

func (d *numericDate) Time() time.Time {
	sec, frac := math.Modf(float64(*d))
	return time.Unix(int64(sec), int64(frac*1e9))
}

// stringList is a claim that is one string or a list of them (aud).
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = stringList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("want a string or a list of strings, got %s", b)
	}
	*l = many
	return nil
}

// spaceList is a claim that is a space-separated string or a list of
// strings (scope, scp).
type spaceList []string

func (l *spaceList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = strings.Fields(one)
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("want a space-separated string or a list of strings, got %s", b)
	}
	*l = many
	return nil
}

// conversations reads the conversations claim: a list of ids, or a string
// of ids separated by spaces or commas. Absent, the token may touch no
// conversation; "*" among them, any.
func conversations(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return []string{}, nil
	}
	var ids []string
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		ids = strings.FieldsFunc(one, func(r rune) bool { return r == ',' || r == ' ' })
	} else if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, errors.New("want a list of conversation ids or a string of them")
	}
	if slices.Contains(ids, "*") {
		return nil, nil
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// matchesAudience reports whether aud names one of the server's
// identifiers. A trailing slash is not a difference (RFC 3986 §6.2.3):
// identity providers differ in keeping it.
func matchesAudience(aud, ours []string) bool {
	for _, a := range ours {
		if oauthex.MatchesResource(aud, a) {
			return true
		}
	}
	return false
}

// fits reports whether key can check a signature of alg: the key's type
// and curve are the algorithm's, and the key, when it says, is for that
// algorithm and for signatures.
func fits(key any, keyAlg, use, alg string) bool {
	if (keyAlg != "" && keyAlg != alg) || (use != "" && use != "sig") {
		return false
	}
	switch k := key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		switch alg {
		case "ES256":
			return k.Curve == elliptic.P256()
		case "ES384":
			return k.Curve == elliptic.P384()
		case "ES512":
			return k.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}

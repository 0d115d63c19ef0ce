package oauth

import (
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// WellKnownPath is where a resource server publishes its metadata (RFC
// 9728 §3): at this path for the server as a whole, and with the path of a
// resource appended for that resource.
const WellKnownPath = "/.well-known/oauth-protected-resource"

// MetadataURL is the metadata address of the resource identified by
// resource: the well-known path inserted between its host and its path.
func MetadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	u.Path = WellKnownPath + strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u.String()
}

// Metadata is the protected resource metadata (RFC 9728) of resource, a
// resource whose tokens v checks: the issuer as its one authorization
// server, the scopes a client may ask for, and the header as the one way to
// send a token. It holds only what any client may know.
func (v *Verifier) Metadata(resource, name string, scopes []string) *oauthex.ProtectedResourceMetadata {
	return &oauthex.ProtectedResourceMetadata{
		Resource:               resource,
		AuthorizationServers:   []string{v.cfg.Issuer},
		ScopesSupported:        scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           name,
	}
}

// Error codes of a Bearer challenge (RFC 6750 §3.1).
const (
	InvalidToken      = "invalid_token"
	InsufficientScope = "insufficient_scope"
)

// Challenge is the WWW-Authenticate value of a refused request (RFC 6750
// §3): where the resource's metadata is (RFC 9728 §5.1), and for a token
// that was refused, why (Error, Description) and which scopes would do.
type Challenge struct {
	MetadataURL string
	Error       string
	Description string
	Scopes      []string
}

func (c Challenge) String() string {
	params := []string{}
	if c.Error != "" {
		params = append(params, `error=`+quote(c.Error))
		if c.Description != "" {
			params = append(params, `error_description=`+quote(c.Description))
		}
	}
	if len(c.Scopes) > 0 {
		params = append(params, `scope=`+quote(strings.Join(c.Scopes, " ")))
	}
	if c.MetadataURL != "" {
		params = append(params, `resource_metadata=`+quote(c.MetadataURL))
	}
	if len(params) == 0 {
		return "Bearer"
	}
	return "Bearer " + strings.Join(params, ", ")
}

// quote is a quoted-string of s (RFC 9110 §5.6.4) holding only the
// printable ASCII RFC 6750 allows in error_description, without quotes or
// backslashes to escape.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\'')
		case r >= 0x20 && r <= 0x7e:
			b.WriteRune(r)
		default:
			b.WriteByte('?')
		}
	}
	b.WriteByte('"')
	return b.String()
}

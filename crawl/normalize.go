package crawl

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"sort"
	"strings"

	"golang.org/x/net/idna"

	"github.com/mcpsearch/mcpsearch/fetch"
)

// Normalize returns the normal form of rawURL, the key under which the
// crawler records a page: RFC 3986 §6's syntax-based normalisation (scheme
// and host in lower case, an internationalised host in its ASCII form, the
// default port dropped, dot segments removed, percent-encodings of
// unreserved characters decoded and the others written in upper case, an
// empty path written "/"), then the fragment dropped, tracking parameters
// removed from the query (utm_*, fbclid, gclid, msclkid, mc_cid, mc_eid and
// the like) and the remaining parameters sorted by name,
// keeping the order of values of one name. Only http and https URLs are
// accepted; errors wrap fetch.ErrInvalidURL.
func Normalize(rawURL string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return "", fmt.Errorf("%w: %v", fetch.ErrInvalidURL, err)
	}
	n, err := normalize(u)
	if err != nil {
		return "", err
	}
	return n.String(), nil
}

// resolve resolves ref against base and normalises the result.
func resolve(base *url.URL, ref string) (*url.URL, error) {
	ref = strings.TrimSpace(ref)
	r, err := url.Parse(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", fetch.ErrInvalidURL, err)
	}
	if base != nil {
		r = base.ResolveReference(r)
	}
	return normalize(r)
}

// normalize returns a normalised copy of u.
func normalize(u *url.URL) (*url.URL, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		if scheme == "" {
			return nil, fmt.Errorf("%w: %q is not an absolute http or https URL", fetch.ErrInvalidURL, u.Redacted())
		}
		return nil, fmt.Errorf("%w: the scheme is %s:, only http and https URLs are crawled", fetch.ErrInvalidURL, scheme)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return nil, fmt.Errorf("%w: %q has no host", fetch.ErrInvalidURL, u.Redacted())
	}
	if !isASCII(host) {
		a, err := idna.Lookup.ToASCII(host)
		if err != nil {
			return nil, fmt.Errorf("%w: host %q: %v", fetch.ErrInvalidURL, host, err)
		}
		host = a
	}
	port := u.Port()
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host = net.JoinHostPort(strings.Trim(host, "[]"), port)
	}

	p := removeDotSegments(normalizeEscapes(u.EscapedPath()))
	if p == "" {
		p = "/"
	}
	out := &url.URL{Scheme: scheme, Host: host, RawQuery: normalizeQuery(u.RawQuery)}
	// Setting RawPath keeps the escapes exactly as normalised; Path is the
	// decoded form url.URL wants beside it.
	if dec, err := url.PathUnescape(p); err == nil {
		out.Path = dec
		if out.EscapedPath() != p {
			out.RawPath = p
		}
	} else {
		out.Path, out.RawPath = p, p
	}
	return out, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// unreserved reports RFC 3986's unreserved characters, whose
// percent-encodings are decoded.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

const upperHex = "0123456789ABCDEF"

// normalizeEscapes decodes the percent-encodings of unreserved
// characters, writes the others in upper case, and encodes bytes that may
// not appear raw (spaces, non-ASCII bytes, controls).
func normalizeEscapes(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				if v := hi<<4 | lo; unreserved(v) {
					b.WriteByte(v)
				} else {
					b.WriteByte('%')
					b.WriteByte(upperHex[hi])
					b.WriteByte(upperHex[lo])
				}
				i += 2
				continue
			}
		}
		if c <= 0x20 || c >= 0x7f || c == '"' || c == '<' || c == '>' || c == '\\' || c == '^' || c == '`' || c == '{' || c == '|' || c == '}' || c == '%' {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// removeDotSegments is RFC 3986 §5.2.4 on an escaped path.
func removeDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	var out []string
	segs := strings.Split(p, "/")
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if strings.HasPrefix(p, "/") && !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}

// trackingParams lists the query parameters Normalize removes besides
// those starting with "utm_": they identify a campaign or a click, never a
// different page.
var trackingParams = []string{
	"fbclid", "gclid", "dclid", "gbraid", "wbraid", "gclsrc", "msclkid", "yclid", "twclid", "ttclid", "li_fat_id",
	"igshid", "mc_cid", "mc_eid", "_ga", "_gl", "_hsenc", "_hsmi", "mkt_tok", "oly_anon_id", "oly_enc_id",
	"vero_id", "vero_conv", "rb_clickid", "s_kwcid", "ef_id", "srsltid",
}

var tracking = func() map[string]bool {
	m := map[string]bool{}
	for _, p := range trackingParams {
		m[p] = true
	}
	return m
}()

func isTracking(name string) bool {
	name = strings.ToLower(name)
	return strings.HasPrefix(name, "utm_") || tracking[name]
}

// normalizeQuery drops tracking parameters and empty pairs, normalises the
// escapes of the others and sorts them by name (stably, so the values of
// one name keep their order).
func normalizeQuery(q string) string {
	if q == "" {
		return ""
	}
	type pair struct{ name, raw string }
	var pairs []pair
	for _, part := range strings.Split(q, "&") {
		if part == "" {
			continue
		}
		part = normalizeEscapes(part)
		name, _, _ := strings.Cut(part, "=")
		dec, err := url.QueryUnescape(name)
		if err != nil {
			dec = name
		}
		if isTracking(dec) {
			continue
		}
		pairs = append(pairs, pair{name: dec, raw: part})
	}
	sort.SliceStable(pairs, func(i, j int) bool { return pairs[i].name < pairs[j].name })
	raw := make([]string, len(pairs))
	for i, p := range pairs {
		raw[i] = p.raw
	}
	return strings.Join(raw, "&")
}

// pathKey is the URL without its query: what the cap on query variants
// counts under.
func pathKey(u *url.URL) string {
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}

// root is the URL of the site's root, where robots.txt, sitemap.xml and
// llms.txt live.
func root(u *url.URL) *url.URL {
	return &url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/"}
}

// extOf returns the lower-cased extension of the URL's last path segment.
func extOf(u *url.URL) string {
	return strings.ToLower(path.Ext(u.Path))
}

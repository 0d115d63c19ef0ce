package crawl

import (
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Scope says which URLs a crawl may follow, relative to its start URL.
// The scheme never matters: http and https pages of the same place are in
// scope alike.
type Scope string

const (
	// ScopePrefix, the default, keeps the pages on the start URL's host
	// whose path starts with the start URL's folder: the path up to its
	// last "/" when its last segment names a file (has an extension, as
	// in /docs/intro.html, giving /docs/), the whole path otherwise (the
	// start /docs/v2 keeps /docs/v2 and /docs/v2/..., not /docs/v2beta).
	ScopePrefix Scope = "prefix"
	// ScopeHost keeps every page of the start URL's host (and port).
	ScopeHost Scope = "host"
	// ScopeDomain keeps every page of the start URL's registrable domain
	// (docs.example.co.uk and www.example.co.uk are both under
	// example.co.uk, by the public suffix list); a start URL on an
	// address or a single-label name keeps to its host.
	ScopeDomain Scope = "domain"
)

// scope decides whether a normalised URL is in the crawl's scope.
type scope struct {
	kind   Scope
	host   string // host[:port] of the start URL
	domain string // registrable domain, for ScopeDomain
	prefix string // escaped path prefix, for ScopePrefix
	exact  string // the prefix without its final "/", also in scope
}

func newScope(kind Scope, start *url.URL) scope {
	s := scope{kind: kind, host: start.Host}
	switch kind {
	case ScopeDomain:
		s.domain = registrable(start.Hostname())
	case ScopePrefix:
		p := start.EscapedPath()
		if i := strings.LastIndexByte(p, '/'); i >= 0 && strings.Contains(p[i+1:], ".") {
			p = p[:i+1]
		}
		if !strings.HasSuffix(p, "/") {
			s.exact = p
			p += "/"
		}
		s.prefix = p
	}
	return s
}

// registrable returns the registrable domain of host (eTLD+1), or host
// itself for an address or a name the public suffix list cannot place.
func registrable(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return host
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil {
		return host
	}
	return d
}

func (s scope) contains(u *url.URL) bool {
	switch s.kind {
	case ScopeDomain:
		if u.Host == s.host {
			return true
		}
		h := u.Hostname()
		return h == s.domain || strings.HasSuffix(h, "."+s.domain)
	case ScopeHost:
		return u.Host == s.host
	default:
		if u.Host != s.host {
			return false
		}
		p := u.EscapedPath()
		return strings.HasPrefix(p, s.prefix) || s.exact != "" && p == s.exact
	}
}

// glob is a path pattern of Options.Include and Options.Exclude.
type glob struct {
	re      *regexp.Regexp
	segment bool // the pattern has no "/": it matches the last segment
}

// parseGlobs compiles path patterns: "*" is any run of characters but
// "/", "**" any run at all, "?" one character but "/", everything else
// itself; a pattern matches the whole path, or the last segment when it
// holds no "/".
func parseGlobs(patterns []string) ([]glob, error) {
	var gs []glob
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if strings.Contains(p, "***") {
			return nil, fmt.Errorf("%w: pattern %q: use * within a segment and ** across segments", ErrInvalidOptions, p)
		}
		var b strings.Builder
		b.WriteString("^")
		for i := 0; i < len(p); i++ {
			switch {
			case strings.HasPrefix(p[i:], "**"):
				b.WriteString(".*")
				i++
			case p[i] == '*':
				b.WriteString("[^/]*")
			case p[i] == '?':
				b.WriteString("[^/]")
			default:
				b.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		}
		b.WriteString("$")
		re, err := regexp.Compile(b.String())
		if err != nil {
			return nil, fmt.Errorf("%w: pattern %q: %v", ErrInvalidOptions, p, err)
		}
		gs = append(gs, glob{re: re, segment: !strings.Contains(p, "/")})
	}
	return gs, nil
}

// match reports whether the glob matches the decoded path p.
func (g glob) match(p string) bool {
	if g.segment {
		p = p[strings.LastIndexByte(p, '/')+1:]
	}
	return g.re.MatchString(p)
}

func matchAny(gs []glob, p string) bool {
	for _, g := range gs {
		if g.match(p) {
			return true
		}
	}
	return false
}

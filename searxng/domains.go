package searxng

import (
	"fmt"
	"net/url"
	"strings"
)

// MaxDomains bounds each of Request.IncludeDomains and ExcludeDomains: every
// domain lengthens the query the engines receive.
const MaxDomains = 10

// NormalizeDomain turns what a caller may write for a domain ("Go.dev",
// "https://go.dev/doc", "*.go.dev", ".go.dev", "go.dev.") into the bare
// lower-case host name "go.dev", or fails when it is not a host name.
func NormalizeDomain(s string) (string, error) {
	d := strings.ToLower(strings.TrimSpace(s))
	if i := strings.Index(d, "://"); i >= 0 {
		d = d[i+3:]
	}
	if i := strings.IndexAny(d, "/?#"); i >= 0 {
		d = d[:i]
	}
	if i := strings.LastIndexByte(d, '@'); i >= 0 {
		d = d[i+1:]
	}
	if h, _, ok := strings.Cut(d, ":"); ok {
		d = h
	}
	d = strings.TrimPrefix(d, "*")
	d = strings.Trim(d, ".")
	if !isHostName(d) {
		return "", fmt.Errorf("domain %q is not a host name such as example.org", s)
	}
	return d, nil
}

func isHostName(d string) bool {
	if d == "" || len(d) > 253 || !strings.Contains(d, ".") {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') && r < 0x80 {
				return false
			}
		}
	}
	return true
}

// normalizeAll returns the valid domains of list, normalised, without
// duplicates.
func normalizeAll(list []string) []string {
	out := make([]string, 0, len(list))
	for _, s := range list {
		d, err := NormalizeDomain(s)
		if err != nil {
			continue
		}
		dup := false
		for _, o := range out {
			dup = dup || o == d
		}
		if !dup {
			out = append(out, d)
		}
	}
	return out
}

// query returns the text SearXNG receives: the query with the site:
// operators of the domain restrictions appended.
func (r Request) query() string {
	inc, exc := normalizeAll(r.IncludeDomains), normalizeAll(r.ExcludeDomains)
	if len(inc) == 0 && len(exc) == 0 {
		return r.Query
	}
	var b strings.Builder
	b.WriteString(r.Query)
	for i, d := range inc {
		if i > 0 {
			b.WriteString(" OR")
		}
		b.WriteString(" site:")
		b.WriteString(d)
	}
	for _, d := range exc {
		b.WriteString(" -site:")
		b.WriteString(d)
	}
	return b.String()
}

// DomainMatches reports whether host is domain or one of its subdomains:
// "docs.go.dev" and "go.dev" match "go.dev"; "notgo.dev" does not. Both are
// compared case-insensitively, a trailing dot ignored.
func DomainMatches(host, domain string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	domain = strings.TrimSuffix(strings.ToLower(domain), ".")
	if domain == "" {
		return false
	}
	return host == domain || strings.HasSuffix(host, "."+domain)
}

// FilterDomains returns the results whose URL host matches one of include
// (when include is not empty) and none of exclude, in their order. Domains
// are normalised as by NormalizeDomain; invalid ones are ignored. Results
// whose URL has no host are dropped when include is not empty.
func FilterDomains(results []Result, include, exclude []string) []Result {
	inc, exc := normalizeAll(include), normalizeAll(exclude)
	if len(inc) == 0 && len(exc) == 0 {
		return results
	}
	out := make([]Result, 0, len(results))
	for _, r := range results {
		host := ""
		if u, err := url.Parse(r.URL); err == nil {
			host = u.Hostname()
		}
		if len(inc) > 0 && !matchesAny(host, inc) {
			continue
		}
		if host != "" && matchesAny(host, exc) {
			continue
		}
		out = append(out, r)
	}
	return out
}

func matchesAny(host string, domains []string) bool {
	for _, d := range domains {
		if DomainMatches(host, d) {
			return true
		}
	}
	return false
}

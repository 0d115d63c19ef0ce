package crawl

import (
	"bytes"
	"strconv"
	"strings"
	"time"
)

// maxRobotsBytes is how much of a robots.txt file is read: RFC 9309 asks
// parsers to read at least 500 KiB; what follows is ignored.
const maxRobotsBytes = 500 << 10

// Robots is a parsed robots.txt file (RFC 9309) as it applies to one
// crawler: the rules of the groups naming the crawler's product token, or
// of the "*" groups when none does, and their Crawl-delay.
type Robots struct {
	rules []robotsRule
	// Delay is the group's Crawl-delay, zero when it has none. It is not
	// part of RFC 9309 but widely honoured.
	Delay time.Duration
	// Sitemaps lists the URLs of the file's Sitemap lines, whatever group
	// they stand in.
	Sitemaps []string
	// disallowAll marks the answer to a robots.txt that could not be
	// fetched (5xx, unreachable): nothing may be crawled.
	disallowAll bool
}

type robotsRule struct {
	allow   bool
	pattern string // normalised, as the paths it is matched against
	length  int    // the pattern's length in octets, for the longest match
}

// ParseRobots parses a robots.txt file for the crawler whose product token
// is token (the part of its User-Agent before "/", such as "mcpsearch";
// matched case-insensitively). The groups whose user-agent names the token
// are merged, and so are the "*" groups when no group names it. Lines are
// "key: value" with "#" comments; unknown keys and malformed lines are
// ignored, as are rules before the first user-agent line. A rule's value
// that does not start with "/" or "*" gets a leading "/". Only the first
// 500 KiB are read.
func ParseRobots(data []byte, token string) *Robots {
	if len(data) > maxRobotsBytes {
		data = data[:maxRobotsBytes]
		// A line cut in the middle is dropped.
		if i := bytes.LastIndexAny(data, "\r\n"); i >= 0 {
			data = data[:i]
		}
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	token = strings.ToLower(productToken(token))

	type group struct {
		agents   []string
		rules    []robotsRule
		delay    time.Duration
		hasDelay bool
	}
	var groups []*group
	var cur *group
	inAgents := false // the previous meaningful line was a user-agent line
	r := &Robots{}
	for _, line := range splitLines(data) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key = strings.ToLower(strings.TrimSpace(key))
		value = strings.TrimSpace(value)
		switch key {
		case "user-agent", "useragent", "user agent":
			if !inAgents || cur == nil {
				cur = &group{}
				groups = append(groups, cur)
			}
			cur.agents = append(cur.agents, strings.ToLower(value))
			inAgents = true
		case "allow", "disallow":
			inAgents = false
			if cur == nil || value == "" {
				// An empty Disallow allows everything: no rule.
				continue
			}
			if value[0] != '/' && value[0] != '*' {
				value = "/" + value
			}
			p := robotsPattern(value)
			cur.rules = append(cur.rules, robotsRule{allow: key == "allow", pattern: p, length: len(p)})
		case "crawl-delay":
			inAgents = false
			if cur == nil {
				continue
			}
			if secs, err := strconv.ParseFloat(value, 64); err == nil && secs >= 0 && secs < 1e6 {
				cur.delay, cur.hasDelay = time.Duration(secs*float64(time.Second)), true
			}
		case "sitemap":
			// Sitemap lines stand outside groups and do not end one.
			if value != "" {
				r.Sitemaps = append(r.Sitemaps, value)
			}
		default:
			// Other keys (host, clean-param, ...) end a run of user-agent
			// lines as a rule would.
			inAgents = false
		}
	}

	pick := func(match func(agent string) bool) bool {
		found := false
		for _, g := range groups {
			for _, a := range g.agents {
				if match(a) {
					found = true
					r.rules = append(r.rules, g.rules...)
					if g.hasDelay && g.delay > r.Delay {
						r.Delay = g.delay
					}
					break
				}
			}
		}
		return found
	}
	if token == "" || !pick(func(a string) bool { return a != "*" && strings.ToLower(productToken(a)) == token }) {
		pick(func(a string) bool { return a == "*" })
	}
	return r
}

// productToken returns the leading run of letters, digits, "-" and "_" of
// a user agent: "mcpsearch" for "mcpsearch/1.0 (+https://...)".
func productToken(ua string) string {
	ua = strings.TrimSpace(ua)
	for i := 0; i < len(ua); i++ {
		c := ua[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return ua[:i]
		}
	}
	return ua
}

func splitLines(data []byte) []string {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	return strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
}

// robotsPattern normalises a rule's path the way the paths it is matched
// against are (RFC 9309 §2.2.2): percent-encodings of unreserved
// characters decoded, other escapes in upper case, non-ASCII octets
// encoded. "*" and a final "$" keep their meaning.
func robotsPattern(p string) string {
	return normalizeEscapes(p)
}

// Allowed reports whether the path and query of a URL (its escaped form,
// "/docs/a?b=c") may be crawled: the longest matching rule decides, an
// Allow rule winning a tie, and no matching rule allows. "/robots.txt" is
// always allowed.
func (r *Robots) Allowed(pathQuery string) bool {
	if r == nil {
		return true
	}
	if pathQuery == "/robots.txt" {
		return true
	}
	if r.disallowAll {
		return false
	}
	pathQuery = normalizeEscapes(pathQuery)
	best, allow := -1, true
	for _, rule := range r.rules {
		if rule.length < best || rule.length == best && allow {
			continue
		}
		if robotsMatch(rule.pattern, pathQuery) {
			if rule.length > best || rule.allow {
				best, allow = rule.length, rule.allow
			}
		}
	}
	return allow
}

// robotsMatch reports whether pattern matches a prefix of p (all of p when
// the pattern ends in "$"), "*" matching any run of characters.
func robotsMatch(pattern, p string) bool {
	anchored := strings.HasSuffix(pattern, "$")
	if anchored {
		pattern = pattern[:len(pattern)-1]
	}
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(p, parts[0]) {
		return false
	}
	pos := len(parts[0])
	if len(parts) == 1 {
		return !anchored || pos == len(p)
	}
	for i, part := range parts[1:] {
		last := i == len(parts)-2
		if last && anchored {
			// The last part must end the path, after pos.
			return len(p)-pos >= len(part) && strings.HasSuffix(p, part)
		}
		j := strings.Index(p[pos:], part)
		if j < 0 {
			return false
		}
		pos += j + len(part)
	}
	return true
}

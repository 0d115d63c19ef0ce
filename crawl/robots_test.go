package crawl

import (
	"strings"
	"testing"
	"time"
)

// TestRobotsRFC9309 checks the parser against the corner cases of RFC 9309
// and the examples it and the major crawlers' documentation give.
func TestRobotsRFC9309(t *testing.T) {
	type check struct {
		path    string
		allowed bool
	}
	for _, tc := range []struct {
		name   string
		file   string
		token  string
		checks []check
	}{
		{"longest match wins", "User-agent: *\nDisallow: /\nAllow: /p\n", "bot", []check{
			{"/page", true}, {"/", false}, {"/other", false},
		}},
		{"allow wins a tie", "User-agent: *\nDisallow: /folder\nAllow: /folder\n", "bot", []check{
			{"/folder/page", true},
		}},
		{"the longer disallow beats a shorter allow", "User-agent: *\nAllow: /folder\nDisallow: /folder/private\n", "bot", []check{
			{"/folder/x", true}, {"/folder/private/x", false},
		}},
		{"prefix match, case-sensitive", "User-agent: *\nDisallow: /fish\n", "bot", []check{
			{"/fish", false}, {"/fish.html", false}, {"/fish/salmon.html", false}, {"/fishheads", false},
			{"/fish.php?id=anything", false}, {"/Fish.asp", true}, {"/catfish", true}, {"/?id=fish", true},
		}},
		{"trailing slash", "User-agent: *\nDisallow: /fish/\n", "bot", []check{
			{"/fish/", false}, {"/fish/salmon", false}, {"/fish", true}, {"/fish.html", true},
		}},
		{"star and dollar", "User-agent: *\nDisallow: /*.php$\nDisallow: /*/private/\n", "bot", []check{
			{"/filename.php", false}, {"/folder/filename.php", false},
			{"/filename.php?parameters", true}, {"/filename.php/", true}, {"/windows.PHP", true},
			{"/a/private/b", false}, {"/private/b", true},
		}},
		{"dollar alone anchors the root", "User-agent: *\nDisallow: /$\n", "bot", []check{
			{"/", false}, {"/a", true},
		}},
		{"query strings are part of the path", "User-agent: *\nDisallow: /*?sort=\n", "bot", []check{
			{"/list?sort=asc", false}, {"/list?page=2", true},
		}},
		{"empty disallow allows all", "User-agent: *\nDisallow:\n", "bot", []check{{"/anything", true}}},
		{"no file rules allow all", "", "bot", []check{{"/x", true}}},
		{"robots.txt itself is always allowed", "User-agent: *\nDisallow: /\n", "bot", []check{
			{"/robots.txt", true}, {"/x", false},
		}},
		{"the product token's group wins over *", "User-agent: *\nDisallow: /\n\nUser-agent: MCPSearch\nDisallow: /private\n", "mcpsearch", []check{
			{"/page", true}, {"/private", false},
		}},
		{"an empty specific group allows everything", "User-agent: *\nDisallow: /\n\nUser-agent: mcpsearch\nAllow:\n", "mcpsearch", []check{
			{"/page", true},
		}},
		{"other crawlers' groups do not apply", "User-agent: otherbot\nDisallow: /\n", "mcpsearch", []check{{"/page", true}}},
		{"the token is matched, not a prefix of it", "User-agent: mcp\nDisallow: /\n", "mcpsearch", []check{{"/page", true}}},
		{"a versioned user-agent line names the token", "User-agent: mcpsearch/2.0\nDisallow: /v\n", "mcpsearch", []check{
			{"/v", false},
		}},
		{"groups of one crawler are merged", "User-agent: mcpsearch\nDisallow: /a\n\nUser-agent: other\nDisallow: /b\n\nUser-agent: MCPSEARCH\nDisallow: /c\n", "mcpsearch", []check{
			{"/a", false}, {"/b", true}, {"/c", false},
		}},
		{"several user-agent lines start one group", "User-agent: a\nUser-agent: mcpsearch\nUser-agent: b\nDisallow: /x\n", "mcpsearch", []check{
			{"/x", false},
		}},
		{"a rule ends a group", "User-agent: mcpsearch\nDisallow: /x\nUser-agent: other\nDisallow: /y\n", "mcpsearch", []check{
			{"/x", false}, {"/y", true},
		}},
		{"rules before any user-agent are ignored", "Disallow: /x\nUser-agent: *\nDisallow: /y\n", "bot", []check{
			{"/x", true}, {"/y", false},
		}},
		{"comments, CRLF, a byte order mark and blank space", "\ufeffUser-agent: * # everyone\r\n  Disallow :  /tmp/   # scratch\r\n\r\n", "bot", []check{
			{"/tmp/a", false}, {"/tmpx", true},
		}},
		{"a sitemap line does not end a group", "User-agent: *\nSitemap: https://example.com/s.xml\nUser-agent: mcpsearch\nDisallow: /s\n", "mcpsearch", []check{
			{"/s", false},
		}},
		{"percent-encodings of unreserved characters match their characters", "User-agent: *\nDisallow: /%7Ejoe/\nDisallow: /a%2fb\n", "bot", []check{
			{"/~joe/x", false}, {"/%7ejoe/x", false}, {"/a%2Fb", false}, {"/a/b", true},
		}},
		{"non-ASCII rules match their UTF-8 encoding", "User-agent: *\nDisallow: /bücher\n", "bot", []check{
			{"/b%C3%BCcher/x", false}, {"/b%c3%bccher", false}, {"/bucher", true},
		}},
		{"a rule without a leading slash", "User-agent: *\nDisallow: private\n", "bot", []check{
			{"/private/x", false},
		}},
		{"lines without a colon are ignored", "User-agent: *\nDisallow /x\nDisallow: /y\n", "bot", []check{
			{"/x", true}, {"/y", false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ParseRobots([]byte(tc.file), tc.token)
			for _, c := range tc.checks {
				if got := r.Allowed(c.path); got != c.allowed {
					t.Errorf("Allowed(%q) = %v, want %v", c.path, got, c.allowed)
				}
			}
		})
	}
}

func TestRobotsCrawlDelayAndSitemaps(t *testing.T) {
	file := "Sitemap: https://example.com/a.xml\nUser-agent: *\nCrawl-delay: 1.5\n\nUser-agent: mcpsearch\nCrawl-delay: 2\nDisallow: /x\n\nUser-agent: mcpsearch\nCrawl-delay: 3\nSitemap: https://example.com/b.xml.gz\n"
	r := ParseRobots([]byte(file), "mcpsearch-fetch/1")
	// The token is "mcpsearch-fetch", which no group names: the * group's
	// delay applies.
	if r.Delay != 1500*time.Millisecond || !r.Allowed("/x") {
		t.Errorf("delay for mcpsearch-fetch = %v, want 1.5s, and /x allowed", r.Delay)
	}
	r = ParseRobots([]byte(file), "mcpsearch/1.0")
	if r.Delay != 3*time.Second {
		t.Errorf("delay = %v, want the largest of the merged groups, 3s", r.Delay)
	}
	if strings.Join(r.Sitemaps, " ") != "https://example.com/a.xml https://example.com/b.xml.gz" {
		t.Errorf("sitemaps = %q", r.Sitemaps)
	}
	if r.Allowed("/x") {
		t.Error("/x allowed")
	}
}

func TestRobotsSizeCap(t *testing.T) {
	// Rules past 500 KiB are not read; a line cut at the limit is dropped.
	var b strings.Builder
	b.WriteString("User-agent: *\nDisallow: /early\n")
	for b.Len() < maxRobotsBytes-20 {
		b.WriteString("# padding padding padding padding\n")
	}
	b.WriteString("Disallow: /straddling-the-limit\nDisallow: /late\n")
	r := ParseRobots([]byte(b.String()), "bot")
	if r.Allowed("/early") {
		t.Error("/early allowed")
	}
	if !r.Allowed("/late") || !r.Allowed("/straddling-the-limit") {
		t.Error("rules past 500 KiB applied")
	}
}

func TestProductToken(t *testing.T) {
	for in, want := range map[string]string{
		"mcpsearch-fetch/1": "mcpsearch-fetch", "Googlebot/2.1 (+http://www.google.com/bot.html)": "Googlebot",
		"my_bot": "my_bot", " spaced ": "spaced", "*": "",
	} {
		if got := productToken(in); got != want {
			t.Errorf("productToken(%q) = %q, want %q", in, got, want)
		}
	}
}

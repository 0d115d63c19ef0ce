package searxng_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mcpsearch/mcpsearch/internal/searxngtest"
	"github.com/mcpsearch/mcpsearch/searxng"
)

func TestNormalizeDomain(t *testing.T) {
	tests := map[string]string{
		"go.dev":                "go.dev",
		" Go.Dev. ":             "go.dev",
		"https://go.dev/doc/":   "go.dev",
		"http://u:p@go.dev:80":  "go.dev",
		"*.go.dev":              "go.dev",
		".go.dev":               "go.dev",
		"xn--bcher-kva.example": "xn--bcher-kva.example",
		"localhost":             "",
		"":                      "",
		"a..b":                  "",
		"-bad.example":          "",
		"sp ace.example":        "",
		"site:go.dev":           "",
	}
	for in, want := range tests {
		got, err := searxng.NormalizeDomain(in)
		if want == "" {
			if err == nil {
				t.Errorf("NormalizeDomain(%q) = %q, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("NormalizeDomain(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestDomainMatches(t *testing.T) {
	tests := []struct {
		host, domain string
		want         bool
	}{
		{"go.dev", "go.dev", true},
		{"pkg.go.dev", "go.dev", true},
		{"PKG.Go.Dev.", "go.dev", true},
		{"notgo.dev", "go.dev", false},
		{"go.dev.evil.example", "go.dev", false},
		{"dev", "go.dev", false},
		{"go.dev", "", false},
	}
	for _, tt := range tests {
		if got := searxng.DomainMatches(tt.host, tt.domain); got != tt.want {
			t.Errorf("DomainMatches(%q, %q) = %v, want %v", tt.host, tt.domain, got, tt.want)
		}
	}
}

func TestFilterDomains(t *testing.T) {
	results := []searxng.Result{
		{URL: "https://go.dev/doc"}, {URL: "https://pkg.go.dev/net/http"}, {URL: "https://example.org/go"},
		{URL: "https://blog.example.org/x"}, {URL: "not a url"}, {URL: "https://notgo.dev/"},
	}
	urls := func(rs []searxng.Result) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.URL)
		}
		return out
	}
	tests := []struct {
		name             string
		include, exclude []string
		want             []string
	}{
		{"none", nil, nil, urls(results)},
		{"include one", []string{"go.dev"}, nil, []string{"https://go.dev/doc", "https://pkg.go.dev/net/http"}},
		{"include two", []string{"https://GO.dev", "example.org"}, nil,
			[]string{"https://go.dev/doc", "https://pkg.go.dev/net/http", "https://example.org/go", "https://blog.example.org/x"}},
		{"exclude", nil, []string{"example.org"}, []string{"https://go.dev/doc", "https://pkg.go.dev/net/http", "not a url", "https://notgo.dev/"}},
		{"include and exclude", []string{"go.dev"}, []string{"pkg.go.dev"}, []string{"https://go.dev/doc"}},
		{"invalid ignored", []string{"bogus"}, nil, urls(results)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := urls(searxng.FilterDomains(results, tt.include, tt.exclude)); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSearchDomains(t *testing.T) {
	fake := searxngtest.New(t)
	c := newClient(t, fake.URL)
	tests := []struct {
		name             string
		include, exclude []string
		wantQ            string
		results          int // -1: the fake's full page
	}{
		{"include one", []string{"Example.com"}, nil, "go site:example.com", -1},
		{"include two", []string{"example.com", "https://go.dev/"}, nil, "go site:example.com OR site:go.dev", -1},
		{"exclude", nil, []string{"example.com", "*.spam.example"}, "go -site:example.com -site:spam.example", 0},
		{"duplicates folded", []string{"example.com", "EXAMPLE.com."}, nil, "go site:example.com", -1},
		{"include elsewhere", []string{"go.dev"}, nil, "go site:go.dev", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := c.Search(t.Context(), searxng.Request{Query: "go", IncludeDomains: tt.include, ExcludeDomains: tt.exclude})
			if err != nil {
				t.Fatal(err)
			}
			if got := fake.LastQuery().Get("q"); got != tt.wantQ {
				t.Errorf("q = %q, want %q", got, tt.wantQ)
			}
			// The fake's results are all on example.com.
			want := tt.results
			if want < 0 {
				want = searxngtest.PerPage + 1
			}
			if len(resp.Results) != want {
				t.Errorf("%d results, want %d", len(resp.Results), want)
			}
		})
	}

	bad := []searxng.Request{
		{Query: "go", IncludeDomains: []string{"not a domain"}},
		{Query: "go", ExcludeDomains: []string{"localhost"}},
		{Query: "go", IncludeDomains: strings.Split("a.io,b.io,c.io,d.io,e.io,f.io,g.io,h.io,i.io,j.io,k.io", ",")},
	}
	before := fake.Requests()
	for _, r := range bad {
		if _, err := c.Search(t.Context(), r); !errors.Is(err, searxng.ErrBadRequest) {
			t.Errorf("Search(%+v) err = %v, want ErrBadRequest", r, err)
		}
	}
	if fake.Requests() != before {
		t.Error("an invalid domain list reached SearXNG")
	}
}

package crawl

import (
	"errors"
	"net/url"
	"testing"

	"github.com/mcpsearch/mcpsearch/fetch"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// RFC 3986 §6.2.2: case, percent-encoding, dot segments.
		{"HTTP://Example.COM/a/b", "http://example.com/a/b"},
		{"http://example.com", "http://example.com/"},
		{"http://example.com./x", "http://example.com/x"},
		{"http://example.com/%7Ejoe/%41b%2fc", "http://example.com/~joe/Ab%2Fc"},
		{"http://example.com/a%2fb%c3%a4", "http://example.com/a%2Fb%C3%A4"},
		{"http://example.com/a/./b/../c", "http://example.com/a/c"},
		{"http://example.com/a/b/..", "http://example.com/a/"},
		{"http://example.com/../../x", "http://example.com/x"},
		{"http://example.com/a/%2E%2E/b", "http://example.com/b"},
		{"http://example.com/a b", "http://example.com/a%20b"},
		// §6.2.3: default ports.
		{"http://example.com:80/x", "http://example.com/x"},
		{"https://example.com:443/x", "https://example.com/x"},
		{"https://example.com:8443/x", "https://example.com:8443/x"},
		{"http://example.com:443/x", "http://example.com:443/x"},
		{"http://[::1]:80/x", "http://[::1]/x"},
		{"http://[::1]:8080/x", "http://[::1]:8080/x"},
		// Internationalised names in their ASCII form.
		{"http://bücher.example/x", "http://xn--bcher-kva.example/x"},
		// Fragments never identify another page.
		{"http://example.com/a#part", "http://example.com/a"},
		{"http://example.com/a?#", "http://example.com/a"},
		// Tracking parameters go, the rest is sorted by name, values of
		// one name keeping their order.
		{"http://example.com/a?utm_source=x&b=2&UTM_Medium=y&a=1&fbclid=z", "http://example.com/a?a=1&b=2"},
		{"http://example.com/a?gclid=1&mc_cid=2&mc_eid=3&msclkid=4", "http://example.com/a"},
		{"http://example.com/a?z=1&a=2&z=0", "http://example.com/a?a=2&z=1&z=0"},
		{"http://example.com/a?q=%7e%2f&&x", "http://example.com/a?q=~%2F&x"},
		{"http://example.com/a?ref=home", "http://example.com/a?ref=home"},
	} {
		got, err := Normalize(tc.in)
		if err != nil {
			t.Errorf("Normalize(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
		// The normal form is a fixed point.
		if again, _ := Normalize(got); again != got {
			t.Errorf("Normalize(%q) = %q, not stable", got, again)
		}
	}
	for _, bad := range []string{"ftp://example.com/", "mailto:a@example.com", "/relative", "http:///nohost", "javascript:alert(1)"} {
		if _, err := Normalize(bad); !errors.Is(err, fetch.ErrInvalidURL) {
			t.Errorf("Normalize(%q) = %v, want ErrInvalidURL", bad, err)
		}
	}
}

func TestResolveRelative(t *testing.T) {
	base, _ := url.Parse("http://example.com/docs/guide/intro.html?x=1")
	for _, tc := range []struct{ ref, want string }{
		{"next.html", "http://example.com/docs/guide/next.html"},
		{"../api/", "http://example.com/docs/api/"},
		{"/abs", "http://example.com/abs"},
		{"?page=2", "http://example.com/docs/guide/intro.html?page=2"},
		{"//Other.Example:80/x", "http://other.example/x"},
		{"./", "http://example.com/docs/guide/"},
	} {
		u, err := resolve(base, tc.ref)
		if err != nil || u.String() != tc.want {
			t.Errorf("resolve(%q) = %v, %v; want %q", tc.ref, u, err, tc.want)
		}
	}
}

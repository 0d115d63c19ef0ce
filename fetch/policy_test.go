package fetch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestAddressClass(t *testing.T) {
	tests := []struct {
		ip   string
		want string // substring of the class; "" for a public address
	}{
		{"8.8.8.8", ""},
		{"93.184.216.34", ""},
		{"2606:4700:4700::1111", ""},
		{"127.0.0.1", "loopback"},
		{"127.255.0.9", "loopback"},
		{"::1", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"172.32.0.1", ""},
		{"192.168.1.1", "private"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"100.100.100.200", "carrier-grade NAT"},
		{"169.254.169.254", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"fd00:ec2::254", "unique-local"},
		{"fc00::1", "unique-local"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:8.8.8.8", ""},
		{"::127.0.0.1", "IPv4-compatible"},
		{"64:ff9b::a00:1", "private (RFC 1918) via NAT64"},
		{"64:ff9b::808:808", ""},
		{"2002:a9fe:a9fe::1", "link-local (cloud metadata lives here) via 6to4"},
		{"2002:808:808::1", ""},
	}
	for _, tt := range tests {
		got := addressClass(netip.MustParseAddr(tt.ip))
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("addressClass(%s) = %q, want %q", tt.ip, got, tt.want)
		}
	}
}

func TestAllowList(t *testing.T) {
	a, err := parseAllowList([]string{"Wiki.Corp.Example.", "*.intra.example", "10.0.0.0/8", "fd00::1", "[fd00::2]"})
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]bool{
		"wiki.corp.example": true, "WIKI.corp.example.": true, "corp.example": false,
		"a.intra.example": true, "a.b.intra.example": true, "intra.example": false, "evilintra.example": false,
	}
	for h, want := range hosts {
		if got := a.allowsHost(h); got != want {
			t.Errorf("allowsHost(%q) = %v, want %v", h, got, want)
		}
	}
	ips := map[string]bool{"10.9.8.7": true, "::ffff:10.0.0.1": true, "11.0.0.1": false, "fd00::1": true, "fd00::2": true, "fd00::3": false}
	for ip, want := range ips {
		if got := a.allowsIP(netip.MustParseAddr(ip)); got != want {
			t.Errorf("allowsIP(%s) = %v, want %v", ip, got, want)
		}
	}
}

// TestBlockedAddresses fetches with the default policy: nothing on this
// machine may be reached, whether named by address or by a name that
// resolves to it.
func TestBlockedAddresses(t *testing.T) {
	s := newSite(t)
	s.serve("/page", "text/plain", []byte("secret"))
	c := newClient(t, Options{})
	tests := []struct {
		url   string
		class string
	}{
		{s.URL + "/page", "loopback"},
		// A name is not checked before the request: the dialler refuses
		// the address it resolved to, as it would a rebound name.
		{"http://localhost:" + s.port() + "/page", "loopback"},
		{"http://[::1]:" + s.port() + "/page", "loopback"},
		{"http://[::ffff:127.0.0.1]:" + s.port() + "/page", "loopback"},
		{"http://0.0.0.0:" + s.port() + "/page", "unspecified"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://[::ffff:a9fe:a9fe]/latest/meta-data/", "link-local"},
		{"http://[fd00:ec2::254]/latest/meta-data/", "unique-local"},
		{"http://100.100.100.200/latest/meta-data/", "carrier-grade NAT"},
		{"http://10.0.0.1/", "private"},
		{"http://[64:ff9b::a00:1]/", "private"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			_, err := c.Get(t.Context(), tt.url)
			var be *BlockedError
			if !errors.Is(err, ErrBlocked) || !errors.As(err, &be) {
				t.Fatalf("err = %v, want a BlockedError", err)
			}
			if !strings.Contains(be.Class, tt.class) || !strings.Contains(err.Error(), "allow-list") {
				t.Errorf("err = %v, want class %q and how to allow it", err, tt.class)
			}
			if Retryable(err) {
				t.Error("blocked address reported retryable")
			}
		})
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("the local site received %d requests", n)
	}
}

// TestRedirectsChecked follows redirects from an allow-listed host to
// addresses that are not allowed.
func TestRedirectsChecked(t *testing.T) {
	entry := newSite(t)
	target := newSite(t)
	target.serve("/secret", "text/plain", []byte("secret"))
	entry.serve("/ok", "text/plain", []byte("allowed by name"))
	redirects := map[string]string{
		"/to-loopback": target.URL + "/secret",
		"/to-name":     "http://localhost:" + target.port() + "/secret",
		"/to-metadata": "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"/to-mapped":   "http://[::ffff:127.0.0.1]:" + target.port() + "/secret",
		"/to-private":  "http://192.168.0.1/admin",
		"/to-file":     "file:///etc/passwd",
	}
	for from, to := range redirects {
		entry.mux.HandleFunc(from, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, to, http.StatusFound)
		})
	}
	base := "http://localhost:" + entry.port()
	c := newClient(t, Options{AllowHosts: []string{"localhost"}})

	d, err := c.Get(t.Context(), base+"/ok")
	if err != nil || d.Content != "allowed by name" {
		t.Fatalf("allow-listed host: %v", err)
	}
	tests := []struct {
		path string
		err  error
	}{
		{"/to-loopback", ErrBlocked},
		// localhost is allowed by name, on any port: the redirect is
		// followed, and the target answers.
		{"/to-name", nil},
		{"/to-metadata", ErrBlocked},
		{"/to-mapped", ErrBlocked},
		{"/to-private", ErrBlocked},
		{"/to-file", ErrInvalidURL},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			_, err := c.Get(t.Context(), base+tt.path)
			if tt.err == nil && err != nil || tt.err != nil && !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
		})
	}
	if n := target.hits.Load(); n != 1 {
		t.Errorf("target received %d requests, want 1 (the allowed name only)", n)
	}
}

func TestAllowHostsByAddress(t *testing.T) {
	s := newSite(t)
	s.serve("/page", "text/plain", []byte("internal"))
	for _, allow := range []string{"127.0.0.1", "127.0.0.0/8", "::ffff:127.0.0.1"} {
		c := newClient(t, Options{AllowHosts: []string{allow}})
		if d, err := c.Get(t.Context(), s.URL+"/page"); err != nil || d.Content != "internal" {
			t.Errorf("AllowHosts %q: %v", allow, err)
		}
		// A neighbour outside the entry stays blocked.
		if _, err := c.Get(t.Context(), "http://10.0.0.1/"); !errors.Is(err, ErrBlocked) {
			t.Errorf("AllowHosts %q: 10.0.0.1 err = %v", allow, err)
		}
	}
}

// TestProxy sends fetches through a forward proxy on loopback: the proxy's
// own address is reachable because the operator configured it, and page
// hosts are still checked where this side can tell.
func TestProxy(t *testing.T) {
	proxy := newSite(t)
	proxy.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			http.Error(w, "not a proxy request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "via proxy: %s%s", r.URL.Host, r.URL.Path)
	})
	c := newClient(t, Options{Proxy: proxy.URL, UserAgent: "reader-test/2"})
	resolved := map[string]string{"public.test": "93.184.216.34", "rebind.test": "10.0.0.7", "meta.test": "::ffff:169.254.169.254"}
	c.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		if ip, ok := resolved[host]; ok {
			return []netip.Addr{netip.MustParseAddr(ip)}, nil
		}
		return nil, errors.New("no such host")
	}
	tests := []struct {
		url  string
		want string
		err  error
	}{
		{"http://public.test/a", "via proxy: public.test/a", nil},
		{"http://only-the-proxy-knows.test/b", "via proxy: only-the-proxy-knows.test/b", nil},
		{"http://rebind.test/", "", ErrBlocked},
		{"http://meta.test/", "", ErrBlocked},
		{"http://127.0.0.1:1/", "", ErrBlocked},
		{"http://[fe80::1]/", "", ErrBlocked},
	}
	for _, tt := range tests {
		d, err := c.Get(t.Context(), tt.url)
		if tt.err != nil {
			if !errors.Is(err, tt.err) {
				t.Errorf("Get(%s) err = %v, want %v", tt.url, err, tt.err)
			}
			continue
		}
		if err != nil || d.Content != tt.want {
			t.Errorf("Get(%s) = %v, %v; want %q", tt.url, d, err, tt.want)
		}
	}
	if n := proxy.hits.Load(); n != 2 {
		t.Errorf("proxy received %d requests, want 2", n)
	}
}

func TestUserAgent(t *testing.T) {
	s := newSite(t)
	s.mux.HandleFunc("/ua", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(r.UserAgent()))
	})
	for ua, want := range map[string]string{"": DefaultUserAgent, "reader/3 (+https://example.org)": "reader/3 (+https://example.org)"} {
		c := newClient(t, Options{AllowPrivate: true, UserAgent: ua})
		d, err := c.Get(t.Context(), s.URL+"/ua")
		if err != nil || d.Content != want {
			t.Errorf("UserAgent %q: got %v %v, want %q", ua, d, err, want)
		}
	}
}

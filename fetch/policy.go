package fetch

import (
	"fmt"
	"net/netip"
	"strings"
)

// blockedRange is one address range refused by default, with the words
// used to name it in errors.
type blockedRange struct {
	prefix netip.Prefix
	class  string
}

// blockedRanges lists the address ranges a fetch may not reach unless the
// operator allows them. They cover the host itself, private networks and
// the cloud metadata endpoints, which answer on link-local (169.254.169.254,
// fe80::/10), unique-local (fd00:ec2::254) and carrier-grade NAT
// (100.100.100.200) addresses.
var blockedRanges = []blockedRange{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (0.0.0.0/8)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (100.64.0.0/10)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata lives here)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment (192.0.0.0/24)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking (198.18.0.0/15)"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (240.0.0.0/4)"},
	{netip.MustParsePrefix("::/128"), "unspecified (::)"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible IPv6 (deprecated)"},
	{netip.MustParsePrefix("fc00::/7"), "unique-local IPv6 (fc00::/7)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local IPv6"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Prefixes of IPv6 ranges that embed an IPv4 address, which is checked in
// turn so that a translated private address does not slip through.
var (
	nat64Prefix  = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052, last 4 bytes
	sixToFour    = netip.MustParsePrefix("2002::/16")    // RFC 3056, bytes 2..5
	teredoPrefix = netip.MustParsePrefix("2001::/32")    // RFC 4380, obfuscated client
)

// addressClass returns the blocked class of ip, or "" when ip is a public
// address that may be fetched.
func addressClass(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return "invalid"
	}
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64Prefix.Contains(ip):
			if c := addressClass(netip.AddrFrom4([4]byte(b[12:16]))); c != "" {
				return c + " via NAT64"
			}
		case sixToFour.Contains(ip):
			if c := addressClass(netip.AddrFrom4([4]byte(b[2:6]))); c != "" {
				return c + " via 6to4"
			}
		case teredoPrefix.Contains(ip):
			// The client address is stored inverted in the last 4 bytes.
			v4 := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
			if c := addressClass(netip.AddrFrom4(v4)); c != "" {
				return c + " via Teredo"
			}
		}
	}
	for _, r := range blockedRanges {
		if r.prefix.Contains(ip) {
			return r.class
		}
	}
	return ""
}

// allowList is the operator's list of hosts and networks that may be
// fetched even though they are private.
type allowList struct {
	hosts    map[string]bool // exact names, lower case, no trailing dot
	suffixes []string        // ".corp.example" for an entry "*.corp.example"
	prefixes []netip.Prefix  // single addresses are /32 or /128
}

// parseAllowList reads entries of the forms "wiki.corp.example",
// "*.corp.example" (every subdomain, not the name itself), "10.1.2.3",
// "fd00::1", "10.0.0.0/8" and "fd00::/8".
func parseAllowList(entries []string) (allowList, error) {
	a := allowList{hosts: map[string]bool{}}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			a.prefixes = append(a.prefixes, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
			ip = ip.Unmap()
			a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		name := normaliseHost(e)
		if rest, ok := strings.CutPrefix(name, "*."); ok {
			if !validHostName(rest) {
				return allowList{}, fmt.Errorf("allow-list entry %q: not a host name, address or CIDR", e)
			}
			a.suffixes = append(a.suffixes, "."+rest)
			continue
		}
		if !validHostName(name) {
			return allowList{}, fmt.Errorf("allow-list entry %q: not a host name, address or CIDR", e)
		}
		a.hosts[name] = true
	}
	return a, nil
}

// allowsHost reports whether the host name (not an address) is listed.
func (a allowList) allowsHost(host string) bool {
	host = normaliseHost(host)
	if a.hosts[host] {
		return true
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// allowsIP reports whether ip lies in a listed network.
func (a allowList) allowsIP(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	for _, p := range a.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func normaliseHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
}

func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

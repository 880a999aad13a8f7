package blocklist

import (
	"net"
	"net/netip"
	"strings"
)

// publicResolvers are the addresses of the best-known public resolvers.
// Most blocklists refuse queries that reach them through such a resolver,
// whose traffic cannot be attributed to one user (Spamhaus answers
// 127.255.255.254), so pointing BLOCKLIST_RESOLVER at one makes every list
// unhealthy.
var publicResolvers = map[netip.Addr]string{}

func init() {
	for name, addrs := range map[string][]string{
		"Google Public DNS": {"8.8.8.8", "8.8.4.4", "2001:4860:4860::8888", "2001:4860:4860::8844"},
		"Cloudflare": {
			"1.1.1.1", "1.0.0.1", "2606:4700:4700::1111", "2606:4700:4700::1001",
			"1.1.1.2", "1.0.0.2", "2606:4700:4700::1112", "2606:4700:4700::1002",
			"1.1.1.3", "1.0.0.3", "2606:4700:4700::1113", "2606:4700:4700::1003",
		},
		"Quad9": {
			"9.9.9.9", "149.112.112.112", "2620:fe::fe", "2620:fe::9",
			"9.9.9.10", "149.112.112.10", "2620:fe::10", "2620:fe::fe:10",
			"9.9.9.11", "149.112.112.11", "2620:fe::11", "2620:fe::fe:11",
		},
		"OpenDNS": {
			"208.67.222.222", "208.67.220.220", "2620:119:35::35", "2620:119:53::53",
			"208.67.222.123", "208.67.220.123", "2620:119:35::123", "2620:119:53::123",
		},
	} {
		for _, a := range addrs {
			publicResolvers[netip.MustParseAddr(a)] = name
		}
	}
}

// PublicResolver returns the provider's name when addr (an address, with or
// without a port, IPv6 possibly in brackets) is a well-known public
// resolver.
func PublicResolver(addr string) (string, bool) {
	host := strings.TrimSpace(addr)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return "", false
	}
	name, ok := publicResolvers[ip.Unmap().WithZone("")]
	return name, ok
}

// IsPublicResolver reports whether addr is a well-known public resolver,
// for the start-up warning about BLOCKLIST_RESOLVER / DNS_RESOLVER.
func IsPublicResolver(addr string) bool {
	_, ok := PublicResolver(addr)
	return ok
}

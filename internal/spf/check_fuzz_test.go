package spf

import (
	"context"
	"net/netip"
	"testing"
)

// FuzzExpand runs macro expansion (RFC 7208 section 7) on arbitrary
// domain-specs and client facts: it must not panic, and what it returns
// fits a domain name (section 7.3 cuts it to 253 octets).
func FuzzExpand(f *testing.F) {
	f.Add("%{ir}.%{l1r+-}._spf.%{d}", "bob@example.com", "mx.example.com", []byte{192, 0, 2, 1})
	f.Add("%{i}.%{v}.%{h}.%{o}.%{s}.%{p}", "", "helo", []byte{0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add("%{L}%%%_%-%{S2r}", "\"a b\"@[127.0.0.1]", "", []byte{127, 0, 0, 1})
	f.Add("%{d999999999999999999}", "a@b", "c", []byte{1, 2, 3, 4})
	f.Add("%{", "@", "", []byte{})
	f.Fuzz(func(t *testing.T, spec, sender, helo string, ip []byte) {
		addr, _ := netip.AddrFromSlice(ip)
		ch := &checker{c: Client{IP: addr.Unmap(), Sender: sender, Helo: helo}}
		out, err := ch.expand(context.Background(), spec, "example.com")
		if err == nil && len(out) > 253 {
			t.Fatalf("expansion of %q is %d octets", spec, len(out))
		}
	})
}

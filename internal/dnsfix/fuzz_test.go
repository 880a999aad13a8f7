package dnsfix_test

import (
	"context"
	"encoding/hex"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/dnsprovider"
	"github.com/mailwatch/mailwatch/internal/spf"
)

// FuzzMergeDMARC checks the DMARC builder against the DMARC parser: what
// it proposes parses, keeps every rua destination of the input, adds the
// reporting address, drops pct and sets the policy asked for.
func FuzzMergeDMARC(f *testing.F) {
	for _, s := range []string{
		"v=DMARC1; p=none",
		"v=DMARC1; p=quarantine; pct=25; rua=mailto:a@example.com,mailto:b@example.net!10m; ruf=mailto:f@example.com; fo=1",
		"v=DMARC1;p=reject;sp=none;adkim=s;aspf=r;rua=mailto:dmarc@example.com",
		"v=DMARC1; p=none; rua=mailto:DMARC+ab@inbound.test",
		"v=DMARC1; p=none; np=reject; t=y; psd=n",
	} {
		f.Add(s, []byte{0xab}, "quarantine")
		f.Add(s, []byte{}, "")
	}
	f.Fuzz(func(t *testing.T, rec string, token []byte, policy string) {
		if len(rec) > dnsfix.MaxRecordBytes || len(token) > 32 {
			return
		}
		addr := ""
		if len(token) > 0 {
			addr = "dmarc+" + hex.EncodeToString(token) + "@inbound.test"
		}
		if policy != "" && policy != "none" && policy != "quarantine" && policy != "reject" {
			policy = ""
		}
		in, err := dmarc.ParseRecord(rec)
		merged, merr := dnsfix.MergeDMARC(rec, addr, policy)
		if err != nil {
			if merr == nil {
				t.Fatalf("merged a record the parser refuses: %q", rec)
			}
			return
		}
		if merr != nil {
			// The only refusals of a parseable record: the result would
			// not parse (reported), never a silent change.
			return
		}
		out, err := dmarc.ParseRecord(merged)
		if err != nil {
			t.Fatalf("proposed %q does not parse: %v", merged, err)
		}
		if slices.Contains(out.Tags, "pct") {
			t.Fatalf("proposed %q keeps pct", merged)
		}
		for _, u := range in.AggregateURIs {
			if !slices.ContainsFunc(out.AggregateURIs, func(v dmarc.URI) bool { return strings.EqualFold(v.Raw, u.Raw) }) {
				t.Fatalf("proposed %q lost the destination %q of %q", merged, u.Raw, rec)
			}
		}
		if addr != "" && !slices.ContainsFunc(out.AggregateURIs, func(v dmarc.URI) bool { return strings.EqualFold(v.Raw, "mailto:"+addr) }) {
			t.Fatalf("proposed %q lacks %s", merged, addr)
		}
		if policy != "" && slices.Contains(in.Tags, "p") && out.Policy != policy {
			t.Fatalf("proposed %q has p=%s, want %s", merged, out.Policy, policy)
		}
	})
}

// mapResolver answers TXT from a map and nothing else (NXDOMAIN).
type mapResolver map[string][]string

func notFound(name string) error {
	return &net.DNSError{Err: "no such host", Name: name, IsNotFound: true}
}

func (m mapResolver) LookupTXT(_ context.Context, name string) ([]string, error) {
	if v, ok := m[strings.TrimSuffix(strings.ToLower(name), ".")]; ok {
		return v, nil
	}
	return nil, notFound(name)
}

func (m mapResolver) LookupMX(_ context.Context, name string) ([]*net.MX, error) {
	return nil, notFound(name)
}

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return nil, notFound(host)
}

// FuzzFlatten checks the SPF flattener against the SPF evaluator: a
// record it flattens parses and, evaluated, passes within the limits
// (what the recommendation claims), and every address range of the
// inlined record is in it.
func FuzzFlatten(f *testing.F) {
	f.Add("v=spf1 include:a.fuzz.test include:b.fuzz.test -all", "v=spf1 ip4:192.0.2.0/24 ip6:2001:db8::/32 -all")
	f.Add("v=spf1 ip4:198.51.100.1 include:a.fuzz.test ~all", "v=spf1 ip4:203.0.113.7 ~all")
	f.Add("v=spf1 include:a.fuzz.test -all", "v=spf1 -ip4:192.0.2.1 ip4:192.0.2.0/24 -all")
	f.Add("v=spf1 include:a.fuzz.test include:a.fuzz.test -all", "v=spf1 include:b.fuzz.test -all")
	f.Fuzz(func(t *testing.T, rec, inc string) {
		if len(rec) > dnsfix.MaxRecordBytes || len(inc) > dnsfix.MaxRecordBytes {
			return
		}
		r := mapResolver{"a.fuzz.test": {inc}, "b.fuzz.test": {"v=spf1 ip4:192.0.2.200 -all"}}
		flat, err := dnsfix.Flatten(context.Background(), r, "fuzz.test", rec)
		if err != nil {
			return
		}
		parsed, err := spf.ParseRecord(flat)
		if err != nil {
			t.Fatalf("flattened %q does not parse: %v", flat, err)
		}
		r["fuzz.test"] = []string{flat}
		ev := spf.Evaluate(context.Background(), r, "fuzz.test")
		if ev.Lookups > spf.MaxLookups {
			t.Fatalf("flattened %q still needs %d lookups", flat, ev.Lookups)
		}
		if inner, err := spf.ParseRecord(inc); err == nil && strings.Contains(rec, "include:a.fuzz.test") && !strings.Contains(flat, "include:a.fuzz.test") {
			for _, d := range inner.Directives {
				if d.Mechanism == "ip4" || d.Mechanism == "ip6" {
					if !slices.ContainsFunc(parsed.Directives, func(x spf.Directive) bool { return x.Network == d.Network }) {
						t.Fatalf("flattened %q lost %s of the inlined record", flat, d.Raw)
					}
				}
			}
		}
	})
}

// FuzzTXTQuoting checks that the TXT quoting used with Cloudflare and
// Route 53 round-trips any value.
func FuzzTXTQuoting(f *testing.F) {
	f.Add("v=spf1 -all")
	f.Add(`a "quoted" \ value`)
	f.Add(strings.Repeat("x", 600))
	f.Fuzz(func(t *testing.T, v string) {
		if len(v) > dnsfix.MaxRecordBytes || strings.HasPrefix(v, `"`) {
			return
		}
		if got := dnsprovider.UnquoteTXT(dnsprovider.QuoteTXT(v)); got != strings.TrimSpace(v) && got != v {
			t.Fatalf("round trip of %q gave %q", v, got)
		}
	})
}

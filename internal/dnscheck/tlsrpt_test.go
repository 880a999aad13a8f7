package dnscheck

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProposeTLSRPT is the one TLS-RPT proposal (the DNS check's
// instruction, the DNS recommendation, the reporting-address instructions).
func TestProposeTLSRPT(t *testing.T) {
	t.Parallel()
	ours := func(a string) bool { return a == "tlsrpt+old@mw.test" || a == "t@mw.test" }
	for _, tc := range []struct {
		name    string
		current []string
		addr    string
		ours    func(string) bool
		want    string
		named   bool
	}{
		{name: "NoAddressIsPostmaster", want: "v=TLSRPTv1; rua=mailto:postmaster@example.com"},
		{name: "Address", addr: "t@mw.test", want: "v=TLSRPTv1; rua=mailto:t@mw.test"},
		{name: "Kept", current: []string{"https://tls.example.com/r", "mailto:x@example.com"}, addr: "t@mw.test",
			want: "v=TLSRPTv1; rua=https://tls.example.com/r,mailto:x@example.com,mailto:t@mw.test"},
		{name: "NamedAnyCase", current: []string{"MAILTO:T@MW.TEST"}, addr: "t@mw.test",
			want: "v=TLSRPTv1; rua=MAILTO:T@MW.TEST", named: true},
		{name: "PreviousKeyIsOurs", current: []string{"mailto:tlsrpt+old@mw.test"}, addr: "t@mw.test", ours: ours,
			want: "v=TLSRPTv1; rua=mailto:tlsrpt+old@mw.test", named: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, named := ProposeTLSRPT("example.com", tc.current, tc.addr, tc.ours)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.named, named)
			_, err := ParseTLSRPT(got)
			require.NoError(t, err, "the proposal parses")
		})
	}
}

// TestCheckTLSRPTInstruction: a domain without a record is told the same
// record the DNS recommendation proposes.
func TestCheckTLSRPTInstruction(t *testing.T) {
	t.Parallel()
	res := CheckTLSRPT(context.Background(), noTXT{}, "example.com")
	require.Equal(t, StatusNone, res.Status)
	require.Contains(t, res.Instructions, `Publish a TXT record at _smtp._tls.example.com: "v=TLSRPTv1; rua=mailto:postmaster@example.com" to receive reports of TLS failures delivering to you.`)
}

// noTXT answers every TXT lookup with NXDOMAIN.
type noTXT struct{ Resolver }

func (noTXT) LookupTXT(context.Context, string) ([]string, error) {
	return nil, &net.DNSError{Err: "no such host", IsNotFound: true}
}

package dnscheck

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dnstest"
)

// The policy fetcher refuses every address a webhook may not reach, not
// only RFC 1918 ones: a customer's DNS must not point mailwatch at CGNAT or
// cloud metadata services.
func TestPolicyFetcherRefusesNonPublicAddresses(t *testing.T) {
	t.Parallel()
	srv := dnstest.Start(t, `
mta-sts.cgnat.test.     300 IN A    100.100.100.200
mta-sts.nat64.test.     300 IN AAAA 64:ff9b::a00:1
mta-sts.loopback.test.  300 IN A    127.0.0.1
`)
	client := NewHTTPClient(NewClient(srv.Addr(), time.Second), 2*time.Second)
	for _, host := range []string{"mta-sts.cgnat.test", "mta-sts.nat64.test", "mta-sts.loopback.test"} {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "https://"+host+"/.well-known/mta-sts.txt", nil)
		require.NoError(t, err)
		_, err = client.Do(req)
		require.ErrorContains(t, err, "non-public address", host)
	}
}

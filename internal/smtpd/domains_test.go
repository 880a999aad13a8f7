package smtpd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestVerifiedSubdomain: with AcceptDomain, a real SMTP session delivers to
// a recipient at an accepted (verified) subdomain, refuses one at any other
// domain with 550 5.1.2, answers 451 when the check fails, and asks once
// per name within the cache's lifetime.
func TestVerifiedSubdomain(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	asked := map[string]int{}
	b := setup(t, setupOpts{acceptDomain: func(_ context.Context, domain string) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		asked[domain]++
		if domain == "down.example.com" {
			return false, errors.New("database unavailable")
		}
		return domain == "reports.example.com", nil
	}})
	b.store.mu.Lock()
	b.store.receivers["live@reports.example.com"] = nil
	b.store.mu.Unlock()

	c := dial(t, b.addr)
	rcptErrs, err := send(t, c, "sender@example.org", []string{
		"live@Reports.Example.COM.", "live@other.example.com", "live@down.example.com", "nobody@reports.example.com",
	}, crlf("Subject: hi\n\nbody\n"))
	require.NoError(t, err)
	require.NoError(t, rcptErrs[0])
	requireCode(t, rcptErrs[1], 550)
	require.Contains(t, rcptErrs[1].Error(), "5.1.2")
	requireCode(t, rcptErrs[2], 451)
	requireCode(t, rcptErrs[3], 550) // accepted domain, unknown recipient
	got := b.store.deliveries()
	require.Len(t, got, 1)
	require.Equal(t, []string{"live@reports.example.com"}, got[0].To)

	// The inbound domain itself is never asked about; the accepted
	// subdomain and the refused domain were asked once each despite two
	// RCPTs at the first (the failure is not cached).
	c2 := dial(t, b.addr)
	rcptErrs, err = send(t, c2, "sender@example.org", []string{"live@" + testDomain, "live@reports.example.com", "live@other.example.com", "live@down.example.com"}, crlf("Subject: again\n\nbody\n"))
	require.NoError(t, err)
	require.NoError(t, rcptErrs[0])
	require.NoError(t, rcptErrs[1])
	requireCode(t, rcptErrs[2], 550)
	requireCode(t, rcptErrs[3], 451)
	mu.Lock()
	require.Equal(t, map[string]int{"reports.example.com": 1, "other.example.com": 1, "down.example.com": 2}, asked)
	mu.Unlock()

	// Past the cache's lifetime, the answer is asked again: a subdomain
	// whose verification was lost stops being accepted.
	b.srv.domains.mu.Lock()
	b.srv.domains.now = func() time.Time { return time.Now().Add(domainCacheTTL + time.Second) }
	b.srv.domains.mu.Unlock()
	c3 := dial(t, b.addr)
	require.NoError(t, c3.Mail("sender@example.org"))
	require.NoError(t, c3.Rcpt("live@reports.example.com"))
	mu.Lock()
	require.Equal(t, 2, asked["reports.example.com"])
	mu.Unlock()
}

// TestDomainCacheBounded: a sender cycling through names cannot grow the
// cache past its bound.
func TestDomainCacheBounded(t *testing.T) {
	t.Parallel()
	c := newDomainCache(func(context.Context, string) (bool, error) { return false, nil })
	ctx := context.Background()
	for i := range domainCacheMax + 10 {
		ok, err := c.accepts(ctx, fmt.Sprintf("n%d.example.com", i))
		require.NoError(t, err)
		require.False(t, ok)
		require.LessOrEqual(t, len(c.answers), domainCacheMax)
	}
	long := make([]byte, maxDomainLength+1)
	for i := range long {
		long[i] = 'a'
	}
	before := len(c.answers)
	ok, err := c.accepts(ctx, string(long)+".com")
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, before, len(c.answers), "an over-long name is refused without asking")
}

package blocklist

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/time/rate"
)

// DefaultQueriesPerSecond is the default query rate per list: at most
// 259,200 lookups a day per list even when running flat out, below the
// daily volume the free lists allow small users (Spamhaus states its limit
// in its DNSBL usage terms). Sharing lookups across tenants and caching
// results for the answer's TTL keep the real rate far lower.
const DefaultQueriesPerSecond = 3

// Limiter paces lookups per list zone. Callers call Wait before each
// Lookup, LookupIP or LookupDomain (one lookup sends an A query, plus a TXT
// query when listed). It keeps one rate.Limiter per zone it is asked about,
// so it is meant for the configured lists, not for zones from user input.
// Its methods are safe for concurrent use.
type Limiter struct {
	limit rate.Limit
	burst int

	mu    sync.Mutex
	zones map[string]*rate.Limiter
}

// NewLimiter returns a Limiter allowing perSecond lookups a second per zone
// with bursts of burst; perSecond <= 0 means DefaultQueriesPerSecond and
// burst < 1 means 1.
func NewLimiter(perSecond float64, burst int) *Limiter {
	if perSecond <= 0 {
		perSecond = DefaultQueriesPerSecond
	}
	return &Limiter{limit: rate.Limit(perSecond), burst: max(burst, 1), zones: map[string]*rate.Limiter{}}
}

// Wait blocks until the zone may be queried again, or returns the context's
// error.
func (l *Limiter) Wait(ctx context.Context, zone string) error {
	l.mu.Lock()
	lim, ok := l.zones[zone]
	if !ok {
		lim = rate.NewLimiter(l.limit, l.burst)
		l.zones[zone] = lim
	}
	l.mu.Unlock()
	if err := lim.Wait(ctx); err != nil {
		return fmt.Errorf("waiting to query %s: %w", zone, err)
	}
	return nil
}

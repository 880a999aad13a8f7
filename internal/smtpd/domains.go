package smtpd

import (
	"context"
	"strings"
	"sync"
	"time"
)

// Bounds of the cache of AcceptDomain's answers.
const (
	// domainCacheTTL is how long an answer (yes or no) is reused: a newly
	// verified subdomain is accepted, and a lost one refused, at most this
	// late.
	domainCacheTTL = 30 * time.Second
	// domainCacheMax bounds the cached names; past it, expired answers are
	// dropped, then everything if none had expired, so a sender cycling
	// through random names cannot grow it.
	domainCacheMax = 4096
	// maxDomainLength is the longest domain name (RFC 1035 section 2.3.4).
	maxDomainLength = 253
)

// domainCache remembers Config.AcceptDomain's answers briefly. Errors are
// never cached.
type domainCache struct {
	accept func(ctx context.Context, domain string) (bool, error)

	mu      sync.Mutex
	now     func() time.Time // under mu: tests move it
	answers map[string]domainAnswer
}

type domainAnswer struct {
	ok    bool
	until time.Time
}

func newDomainCache(accept func(ctx context.Context, domain string) (bool, error)) *domainCache {
	return &domainCache{accept: accept, now: time.Now, answers: make(map[string]domainAnswer)}
}

// accepts reports whether mail for domain (lower case, no trailing dot) is
// accepted besides the inbound domain.
func (c *domainCache) accepts(ctx context.Context, domain string) (bool, error) {
	if c == nil || c.accept == nil || len(domain) > maxDomainLength || !strings.Contains(domain, ".") {
		return false, nil
	}
	c.mu.Lock()
	now := c.now()
	a, hit := c.answers[domain]
	c.mu.Unlock()
	if hit && now.Before(a.until) {
		return a.ok, nil
	}
	ok, err := c.accept(ctx, domain)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.answers) >= domainCacheMax {
		for name, a := range c.answers {
			if !now.Before(a.until) {
				delete(c.answers, name)
			}
		}
		if len(c.answers) >= domainCacheMax {
			clear(c.answers)
		}
	}
	c.answers[domain] = domainAnswer{ok: ok, until: now.Add(domainCacheTTL)}
	return ok, nil
}

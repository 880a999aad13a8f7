package dataapi

import (
	"sync"
	"time"

	"github.com/google/uuid"
)

// Pages caches answers to reads of the events table, the table dashboards
// poll, per subject. It serves a cached answer only after the same
// request's batch has read, as the caller's role under the caller's claims
// (so under row-level security), the newest event the subject can see, and
// only when that event is the one read when the answer was filled and the
// answer is younger than the TTL. The key holds the claims' "sub", the
// account and the whole request, so an answer is only ever served to the
// subject RLS computed it for, and a new event always shows. Like the REST
// listing's first-page cache (internal/events FirstPages), what the check
// cannot see until the TTL passes is an event committed out of created_at
// order, an acknowledgement, or an event deleted by retention.
//
// A nil *Pages caches nothing.
type Pages struct {
	ttl      time.Duration
	maxBytes int
	now      func() time.Time

	mu      sync.Mutex
	entries map[pageKey]*page
	bytes   int

	// Observe, when set, is told of every lookup of a cacheable read.
	Observe func(hit bool)
}

type pageKey struct {
	subject  string // the claims' "sub": what the policies compare
	account  string
	query    string // the raw query string: select, filters, order, limit
	count    bool
	singular bool
}

type page struct {
	newest   uuid.UUID // zero: the subject saw no event
	filledAt time.Time
	res      Result
}

// NewPages returns a cache of answers at most ttl old holding at most
// maxBytes of bodies; a zero ttl or maxBytes returns nil (no cache).
func NewPages(ttl time.Duration, maxBytes int) *Pages {
	if ttl <= 0 || maxBytes <= 0 {
		return nil
	}
	return &Pages{ttl: ttl, maxBytes: maxBytes, now: time.Now, entries: map[pageKey]*page{}}
}

// cacheTable is the one table cached: its newest row is what validates.
const cacheTable = "events"

// newestSQL reads, under the caller's role and claims, the newest event the
// policies let the subject see. The account condition only picks the index;
// RLS decides what is visible.
const newestSQL = `SELECT coalesce((SELECT id FROM data_api.events WHERE account_id = $1::uuid
	ORDER BY created_at DESC, id DESC LIMIT 1), '00000000-0000-0000-0000-000000000000'::uuid)`

// candidate returns the entry for k if it is young enough to be worth
// validating.
func (c *Pages) candidate(k pageKey) *page {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || c.now().Sub(e.filledAt) >= c.ttl {
		return nil
	}
	return e
}

func (c *Pages) observe(hit bool) {
	if c.Observe != nil {
		c.Observe(hit)
	}
}

func (c *Pages) store(k pageKey, p *page) {
	size := len(p.res.Body) + len(k.query) + len(k.subject) + 64
	if size > c.maxBytes/8 {
		return // one answer may not crowd out the rest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[k]; ok {
		c.bytes -= len(old.res.Body) + len(k.query) + len(k.subject) + 64
		delete(c.entries, k)
	}
	for ek, e := range c.entries {
		if c.bytes+size <= c.maxBytes {
			break
		}
		c.bytes -= len(e.res.Body) + len(ek.query) + len(ek.subject) + 64
		delete(c.entries, ek)
	}
	c.entries[k] = p
	c.bytes += size
}

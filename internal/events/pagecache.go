package events

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// FirstPages caches the first page of accounts' event listings: the page
// dashboards and integrations poll (newest first, no since, no cursor).
//
// Every read first asks the database for the account's newest event, an
// index lookup of one row, and serves the cached page only if that event
// is still the one seen when the page was filled and the page is younger
// than the TTL. So a newly committed event is never missed. What the check
// cannot see is an event whose transaction commits after a newer event's
// (created_at is when an event was raised, not when it committed) or an
// event deleted by retention: those reach a cached page within the TTL.
//
// The cache holds at most maxBytes of rendered events; when full, entries
// are dropped in no particular order (Go map order), which costs nothing
// to track and suits a cache whose entries expire within seconds anyway.
type FirstPages struct {
	ttl      time.Duration
	maxBytes int
	now      func() time.Time

	mu      sync.Mutex
	entries map[firstPageKey]*firstPage
	bytes   int

	// Observe, when set, is told of every lookup: hit or not.
	Observe func(hit bool)
}

type firstPageKey struct {
	account uuid.UUID
	typ     string
	limit   int
}

type firstPage struct {
	newest   uuid.UUID // the account's newest event before the page was read; zero: none
	filledAt time.Time
	items    [][]byte
	next     *Cursor
	size     int
}

// NewFirstPages returns a cache of pages at most ttl old holding at most
// maxBytes of events. A zero ttl or maxBytes returns nil, which caches
// nothing.
func NewFirstPages(ttl time.Duration, maxBytes int) *FirstPages {
	if ttl <= 0 || maxBytes <= 0 {
		return nil
	}
	return &FirstPages{ttl: ttl, maxBytes: maxBytes, now: time.Now, entries: map[firstPageKey]*firstPage{}}
}

// cacheable reports whether f asks for a first page the cache keeps.
func (f ListFilter) cacheable() bool {
	return !f.AlertsOnly && f.Since == nil && f.After == nil && f.Order != OrderAsc
}

const newestEventSQL = "SELECT id FROM events WHERE account_id = $1 ORDER BY created_at DESC, id DESC LIMIT 1"

// ListRendered is events.ListRendered through the cache (for a first page;
// any other page goes straight to the database). A nil cache reads through.
func (c *FirstPages) ListRendered(ctx context.Context, db dbutil.Executor, f ListFilter) ([][]byte, *Cursor, error) {
	if c == nil || !f.cacheable() {
		return ListRendered(ctx, db, f)
	}
	var newest uuid.UUID
	if err := db.QueryRow(ctx, newestEventSQL, f.AccountID).Scan(&newest); err != nil && !dbutil.IsNotFound(err) {
		return nil, nil, fmt.Errorf("error checking the newest event: %w", err)
	}
	key := firstPageKey{account: f.AccountID, typ: f.Type, limit: max(f.Limit, 1)}
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[key]
	hit := ok && e.newest == newest && now.Sub(e.filledAt) < c.ttl
	c.mu.Unlock()
	if c.Observe != nil {
		c.Observe(hit)
	}
	if hit {
		return e.items, e.next, nil
	}
	// The newest event was read before the page: an event committed in
	// between is on the page but not recorded as seen, which only makes
	// the next read refill.
	items, next, err := ListRendered(ctx, db, f)
	if err != nil {
		return nil, nil, err
	}
	c.store(key, &firstPage{newest: newest, filledAt: now, items: items, next: next})
	return items, next, nil
}

func (c *FirstPages) store(key firstPageKey, p *firstPage) {
	for _, it := range p.items {
		p.size += len(it)
	}
	if p.size > c.maxBytes/8 {
		return // one page may not crowd out the rest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[key]; ok {
		c.bytes -= old.size
		delete(c.entries, key)
	}
	for k, e := range c.entries {
		if c.bytes+p.size <= c.maxBytes {
			break
		}
		c.bytes -= e.size
		delete(c.entries, k)
	}
	c.entries[key] = p
	c.bytes += p.size
}

// Bytes returns the size of the cached events.
func (c *FirstPages) Bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

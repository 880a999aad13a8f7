package providers

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// CacheTTL is how long an API process keeps a provider's row and opened
// config for its ingress route (like API keys, 4 s): a deleted provider or
// replaced verification material takes effect within it. A payload for a
// provider deleted meanwhile is not stored (404).
const CacheTTL = 4 * time.Second

// maxCached bounds the cache; it is cleared when full.
const maxCached = 10000

// Loaded is a provider with its opened config.
type Loaded struct {
	Row    dbsqlc.SendingProvider
	Config Config
}

// Cache holds recently used providers for the ingress route.
type Cache struct {
	Keyring *secretbox.Keyring

	mu      sync.Mutex
	entries map[uuid.UUID]cacheEntry
}

type cacheEntry struct {
	p       *Loaded
	expires time.Time
}

// Get returns the provider id (ErrNotFound when there is none), from the
// cache when fresh.
func (c *Cache) Get(ctx context.Context, db dbutil.Executor, id uuid.UUID, now time.Time) (*Loaded, error) {
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.p, nil
	}
	row, err := dbsqlc.New().ProviderGetForIngress(ctx, db, id)
	if dbutil.IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	cfg, err := Open(c.Keyring, &row)
	if err != nil {
		return nil, err
	}
	cfg.Prepare(row.Kind)
	p := &Loaded{Row: row, Config: cfg}
	c.mu.Lock()
	if c.entries == nil || len(c.entries) >= maxCached {
		c.entries = map[uuid.UUID]cacheEntry{}
	}
	c.entries[id] = cacheEntry{p: p, expires: now.Add(CacheTTL)}
	c.mu.Unlock()
	return p, nil
}

// Forget drops a provider (after this process changed or deleted it).
func (c *Cache) Forget(id uuid.UUID) {
	c.mu.Lock()
	delete(c.entries, id)
	c.mu.Unlock()
}

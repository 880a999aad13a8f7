// Package accounts holds the rules of an account's lifecycle that every
// adapter shares (the REST API, the data API, the dashboard, the jobs):
// its state beyond the API key (credentials changes, suspension,
// deletion), a short-lived per-process cache of it, and the batched purge
// of everything a deleted account owns.
package accounts

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// ErrNotFound is returned for an account that does not exist (any more).
var ErrNotFound = errors.New("account not found")

// State is what authentication needs to know of an account beyond its key
// or token.
type State struct {
	ID uuid.UUID
	// CredentialsChangedAt is the last password change: tokens and sessions
	// issued before it are refused. Nil when never changed.
	CredentialsChangedAt *time.Time
	// SuspendedAt is set while an admin has suspended the account.
	SuspendedAt     *time.Time
	SuspendedReason string
	// DeletedAt is set once deletion was asked for; the account_delete job
	// then removes everything, the row last.
	DeletedAt *time.Time
}

// Suspended reports whether an admin suspended the account.
func (s State) Suspended() bool { return s.SuspendedAt != nil }

// Deleting reports whether the account is being (or was) deleted.
func (s State) Deleting() bool { return s.DeletedAt != nil }

// IssuedBeforeCredentialsChange reports whether a token or session created
// at issuedAt predates the account's last credentials change, and so must
// be refused. JWT iat claims have whole seconds: a token whose iat is in
// the same second as the change counts as earlier (issuers wait for the
// next second, see WaitPastChange).
func (s State) IssuedBeforeCredentialsChange(issuedAt time.Time) bool {
	if s.CredentialsChangedAt == nil {
		return false
	}
	return issuedAt.Before(s.CredentialsChangedAt.Truncate(time.Second).Add(time.Second))
}

// SuspendedDetail is the 403 detail every adapter shows a suspended account.
func (s State) SuspendedDetail() string {
	d := "this account is suspended"
	if s.SuspendedReason != "" {
		d += ": " + s.SuspendedReason
	}
	return d + "; contact the operator of this mailwatch instance"
}

// Get reads an account's state; ErrNotFound when there is no such account.
func Get(ctx context.Context, db dbsqlc.DBTX, id uuid.UUID) (State, error) {
	row, err := dbsqlc.New().AccountState(ctx, db, id)
	if dbutil.IsNotFound(err) {
		return State{}, ErrNotFound
	}
	if err != nil {
		return State{}, fmt.Errorf("error reading account state: %w", err)
	}
	st := State{ID: row.ID, CredentialsChangedAt: row.CredentialsChangedAt, SuspendedAt: row.SuspendedAt, DeletedAt: row.DeletedAt}
	if row.SuspendedReason != nil {
		st.SuspendedReason = *row.SuspendedReason
	}
	return st, nil
}

// CredentialsChangedAt returns the account's last credentials change (nil:
// never). Session stores (the dashboard's sign-in sessions) refuse a
// session created before it. ErrNotFound when the account is gone.
func CredentialsChangedAt(ctx context.Context, db dbsqlc.DBTX, id uuid.UUID) (*time.Time, error) {
	st, err := Get(ctx, db, id)
	if err != nil {
		return nil, err
	}
	return st.CredentialsChangedAt, nil
}

// WaitPastChange sleeps, when the credentials changed in the current
// second, until the next second starts (at most one second), so that a
// token signed afterwards has an iat that IssuedBeforeCredentialsChange
// accepts.
func WaitPastChange(ctx context.Context, st State, now time.Time) error {
	if st.CredentialsChangedAt == nil {
		return nil
	}
	next := st.CredentialsChangedAt.Truncate(time.Second).Add(time.Second)
	if !now.Before(next) {
		return nil
	}
	t := time.NewTimer(next.Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CacheTTL bounds how long a process trusts a cached state: a suspension,
// a password change or a deletion made through another replica reaches
// every replica within it. The replica that made the change evicts at once.
const CacheTTL = 4 * time.Second

// cacheMax bounds the cache; it is cleared when full.
const cacheMax = 100_000

// Cache remembers account states for CacheTTL, so that a data-API page or
// a token issuance costs no extra query per request.
type Cache struct {
	now func() time.Time

	mu      sync.Mutex
	entries map[uuid.UUID]cachedState
}

type cachedState struct {
	st      State
	missing bool
	expires time.Time
}

// NewCache returns an empty cache; now may be nil (time.Now).
func NewCache(now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{now: now, entries: map[uuid.UUID]cachedState{}}
}

// Get returns the account's state, read through the cache. ErrNotFound
// when the account does not exist.
func (c *Cache) Get(ctx context.Context, db dbsqlc.DBTX, id uuid.UUID) (State, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[id]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		if e.missing {
			return State{}, ErrNotFound
		}
		return e.st, nil
	}
	st, err := Get(ctx, db, id)
	missing := errors.Is(err, ErrNotFound)
	if err != nil && !missing {
		return State{}, err
	}
	c.mu.Lock()
	if len(c.entries) >= cacheMax {
		clear(c.entries)
	}
	c.entries[id] = cachedState{st: st, missing: missing, expires: now.Add(CacheTTL)}
	c.mu.Unlock()
	return st, err
}

// Evict forgets an account's state at once (after changing it).
func (c *Cache) Evict(id uuid.UUID) {
	c.mu.Lock()
	delete(c.entries, id)
	c.mu.Unlock()
}

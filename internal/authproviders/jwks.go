package authproviders

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/google/uuid"
)

// MaxJWKSBytes caps a provider's JWK Set response (after any transfer
// decoding): real sets are a few kilobytes, 64 KiB leaves room for
// certificate chains. A response declaring more is refused before its body
// is read; a longer body is refused once the cap is passed.
const MaxJWKSBytes = 64 << 10

// ErrJWKSTooLarge is a JWK Set response over MaxJWKSBytes.
var ErrJWKSTooLarge = fmt.Errorf("the JWK Set is larger than %d bytes", MaxJWKSBytes)

// errJWKS wraps every failure to obtain a provider's JWK Set.
var errJWKS = errors.New("error fetching the JWK Set")

// jwksKey names a cached set: each account's providers have their own
// entries, so another account naming the same URL can neither spend an
// account's refresh budget nor evict its sets.
type jwksKey struct {
	account uuid.UUID
	url     string
}

// jwksCache holds parsed JWK Sets, bounded per account and per process.
// Its lock guards only the index and is never held across I/O; each
// entry fetches on its own, at most once at a time.
type jwksCache struct {
	client        *http.Client
	fetchTimeout  time.Duration
	refreshEvery  time.Duration
	unknownEvery  time.Duration
	retryEvery    time.Duration
	maxEntries    int
	maxPerAccount int
	now           func() time.Time

	mu         sync.Mutex
	base       context.Context
	stop       context.CancelFunc
	entries    map[jwksKey]*list.Element // of *jwksEntry
	lru        *list.List                // most recently used first
	perAccount map[uuid.UUID]int
}

// jwksEntry is one URL's set for one account.
type jwksEntry struct {
	key jwksKey

	mu        sync.Mutex
	set       keyfunc.Keyfunc // nil until a fetch succeeds
	fetchedAt time.Time       // of the set
	failedAt  time.Time       // of the last fetch that failed on its own (not abandoned)
	err       error           // of that fetch
	flight    *jwksFlight     // the fetch in progress, if any
}

// jwksFlight is an entry's fetch in progress. Requests that need its
// result wait on done within their own context; when the last of them
// leaves, the fetch is cancelled (a background refresh nobody waits for
// runs to its timeout).
type jwksFlight struct {
	done       chan struct{}
	err        error
	abandoned  bool // cancelled because no request waited any more
	waiters    int
	background bool
	cancel     context.CancelFunc
}

func newJWKSCache(client *http.Client, fetchTimeout, refreshEvery, unknownEvery time.Duration, maxEntries, maxPerAccount int) *jwksCache {
	base, stop := context.WithCancel(context.Background())
	return &jwksCache{
		client: client, fetchTimeout: fetchTimeout, refreshEvery: refreshEvery, unknownEvery: unknownEvery,
		retryEvery: 5 * time.Second, maxEntries: maxEntries, maxPerAccount: maxPerAccount, now: time.Now,
		base: base, stop: stop, entries: map[jwksKey]*list.Element{}, lru: list.New(), perAccount: map[uuid.UUID]int{},
	}
}

// close cancels every fetch in progress.
func (c *jwksCache) close() { c.stop() }

// entry returns key's entry, creating it (and evicting the least recently
// used entry of the account, or of the process, past the bounds).
func (c *jwksCache) entry(key jwksKey) *jwksEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.lru.MoveToFront(el)
		return el.Value.(*jwksEntry)
	}
	if c.perAccount[key.account] >= c.maxPerAccount {
		for el := c.lru.Back(); el != nil; el = el.Prev() {
			if el.Value.(*jwksEntry).key.account == key.account {
				c.evict(el)
				break
			}
		}
	}
	if c.lru.Len() >= c.maxEntries {
		c.evict(c.lru.Back())
	}
	e := &jwksEntry{key: key}
	c.entries[key] = c.lru.PushFront(e)
	c.perAccount[key.account]++
	return e
}

// evict drops el; c.mu is held. A fetch nobody waits for is cancelled;
// requests waiting on one keep their result.
func (c *jwksCache) evict(el *list.Element) {
	e := c.lru.Remove(el).(*jwksEntry)
	delete(c.entries, e.key)
	if c.perAccount[e.key.account]--; c.perAccount[e.key.account] <= 0 {
		delete(c.perAccount, e.key.account)
	}
	e.mu.Lock()
	if f := e.flight; f != nil && f.waiters == 0 {
		f.cancel()
	}
	e.mu.Unlock()
}

// keys returns account's set at url for a token of key id kid. A cached
// set is returned at once (a stale one is refreshed in the background);
// the first fetch, and a refresh for a kid the set lacks (at most once per
// unknownEvery), are waited for within ctx.
func (c *jwksCache) keys(ctx context.Context, account uuid.UUID, url, kid string) (keyfunc.Keyfunc, error) {
	e := c.entry(jwksKey{account: account, url: url})
	refreshed := false
	for {
		now := c.now()
		e.mu.Lock()
		set, f := e.set, e.flight
		switch {
		case set != nil && (refreshed || hasKey(ctx, set, kid)):
			if f == nil && now.Sub(e.fetchedAt) >= c.refreshEvery && now.Sub(e.failedAt) >= c.retryEvery {
				c.start(e, true)
			}
			e.mu.Unlock()
			return set, nil
		case f != nil:
			// Join the fetch in progress.
		case now.Sub(e.failedAt) < c.retryEvery:
			err := e.err
			e.mu.Unlock()
			if set != nil {
				return set, nil
			}
			return nil, err
		case set != nil && now.Sub(e.fetchedAt) < c.unknownEvery:
			// A kid the set lacks, but the set is recent: no refetch.
			e.mu.Unlock()
			return set, nil
		default:
			f = c.start(e, false)
		}
		f.waiters++
		e.mu.Unlock()
		if err := c.await(ctx, e, f); err != nil {
			return nil, err
		}
		switch {
		case f.err == nil:
			refreshed = true
		case c.base.Err() != nil:
			return nil, fmt.Errorf("%w: the verifier is closed", errJWKS)
		case !f.abandoned:
			e.mu.Lock()
			set = e.set
			e.mu.Unlock()
			if set != nil {
				return set, nil // the kid stays unknown
			}
			return nil, f.err
		}
		// A fetch its other requests left, joined as it was cancelled:
		// start again.
	}
}

func hasKey(ctx context.Context, set keyfunc.Keyfunc, kid string) bool {
	_, err := set.Storage().KeyRead(ctx, kid)
	return err == nil
}

// start begins e's fetch; e.mu is held.
func (c *jwksCache) start(e *jwksEntry, background bool) *jwksFlight {
	ctx, cancel := context.WithTimeout(c.base, c.fetchTimeout)
	f := &jwksFlight{done: make(chan struct{}), background: background, cancel: cancel}
	e.flight = f
	go func() {
		set, err := c.fetch(ctx, e.key.url)
		abandoned := err != nil && errors.Is(ctx.Err(), context.Canceled)
		cancel()
		now := c.now()
		e.mu.Lock()
		switch {
		case err == nil:
			e.set, e.fetchedAt, e.failedAt, e.err = set, now, time.Time{}, nil
		case !abandoned:
			e.failedAt, e.err = now, err
		}
		f.err, f.abandoned = err, abandoned
		e.flight = nil
		e.mu.Unlock()
		close(f.done)
	}()
	return f
}

// await waits for f within ctx; leaving early gives up this request's
// interest in f, and the last request to leave cancels it.
func (c *jwksCache) await(ctx context.Context, e *jwksEntry, f *jwksFlight) error {
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		e.mu.Lock()
		f.waiters--
		if f.waiters == 0 && !f.background {
			f.cancel()
		}
		e.mu.Unlock()
		return fmt.Errorf("%w: %w", errJWKS, ctx.Err())
	}
}

// fetch reads and parses the JWK Set at url within ctx and MaxJWKSBytes.
func (c *jwksCache) fetch(ctx context.Context, url string) (keyfunc.Keyfunc, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errJWKS, url, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errJWKS, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w %s: HTTP status %d", errJWKS, url, resp.StatusCode)
	}
	if resp.ContentLength > MaxJWKSBytes {
		return nil, fmt.Errorf("%w %s: %w (Content-Length %d)", errJWKS, url, ErrJWKSTooLarge, resp.ContentLength)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errJWKS, url, err)
	}
	if len(body) > MaxJWKSBytes {
		return nil, fmt.Errorf("%w %s: %w", errJWKS, url, ErrJWKSTooLarge)
	}
	var raw jwkset.JWKSMarshal
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("%w %s: not a JWK Set: %w", errJWKS, url, err)
	}
	store := jwkset.NewMemoryStorage()
	for _, m := range raw.Keys {
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if errors.Is(err, jwkset.ErrUnsupportedKey) {
			continue // as jwkset's own HTTP storage: a key of an unknown type is skipped
		}
		if err != nil {
			return nil, fmt.Errorf("%w %s: %w", errJWKS, url, err)
		}
		if err := store.KeyWrite(ctx, jwk); err != nil {
			return nil, fmt.Errorf("%w %s: %w", errJWKS, url, err)
		}
	}
	kf, err := keyfunc.New(keyfunc.Options{Ctx: c.base, Storage: store})
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", errJWKS, url, err)
	}
	return kf, nil
}

package webhook

import (
	"container/list"
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/fairwait"
)

// Fairness between tenants. One pool of workers (WEBHOOK_CONCURRENCY)
// pushes for every account; without a further bound, one account whose
// endpoints answer slowly would hold every worker and every other
// account's pushes would wait behind it. So a push is also counted against
// its account and against its destination host, and one over either bound
// does not go out: its job waits (a River snooze, which uses no attempt)
// and the worker it ran on takes another push. A slow endpoint therefore
// costs its own account, and those sharing its host, a queue; it costs the
// others nothing.
//
// The bounds hold per worker process, as WEBHOOK_CONCURRENCY does. They
// count pushes in flight (from just before the request to its end), not
// jobs: a fast endpoint's pushes are short, so even a busy account rarely
// reaches its bound, and only slow ones are held back.
const (
	// DefaultAccountConcurrency is WEBHOOK_ACCOUNT_CONCURRENCY's default:
	// a quarter of WEBHOOK_CONCURRENCY's. On a loaded 2-core machine a
	// push to a local receiver is in flight for tens of milliseconds, and
	// one account draining a backlog kept about two thirds of its unbounded
	// rate at 50 and a third at 20.
	DefaultAccountConcurrency = 50
	// DefaultHostConcurrency is WEBHOOK_HOST_CONCURRENCY's default: half
	// of WEBHOOK_CONCURRENCY's, since unrelated accounts may share a
	// popular receiving service.
	DefaultHostConcurrency = 100

	// AdmitWait is how long a push over a bound may wait for a slot,
	// holding its worker, before it is put back: long enough that an
	// account at its bound with fast endpoints hands its slots from one
	// push to the next without leaving workers idle, short enough that a
	// slow account's line costs others little.
	AdmitWait = 250 * time.Millisecond

	// FairWaitBase is how long a push over a bound first waits before its
	// job looks again; each further wait of the same job doubles it, up to
	// FairWaitMax, so that a long queue behind a slow endpoint is looked at
	// a few times a second in all rather than in a busy loop.
	FairWaitBase = 500 * time.Millisecond
	// FairWaitMax caps one wait.
	FairWaitMax = 10 * time.Second
	// fairWaitJitter is the relative spread of a wait (±25%), so that the
	// pushes held back together do not all come back together.
	fairWaitJitter = 0.25
)

// Limits bound the pushes in flight at once. A zero field means its
// default.
type Limits struct {
	// PerAccount bounds one account's pushes (WEBHOOK_ACCOUNT_CONCURRENCY).
	PerAccount int
	// PerHost bounds the pushes to one destination host name, whatever the
	// port or the account (WEBHOOK_HOST_CONCURRENCY).
	PerHost int
}

// Scopes of a BusyError.
const (
	ScopeAccount = "account"
	ScopeHost    = "host"
)

// BusyError says a push must wait: its account's or its host's pushes in
// flight already reach their bound.
type BusyError struct {
	// Scope is ScopeAccount or ScopeHost.
	Scope string
	// Host is the destination host name (ScopeHost).
	Host string
	// Limit is the bound that was reached.
	Limit int
}

func (e *BusyError) Error() string {
	if e.Scope == ScopeHost {
		return fmt.Sprintf("%d pushes to %s are already in flight (WEBHOOK_HOST_CONCURRENCY)", e.Limit, e.Host)
	}
	return fmt.Sprintf("%d pushes of this account are already in flight (WEBHOOK_ACCOUNT_CONCURRENCY)", e.Limit)
}

// Gate counts the pushes in flight in this process per account and per
// destination host, and admits a push only while both counts are under
// their bounds. A push over a bound may wait a moment for a slot of its key
// to free (Acquire's wait), in a line at most as long as the bound and only
// behind pushes that are moving, so that an account at its bound with fast
// endpoints keeps its pushes going without leaving workers idle, while one
// whose pushes are held by a slow endpoint is refused at once.
// Its memory is bounded by the pushes in flight and waiting: a key with
// neither is dropped. It is safe for concurrent use.
type Gate struct {
	limits   Limits
	mu       sync.Mutex
	accounts map[uuid.UUID]*slots
	hosts    map[string]*slots
	now      func() time.Time // tests set it
}

// slots is one key's pushes in flight and its line of waiting pushes.
type slots struct {
	inFlight int
	waiting  list.List // of *waiter, first come first woken
	// lastEnd is when a push of the key last ended. A line forms only
	// behind pushes that are moving (one ended within AdmitWait): behind
	// pushes held by a slow endpoint, waiting would only hold workers.
	lastEnd time.Time
}

type waiter struct {
	wake  chan struct{} // a value when a slot of the key freed
	woken bool          // set, under the gate's lock, with the value
}

// NewGate returns a gate with these bounds (zero fields take the defaults).
func NewGate(l Limits) *Gate {
	if l.PerAccount <= 0 {
		l.PerAccount = DefaultAccountConcurrency
	}
	if l.PerHost <= 0 {
		l.PerHost = DefaultHostConcurrency
	}
	return &Gate{limits: l, accounts: map[uuid.UUID]*slots{}, hosts: map[string]*slots{}, now: time.Now}
}

// Limits returns the gate's bounds, defaults applied.
func (g *Gate) Limits() Limits { return g.limits }

// AccountBusy returns a *BusyError when the account's pushes in flight
// fill its bound and a push of it could not wait in line (the line is full,
// or its pushes are not moving), and nil otherwise. It takes nothing: it
// lets a worker put a push back before doing any work for it; Acquire
// decides.
func (g *Gate) AccountBusy(account uuid.UUID) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.accounts[account]; s != nil && s.inFlight >= g.limits.PerAccount && !g.canWait(s, g.limits.PerAccount) {
		return &BusyError{Scope: ScopeAccount, Limit: g.limits.PerAccount}
	}
	return nil
}

// canWait reports whether a push may join the line of s: it is shorter
// than the bound, and a push of the key ended within AdmitWait. The caller
// holds g.mu.
func (g *Gate) canWait(s *slots, limit int) bool {
	return s.waiting.Len() < limit && g.now().Sub(s.lastEnd) < AdmitWait
}

// Admit is Acquire without a wait.
func (g *Gate) Admit(account uuid.UUID, rawURL string) (release func(), err error) {
	return g.Acquire(context.Background(), account, rawURL, 0)
}

// Acquire counts a push of account to rawURL in flight. When the account's
// or the host's bound is reached, it waits up to wait (or until ctx ends)
// for a slot, in a line no longer than that bound and only while the key's
// pushes are moving (one ended within AdmitWait); it returns a *BusyError,
// having counted nothing, when no slot came. The returned release ends the
// push's count; calling it more than once is harmless.
func (g *Gate) Acquire(ctx context.Context, account uuid.UUID, rawURL string, wait time.Duration) (release func(), err error) {
	host := Host(rawURL)
	deadline := time.Now().Add(wait)
	g.mu.Lock()
	defer g.mu.Unlock()
	wokenBy := "" // the scope of the line this push was woken from
	for {
		a, h := g.slotsOf(account, host)
		var (
			line *slots
			busy *BusyError
		)
		switch {
		case a.inFlight >= g.limits.PerAccount:
			line, busy = a, &BusyError{Scope: ScopeAccount, Limit: g.limits.PerAccount}
		case h.inFlight >= g.limits.PerHost:
			line, busy = h, &BusyError{Scope: ScopeHost, Host: host, Limit: g.limits.PerHost}
		default:
			a.inFlight++
			h.inFlight++
			var once sync.Once
			return func() { once.Do(func() { g.release(account, host) }) }, nil
		}
		// Woken for a slot this push cannot use (the other key is full, or
		// another push took it first): the next in that line may.
		switch wokenBy {
		case ScopeAccount:
			if a.inFlight < g.limits.PerAccount {
				wakeOne(a)
			}
		case ScopeHost:
			if h.inFlight < g.limits.PerHost {
				wakeOne(h)
			}
		}
		limit := busy.Limit
		left := time.Until(deadline)
		if left <= 0 || !g.canWait(line, limit) || ctx.Err() != nil {
			g.drop(account, host)
			return nil, busy
		}
		w := &waiter{wake: make(chan struct{}, 1)}
		el := line.waiting.PushBack(w)
		g.mu.Unlock()
		timer := time.NewTimer(left)
		select {
		case <-w.wake:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
		g.mu.Lock()
		wokenBy = ""
		if w.woken {
			wokenBy = busy.Scope
		} else {
			line.waiting.Remove(el)
		}
	}
}

// slotsOf returns the entries of an account and a host, creating them.
func (g *Gate) slotsOf(account uuid.UUID, host string) (*slots, *slots) {
	a := g.accounts[account]
	if a == nil {
		a = &slots{}
		g.accounts[account] = a
	}
	h := g.hosts[host]
	if h == nil {
		h = &slots{}
		g.hosts[host] = h
	}
	return a, h
}

// drop removes the entries of an account and a host that hold nothing.
// The caller holds g.mu.
func (g *Gate) drop(account uuid.UUID, host string) {
	if a := g.accounts[account]; a != nil && a.inFlight <= 0 && a.waiting.Len() == 0 {
		delete(g.accounts, account)
	}
	if h := g.hosts[host]; h != nil && h.inFlight <= 0 && h.waiting.Len() == 0 {
		delete(g.hosts, host)
	}
}

// wakeOne wakes the first push waiting for a slot of s, if any. The caller
// holds g.mu.
func wakeOne(s *slots) {
	if el := s.waiting.Front(); el != nil {
		w := s.waiting.Remove(el).(*waiter)
		w.woken = true
		w.wake <- struct{}{}
	}
}

func (g *Gate) release(account uuid.UUID, host string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	a, h := g.slotsOf(account, host)
	a.inFlight--
	h.inFlight--
	a.lastEnd, h.lastEnd = g.now(), g.now()
	wakeOne(a)
	wakeOne(h)
	g.drop(account, host)
}

// InFlight returns the pushes the gate counts for an account and for the
// host of rawURL.
func (g *Gate) InFlight(account uuid.UUID, rawURL string) (ofAccount, toHost int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if a := g.accounts[account]; a != nil {
		ofAccount = a.inFlight
	}
	if h := g.hosts[Host(rawURL)]; h != nil {
		toHost = h.inFlight
	}
	return ofAccount, toHost
}

// Host returns the name pushes to rawURL are counted under: the URL's host
// in lower case, without port, brackets or a final dot, so that one server
// is one host whatever port or spelling a subscription uses. A URL that
// does not parse counts under its whole text (Send refuses it anyway).
func Host(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return rawURL
	}
	return strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
}

// FairWait returns how long a push held back by the gate waits before its
// job looks again, given how many times the same job already waited:
// FairWaitBase doubled per earlier wait, at most FairWaitMax, with ±25%
// uniform jitter. rnd may be nil for the shared math/rand/v2 source.
func FairWait(waits int, rnd Float64Source) time.Duration {
	return fairwait.Delay(waits, FairWaitBase, FairWaitMax, fairWaitJitter, rnd)
}

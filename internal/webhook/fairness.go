package webhook

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
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
	// a tenth of WEBHOOK_CONCURRENCY's.
	DefaultAccountConcurrency = 20
	// DefaultHostConcurrency is WEBHOOK_HOST_CONCURRENCY's default: a
	// quarter of WEBHOOK_CONCURRENCY's, since unrelated accounts may share
	// a popular receiving service.
	DefaultHostConcurrency = 50

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
// their bounds. Its memory is bounded by the pushes in flight: a key whose
// count falls to zero is dropped. It is safe for concurrent use.
type Gate struct {
	limits   Limits
	mu       sync.Mutex
	accounts map[uuid.UUID]int
	hosts    map[string]int
}

// NewGate returns a gate with these bounds (zero fields take the defaults).
func NewGate(l Limits) *Gate {
	if l.PerAccount <= 0 {
		l.PerAccount = DefaultAccountConcurrency
	}
	if l.PerHost <= 0 {
		l.PerHost = DefaultHostConcurrency
	}
	return &Gate{limits: l, accounts: map[uuid.UUID]int{}, hosts: map[string]int{}}
}

// Limits returns the gate's bounds, defaults applied.
func (g *Gate) Limits() Limits { return g.limits }

// AccountBusy returns a *BusyError when the account's pushes in flight
// already reach its bound, and nil otherwise. It takes nothing: it lets a
// worker put a push back before doing any work for it, and Admit decides.
func (g *Gate) AccountBusy(account uuid.UUID) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.accounts[account] >= g.limits.PerAccount {
		return &BusyError{Scope: ScopeAccount, Limit: g.limits.PerAccount}
	}
	return nil
}

// Admit counts a push of account to rawURL in flight, or returns a
// *BusyError and counts nothing when the account's or the host's bound is
// reached. The returned release ends the push's count; calling it more
// than once is harmless.
func (g *Gate) Admit(account uuid.UUID, rawURL string) (release func(), err error) {
	host := Host(rawURL)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.accounts[account] >= g.limits.PerAccount {
		return nil, &BusyError{Scope: ScopeAccount, Limit: g.limits.PerAccount}
	}
	if g.hosts[host] >= g.limits.PerHost {
		return nil, &BusyError{Scope: ScopeHost, Host: host, Limit: g.limits.PerHost}
	}
	g.accounts[account]++
	g.hosts[host]++
	var once sync.Once
	return func() { once.Do(func() { g.release(account, host) }) }, nil
}

func (g *Gate) release(account uuid.UUID, host string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.accounts[account]--; g.accounts[account] <= 0 {
		delete(g.accounts, account)
	}
	if g.hosts[host]--; g.hosts[host] <= 0 {
		delete(g.hosts, host)
	}
}

// InFlight returns the pushes the gate counts for an account and for the
// host of rawURL.
func (g *Gate) InFlight(account uuid.UUID, rawURL string) (ofAccount, toHost int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.accounts[account], g.hosts[Host(rawURL)]
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
	d := FairWaitBase
	for i := 0; i < waits && d < FairWaitMax; i++ {
		d *= 2
	}
	d = min(d, FairWaitMax)
	var r float64
	if rnd != nil {
		r = rnd.Float64()
	} else {
		r = rand.Float64()
	}
	factor := 1 - fairWaitJitter + 2*fairWaitJitter*r
	return time.Duration(float64(d) * factor).Round(time.Millisecond)
}

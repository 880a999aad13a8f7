package fairwait

import (
	"encoding/json"
	"fmt"
	"sync"
)

// BusyError says a job must wait: the jobs of its tenant running in this
// process already reach the bound.
type BusyError struct {
	// Limit is the bound that was reached.
	Limit int
	// What names the jobs ("payload jobs"), Setting the variable that sets
	// the bound, for the message.
	What, Setting string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("%d %s of this account are already running (%s)", e.Limit, e.What, e.Setting)
}

// Gate counts the jobs running in this process per tenant key and admits
// one only while its key's count is under the bound: one tenant's flood
// takes at most that many of a queue's workers, and the others' jobs run
// beside it. A job refused does no work: its worker snoozes it (River uses
// no attempt for a snooze) for Delay, counting its waits in its metadata
// (Waits). The count is per process, like a queue's MaxWorkers. Memory is
// bounded by the jobs running: a key with none is dropped. It is safe for
// concurrent use.
type Gate[K comparable] struct {
	limit         int
	what, setting string
	mu            sync.Mutex
	running       map[K]int
	// observe, when set, is called under the lock with a key's count
	// after each admission (tests record the largest).
	observe func(key K, running int)
}

// NewGate returns a gate admitting at most limit jobs of one key at once
// (at least one); what and setting name the jobs and the variable that
// sets limit in its BusyError.
func NewGate[K comparable](limit int, what, setting string) *Gate[K] {
	return &Gate[K]{limit: max(1, limit), what: what, setting: setting, running: map[K]int{}}
}

// Limit returns the gate's bound.
func (g *Gate[K]) Limit() int { return g.limit }

// Observe sets a function called, under the gate's lock, with a key's
// running count after each admission; for tests, nil for none.
func (g *Gate[K]) Observe(f func(key K, running int)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.observe = f
}

// Admit counts a job of key running and returns its release, or a
// *BusyError, having counted nothing, when the key's running jobs reach
// the bound. Calling release more than once is harmless.
func (g *Gate[K]) Admit(key K) (release func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.running[key]
	if n >= g.limit {
		return nil, &BusyError{Limit: g.limit, What: g.what, Setting: g.setting}
	}
	g.running[key] = n + 1
	if g.observe != nil {
		g.observe(key, n+1)
	}
	var once sync.Once
	return func() { once.Do(func() { g.release(key) }) }, nil
}

func (g *Gate[K]) release(key K) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := g.running[key] - 1; n > 0 {
		g.running[key] = n
	} else {
		delete(g.running, key)
	}
}

// Running returns how many jobs of key the gate counts.
func (g *Gate[K]) Running(key K) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running[key]
}

// Share is the default bound of one tenant on a queue of workers
// MaxWorkers: half of them, rounded up, at least one. One tenant may then
// take half a worker process's queue, and the other half stays free for
// every other tenant.
func Share(workers int) int {
	return max(1, (workers+1)/2)
}

// Waits returns how many times a job waited for its turn, from the count
// its worker keeps in the job's metadata under key (zero when it never
// waited or the metadata is unreadable).
func Waits(metadata []byte, key string) int {
	var m map[string]json.RawMessage
	if json.Unmarshal(metadata, &m) != nil {
		return 0
	}
	var n int
	if json.Unmarshal(m[key], &n) != nil {
		return 0
	}
	return n
}

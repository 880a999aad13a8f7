package providers

import (
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/fairwait"
)

// Fairness between tenants. The ingress queues one provider_payload job
// per account and flush (PayloadArgs.AccountID), and every job of the
// default queue shares one pool of workers (WORKER_CONCURRENCY). Without a
// further bound, one account's flood of webhooks would fill that pool and
// every other account's bounces would wait behind it, and with them its
// bounce counts, spike alerts and health caps. So a worker process runs at
// most AccountConcurrency jobs of one account at once; a job over that
// bound does no work: it is snoozed (a River snooze uses no attempt) and
// the worker takes the next job, often another account's.
//
// The bound is a count of jobs in this process, like the queue's own
// MaxWorkers, not a shared count: each worker process gives one account at
// most its bound. Normalising is short database work, so unlike webhook
// pushes (internal/webhook's gate) a job over the bound does not wait in
// line for a slot: it is put back at once, and comes back after a short,
// growing, jittered delay (FairWait).
const (
	// FairWaitBase is how long a job over its account's bound first waits
	// before it is looked at again; each further wait of the same job
	// doubles it, up to FairWaitMax. A batch is normalised in tens of
	// milliseconds, so a flood's held-back jobs come back a few times a
	// second, without a busy loop on the queue.
	FairWaitBase = 250 * time.Millisecond
	// FairWaitMax caps one wait: a job of a long backlog is looked at
	// again at least this often.
	FairWaitMax = 5 * time.Second
	// fairWaitJitter is the relative spread of a wait (±25%), so that the
	// jobs held back together do not all come back together.
	fairWaitJitter = 0.25

	// MetadataFairWaits is the job metadata key counting how many times a
	// job waited for its account's turn.
	MetadataFairWaits = "provider_fair_waits"
)

// DefaultAccountConcurrency is the bound of a gate made without one:
// AccountConcurrency of WORKER_CONCURRENCY's default (100).
const DefaultAccountConcurrency = 50

// AccountConcurrency returns PROVIDER_ACCOUNT_CONCURRENCY's default for a
// queue of workers MaxWorkers: fairwait.Share of them.
func AccountConcurrency(workers int) int { return fairwait.Share(workers) }

// BusyError says a job must wait: its account's jobs running in this
// process already reach the bound.
type BusyError = fairwait.BusyError

// Gate counts the provider_payload jobs running in this process per
// account (fairwait.Gate).
type Gate = fairwait.Gate[uuid.UUID]

// NewGate returns a gate admitting at most perAccount jobs of one account
// at once; zero or less means DefaultAccountConcurrency.
func NewGate(perAccount int) *Gate {
	if perAccount <= 0 {
		perAccount = DefaultAccountConcurrency
	}
	return fairwait.NewGate[uuid.UUID](perAccount, "payload jobs", "PROVIDER_ACCOUNT_CONCURRENCY")
}

// FairWait returns how long a job held back by the gate waits before it is
// looked at again, given how many times it already waited: FairWaitBase
// doubled per earlier wait, at most FairWaitMax, with ±25% uniform jitter.
// rnd may be nil for the shared math/rand/v2 source.
func FairWait(waits int, rnd interface{ Float64() float64 }) time.Duration {
	return fairwait.Delay(waits, FairWaitBase, FairWaitMax, fairWaitJitter, rnd)
}

// FairWaits returns how many times a job waited for its account's turn,
// from its metadata (zero when it never did or the metadata is unreadable).
func FairWaits(metadata []byte) int { return fairwait.Waits(metadata, MetadataFairWaits) }

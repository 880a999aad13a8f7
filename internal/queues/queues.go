// Package queues names mailwatch's River queues and holds what an operator
// does to them: count their jobs, delete finished ones, run a task now.
// Capability packages declare their jobs' queues from here, and the worker
// client (package jobs) configures the same names.
package queues

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Queue names. Each role can be scaled on its own; a worker process works
// every queue unless told otherwise.
const (
	Default     = river.QueueDefault
	Maintenance = "maintenance"
	Webhooks    = "webhooks"
	DNS         = "dns"
	// Transport holds the MX transport probes (internal/transport): slow,
	// network-bound jobs kept apart from the DNS checks.
	Transport = "transport"
	// Reputation runs the DNS blocklist checks (internal/reputation), apart
	// from the DNS checks so that a slow list never delays them.
	Reputation = "reputation"
	// Analysis runs the deliverability analysis of received messages
	// (internal/deliverability): DNS-bound, kept apart from the event
	// fan-out of the default queue.
	Analysis = "analysis"
)

// All lists every queue a worker works by default.
var All = []string{Default, Maintenance, Webhooks, DNS, Transport, Reputation, Analysis}

// ActiveStates are the states in which a job counts as "already queued"
// for a run-now request: River's required unique states plus retryable.
var ActiveStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateRetryable,
	rivertype.JobStateScheduled,
}

// RunNowOpts are the insert options of a maintenance task run by hand: a
// task already queued or running is not queued twice (its job is
// returned), and the periodic schedule's own uniqueness is not in the way.
func RunNowOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: Maintenance, UniqueOpts: river.UniqueOpts{ByState: ActiveStates}}
}

// VacuumAfter is how long a finished River job (completed, cancelled or
// discarded) is kept before VacuumArgs deletes it. River's own cleaner
// deletes them after a day (a week for discarded ones); the task clears
// them sooner on demand, e.g. after a burst.
const VacuumAfter = time.Hour

// VacuumArgs deletes finished River jobs older than VacuumAfter (the
// maintenance task vacuum-queues). It deletes rows only; Postgres'
// autovacuum reclaims the space, so no VACUUM runs under a job.
type VacuumArgs struct{}

// Kind implements river.JobArgs.
func (VacuumArgs) Kind() string { return "queue_vacuum" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (VacuumArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: Maintenance} }

// Vacuum deletes finished jobs finalized before cutoff, batch rows per
// statement, and returns how many it deleted.
func Vacuum(ctx context.Context, db dbutil.Executor, cutoff time.Time, batch int) (int64, error) {
	var total int64
	for {
		tag, err := db.Exec(ctx, `DELETE FROM river_job WHERE id = ANY(ARRAY(
    SELECT id FROM river_job WHERE state IN ('completed', 'cancelled', 'discarded') AND finalized_at < $1 LIMIT $2))`, cutoff, batch)
		if err != nil {
			return total, fmt.Errorf("error deleting finished jobs: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() == 0 {
			return total, nil
		}
	}
}

// Stat is the number of jobs of one queue in one state.
type Stat struct {
	Queue string
	State string
	Count int64
	// OldestAvailableAt is the scheduled time of the oldest available job
	// (state available only).
	OldestAvailableAt *time.Time
}

// Stats counts the jobs of every queue by state.
func Stats(ctx context.Context, db dbutil.Executor) ([]Stat, error) {
	rows, err := db.Query(ctx, `SELECT queue, state::text, count(*),
       min(scheduled_at) FILTER (WHERE state = 'available')
FROM river_job GROUP BY queue, state ORDER BY queue, state`)
	if err != nil {
		return nil, fmt.Errorf("error counting jobs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Stat, error) {
		var s Stat
		err := r.Scan(&s.Queue, &s.State, &s.Count, &s.OldestAvailableAt)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("error counting jobs: %w", err)
	}
	return out, nil
}

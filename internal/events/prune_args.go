package events

import (
	"time"

	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/queues"
)

// PruneArgs deletes events older than EVENT_RETENTION_DAYS, or than the
// account's plan's shorter retention, keeping unacknowledged alerts
// (Prune, PruneForPlan). The worker is jobs.EventPruneWorker.
type PruneArgs struct{}

// Kind implements river.JobArgs.
func (PruneArgs) Kind() string { return "event_prune" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (PruneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: 30 * time.Minute}}
}

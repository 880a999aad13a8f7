package partitions

import (
	"time"

	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/queues"
)

// MaintainArgs runs Maintain: the partitions ahead are created and the
// expired ones dropped. The worker is jobs.PartitionMaintainWorker; it runs
// hourly and at every worker's start, so a new database has its current
// partitions as soon as a worker runs.
type MaintainArgs struct{}

// Kind implements river.JobArgs.
func (MaintainArgs) Kind() string { return "partition_maintain" }

// InsertOpts implements river.JobArgsWithInsertOpts: one run at a time
// (Maintain also serialises its changes with an advisory lock).
func (MaintainArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: 30 * time.Minute}}
}

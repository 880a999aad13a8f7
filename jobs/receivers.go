package jobs

import "github.com/riverqueue/river"

// addReceiverWorkers registers this feature's workers; they land with the receivers issue.
func addReceiverWorkers(w *river.Workers, deps Deps) {}

// receiverPeriodicJobs returns this feature's schedules.
func receiverPeriodicJobs(deps Deps) []*river.PeriodicJob { return nil }

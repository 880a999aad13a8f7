package jobs

import "github.com/riverqueue/river"

// addEventWorkers registers this feature's workers; they land with the events issue.
func addEventWorkers(w *river.Workers, deps Deps) {}

// eventPeriodicJobs returns this feature's schedules.
func eventPeriodicJobs(deps Deps) []*river.PeriodicJob { return nil }

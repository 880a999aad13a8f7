package jobs

import "github.com/riverqueue/river"

// addDomainWorkers registers this feature's workers; they land with the domains issue.
func addDomainWorkers(w *river.Workers, deps Deps) {}

// domainPeriodicJobs returns this feature's schedules.
func domainPeriodicJobs(deps Deps) []*river.PeriodicJob { return nil }

package jobs

import "github.com/riverqueue/river"

// addWebhookWorkers registers this feature's workers; they land with the webhook delivery issue.
func addWebhookWorkers(w *river.Workers, deps Deps) {}

// webhookPeriodicJobs returns this feature's schedules.
func webhookPeriodicJobs(deps Deps) []*river.PeriodicJob { return nil }

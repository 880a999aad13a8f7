package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/reports"
)

// SubdomainLookupWorker works reports.SubdomainLookupArgs.
type SubdomainLookupWorker struct {
	river.WorkerDefaults[reports.SubdomainLookupArgs]
	deps Deps
}

// Timeout bounds one run: at most reports.MaxSubdomainLookups lookups of
// a few seconds each.
func (w *SubdomainLookupWorker) Timeout(*river.Job[reports.SubdomainLookupArgs]) time.Duration {
	return 2 * time.Minute
}

// Work looks up the domain's subdomains due for it. A domain deleted
// meanwhile has none left.
func (w *SubdomainLookupWorker) Work(ctx context.Context, job *river.Job[reports.SubdomainLookupArgs]) error {
	looked, missing, err := reportService(w.deps).LookUpSubdomains(ctx, job.Args.DomainID, job.Args.Domain)
	if err != nil {
		return err
	}
	return river.RecordOutput(ctx, map[string]int{"looked_up": looked, "nonexistent": missing})
}

package reports

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/queues"
)

// SummaryDelay is how long after a new aggregate report its domain's
// sources summary is computed: the reports of a burst (an organisation's
// daily batch, a reparse) share one computation.
const SummaryDelay = 30 * time.Second

// SummaryArgs computes a domain's sources summary of the readiness window
// ahead of its reads (Service.Warm), after a new or reparsed aggregate
// report changed its daily rows: the listing, the guidance and the domain
// page then read it stored instead of the first of them summing live.
type SummaryArgs struct {
	DomainID uuid.UUID `json:"domain_id"`
}

// Kind implements river.JobArgs.
func (SummaryArgs) Kind() string { return "dmarc_source_summary" }

// InsertOpts implements river.JobArgsWithInsertOpts: one job per domain
// waiting or running at a time.
func (SummaryArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Default, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateScheduled,
	}}}
}

// summarySoon is how a writer of a domain's reports queues its summary:
// SummaryDelay after now, unless one is already waiting.
func summarySoon(now time.Time) *river.InsertOpts {
	opts := SummaryArgs{}.InsertOpts()
	opts.ScheduledAt = now.Add(SummaryDelay)
	return &opts
}

// queueSummary queues the domain's summary in the transaction that
// changed its daily rows, with the River client of the service or of the
// worker running the parse; without either (tests, tools) there is nothing
// to queue with and the first read computes it.
func (s *Service) queueSummary(ctx context.Context, tx pgx.Tx, domainID uuid.UUID) error {
	client := s.River
	if client == nil {
		var err error
		if client, err = river.ClientFromContextSafely[pgx.Tx](ctx); err != nil {
			return nil
		}
	}
	if _, err := client.InsertTx(ctx, tx, SummaryArgs{DomainID: domainID}, summarySoon(s.now())); err != nil {
		return fmt.Errorf("error queueing the sources summary: %w", err)
	}
	return nil
}

// Warm computes the domain's sources summary of the readiness window
// ending now unless a current one is stored. It reports whether it
// computed one.
func (s *Service) Warm(ctx context.Context, domainID uuid.UUID) (bool, error) {
	until := s.now().UTC()
	since := until.Add(-ReadinessWindow)
	_, ok, err := s.stored(ctx, s.DB, domainID, since, until)
	if err != nil || ok {
		return false, err
	}
	_, err = s.compute(ctx, s.DB, domainID, since, until)
	return err == nil, err
}

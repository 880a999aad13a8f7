package domains

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// Checker runs a domain's check from its DNS answers to its stored state
// and recommendations: the one sequence the live lookup of the API
// (GET .../dns) and the check job both follow.
type Checker struct {
	// DB is read for the check's inputs, holds the transaction that
	// applies it and is where the recommendations are stored.
	DB dbutil.Executor
	// Resolver answers the checks; MTASTS fetches MTA-STS policies (nil:
	// dnscheck's default over Resolver).
	Resolver dnscheck.Resolver
	MTASTS   *http.Client
	// Signer signs the domain's DMARC reporting address (nil: none).
	Signer *reports.Signer
	// Emitter emits the check's events.
	Emitter *events.Emitter
	// Fixes configures the recommendations recomputed after the check
	// (nil: computed without inputs besides the checks).
	Fixes *FixDeps
	// Logger receives a failed recomputation; nil is slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Run is one check that Checker.Run performed.
type Run struct {
	*Outcome
	// StartedAt is when the check began (the stored checked_at).
	StartedAt time.Time
	// Elapsed is how long the DNS checks took (not the transaction).
	Elapsed time.Duration
	// Results are the check's answers as they came back.
	Results *dnscheck.Results
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Checker) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// Run checks row's DNS and makes it state: CheckDomain (holding no
// transaction), then Apply in one transaction in which inTx, when not nil,
// runs too (the check job completes itself there), then, once the check
// was stored, RecomputeFixes. A failed recomputation is logged, never
// fails the check (the next check recomputes). ErrDomainGone: the domain
// was deleted meanwhile.
func (c *Checker) Run(ctx context.Context, row dbsqlc.Domain, inTx func(ctx context.Context, tx pgx.Tx) error) (*Run, error) {
	run, err := c.CheckAndApply(ctx, row, inTx)
	if err != nil {
		return nil, err
	}
	if run.Applied {
		if err := RecomputeFixes(ctx, c.DB, c.Resolver, c.Fixes, run.Domain, c.now()); err != nil {
			c.logger().WarnContext(ctx, "recomputing DNS recommendations failed", slog.String("domain", row.Name), slog.Any("error", err))
		}
	}
	return run, nil
}

// CheckAndApply is Run without the recomputation of the recommendations.
func (c *Checker) CheckAndApply(ctx context.Context, row dbsqlc.Domain, inTx func(ctx context.Context, tx pgx.Tx) error) (*Run, error) {
	started := c.now()
	t0 := time.Now()
	rs := CheckDomain(ctx, c.Resolver, c.MTASTS, c.DB, c.Signer, row, started)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("checking %s: %w", row.Name, err)
	}
	run := &Run{StartedAt: started, Elapsed: time.Since(t0), Results: rs}
	err := dbutil.WithTx(ctx, c.DB, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		if run.Outcome, err = Apply(ctx, tx, c.Emitter, row.ID, row.DkimSelectors, started, rs, c.now()); err != nil {
			return err
		}
		if inTx != nil {
			return inTx(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return run, nil
}

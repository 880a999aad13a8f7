package providers

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// Rebuilt is what rebuilding message-event rollups corrected, in keys (a
// key's count is the sum of its slots' rows): keys written because their
// sum was missing or wrong, and keys deleted because no raw row backs their
// nonzero sum. All are zero when the rollups were right, even though the
// rebuild folded their slots into slot 0.
type Rebuilt struct {
	Accounts       int
	DomainWritten  int64
	DomainDeleted  int64
	AccountWritten int64
	AccountDeleted int64
	// DailyWritten and DailyDeleted are daily rollup keys (both tables)
	// that differed from the sums of their hours: the row triggers on the
	// hourly tables keep them equal, so these are drifts they could not see.
	DailyWritten int64
	DailyDeleted int64
}

// Corrected reports whether any rollup key was wrong.
func (r Rebuilt) Corrected() bool {
	return r.DomainWritten+r.DomainDeleted+r.AccountWritten+r.AccountDeleted+r.DailyWritten+r.DailyDeleted > 0
}

func (r *Rebuilt) add(o Rebuilt) {
	r.Accounts += o.Accounts
	r.DomainWritten += o.DomainWritten
	r.DomainDeleted += o.DomainDeleted
	r.AccountWritten += o.AccountWritten
	r.AccountDeleted += o.AccountDeleted
	r.DailyWritten += o.DailyWritten
	r.DailyDeleted += o.DailyDeleted
}

// RebuildMessageRollups recounts an account's message-event rollups from its
// raw rows, a UTC day per transaction (RebuildChunk), every day that has raw
// rows or rollup rows. Each key's recount goes to slot 0 (written only when
// it differs) and the day's rows of the other slots are deleted, so the
// slots the writers spread a key over are folded back into one row. The
// daily rollups follow the hourly rows written (their row triggers); each
// day's daily rows are then recounted from its hours too.
//
// Each transaction first takes the account's rollup lock exclusively (an
// advisory lock the triggers of message_events take shared for every account
// they count): it waits for the transactions that wrote the account's events
// and are still open, and the ones that write during it wait for it in their
// trigger. The recount, made after the lock, sees every committed row; a row
// written meanwhile is added by its own trigger once the day is committed.
// So the account's event writes wait for one day's recount at a time (a day
// of a million events: a few seconds); other accounts are not held up.
func RebuildMessageRollups(ctx context.Context, db dbutil.Executor, account uuid.UUID) (Rebuilt, error) {
	total := Rebuilt{Accounts: 1}
	from := time.Unix(0, 0).UTC()
	for {
		next, err := dbsqlc.New().MessageRollupNext(ctx, db, dbsqlc.MessageRollupNextParams{AccountID: account, FromTime: from, FromDay: from})
		if err != nil {
			return total, fmt.Errorf("error reading the hours of account %s: %w", account, err)
		}
		if !next.Found {
			return total, nil
		}
		day := next.At.UTC().Truncate(RebuildChunk)
		r, err := rebuildHours(ctx, db, account, day, day.Add(RebuildChunk))
		if err != nil {
			return total, err
		}
		total.add(r)
		from = day.Add(RebuildChunk)
	}
}

// RebuildChunk is the span of hours one rebuild transaction recounts.
const RebuildChunk = 24 * time.Hour

// rebuildHours recounts the account's rollups of [from, until) (one UTC
// day, RebuildChunk) in one transaction, under the account's rollup lock.
func rebuildHours(ctx context.Context, db dbutil.Executor, account uuid.UUID, from, until time.Time) (Rebuilt, error) {
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (Rebuilt, error) {
		q := dbsqlc.New()
		if err := q.MessageRollupLockAccount(ctx, tx, account); err != nil {
			return Rebuilt{}, fmt.Errorf("error locking the rollups of account %s: %w", account, err)
		}
		d, err := q.MessageRollupRebuildDomain(ctx, tx, dbsqlc.MessageRollupRebuildDomainParams{AccountID: account, FromHour: from, UntilHour: until})
		if err != nil {
			return Rebuilt{}, fmt.Errorf("error rebuilding the domain rollup of account %s: %w", account, err)
		}
		a, err := q.MessageRollupRebuildAccount(ctx, tx, dbsqlc.MessageRollupRebuildAccountParams{AccountID: account, FromHour: from, UntilHour: until})
		if err != nil {
			return Rebuilt{}, fmt.Errorf("error rebuilding the account rollup of account %s: %w", account, err)
		}
		dd, err := q.MessageRollupRebuildDomainDaily(ctx, tx, dbsqlc.MessageRollupRebuildDomainDailyParams{AccountID: account, FromHour: from, UntilHour: until, Day: from})
		if err != nil {
			return Rebuilt{}, fmt.Errorf("error rebuilding the domain daily rollup of account %s: %w", account, err)
		}
		ad, err := q.MessageRollupRebuildAccountDaily(ctx, tx, dbsqlc.MessageRollupRebuildAccountDailyParams{AccountID: account, FromHour: from, UntilHour: until, Day: from})
		if err != nil {
			return Rebuilt{}, fmt.Errorf("error rebuilding the account daily rollup of account %s: %w", account, err)
		}
		return Rebuilt{DomainWritten: d.Written, DomainDeleted: d.Deleted, AccountWritten: a.Written, AccountDeleted: a.Deleted,
			DailyWritten: dd.Written + ad.Written, DailyDeleted: dd.Deleted + ad.Deleted}, nil
	})
}

// rebuildPage is how many account ids RebuildAllMessageRollups reads at once.
const rebuildPage = 500

// RebuildAllMessageRollups rebuilds every account's rollups, each in a
// transaction of its own (RebuildMessageRollups), in id order.
func RebuildAllMessageRollups(ctx context.Context, db dbutil.Executor) (Rebuilt, error) {
	var total Rebuilt
	after := uuid.Nil
	for {
		ids, err := dbsqlc.New().MessageRollupAccountsAfter(ctx, db, dbsqlc.MessageRollupAccountsAfterParams{After: after, Max: rebuildPage})
		if err != nil {
			return total, fmt.Errorf("error listing accounts: %w", err)
		}
		for _, id := range ids {
			r, err := RebuildMessageRollups(ctx, db, id)
			if err != nil {
				return total, err
			}
			total.add(r)
		}
		if len(ids) < rebuildPage {
			return total, nil
		}
		after = ids[len(ids)-1]
	}
}

// RollupRebuildArgs rebuilds message-event rollups from raw rows: one
// account's, or every account's when AccountID is zero. An operator's
// maintenance task (`mailwatch jobs rebuild-message-rollups`); nothing
// schedules it.
type RollupRebuildArgs struct {
	AccountID uuid.UUID `json:"account_id,omitzero"`
}

// Kind implements river.JobArgs.
func (RollupRebuildArgs) Kind() string { return "message_rollup_rebuild" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RollupRebuildArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, MaxAttempts: 3}
}

package providers

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/esp"
	"github.com/mailwatch/mailwatch/internal/pgtext"
)

// MaxPayloadAttempts bounds how often one payload's normalisation is tried:
// after that many failures it is given up, marked processed with its error.
const MaxPayloadAttempts = 5

// maxPayloadError bounds the reason kept on a payload.
const maxPayloadError = 500

// PayloadFailure is a payload whose normalisation failed in a batch. Its
// work was rolled back alone; the attempt and the reason are recorded on
// the payload.
type PayloadFailure struct {
	PayloadID uuid.UUID
	// Attempts counts the failed attempts so far.
	Attempts int
	// GivenUp is true once Attempts reached MaxPayloadAttempts: the
	// payload is marked processed with its error and not tried again.
	GivenUp bool
	Err     error
}

// BatchResult is what ProcessPayloads did.
type BatchResult struct {
	// Processed counts payloads normalised (or found gone or done).
	Processed int
	Failures  []PayloadFailure
}

// Retry lists the failed payloads still to be tried again.
func (r BatchResult) Retry() []uuid.UUID {
	var ids []uuid.UUID
	for _, f := range r.Failures {
		if !f.GivenUp {
			ids = append(ids, f.PayloadID)
		}
	}
	return ids
}

// RetryDelay is how long to wait before trying Retry's payloads again:
// 30 s after a first failure, doubling with each (about 8 minutes in all
// before a payload is given up), so a passing conflict clears and a
// payload that always fails stops costing soon.
func (r BatchResult) RetryDelay() time.Duration {
	least := MaxPayloadAttempts
	for _, f := range r.Failures {
		if !f.GivenUp {
			least = min(least, f.Attempts)
		}
	}
	return 30 * time.Second << max(least-1, 0)
}

// ProcessPayloads normalises a batch of stored payloads, which may belong
// to several accounts, in tx, so that no payload's failure fails another's:
// the batch is first tried in one savepoint, its events stored by one
// statement (processBatch); if any payload fails, that savepoint is rolled
// back and each payload is normalised in a savepoint of its own. A payload
// that fails alone has its attempt counted and its reason recorded
// (PayloadFailure); the others are committed with the caller's transaction.
// The error returned is only one that fails the transaction itself (a
// cancelled context, a lost connection).
func ProcessPayloads(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, now time.Time) (BatchResult, error) {
	if len(ids) > 1 {
		failed, err := inSavepoint(ctx, tx, func(sp pgx.Tx) error {
			_, err := processBatch(ctx, sp, ids, now)
			return err
		})
		if err != nil {
			return BatchResult{}, err
		}
		if failed == nil {
			return BatchResult{Processed: len(ids)}, nil
		}
	}
	var res BatchResult
	for _, id := range ids {
		failed, err := inSavepoint(ctx, tx, func(sp pgx.Tx) error {
			_, err := ProcessPayload(ctx, sp, id, now)
			return err
		})
		if err != nil {
			return res, err
		}
		if failed == nil {
			res.Processed++
			continue
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("error normalising payload %s: %w", id, failed)
		}
		f, err := markFailed(ctx, tx, id, failed, now)
		if err != nil {
			return res, err
		}
		if f != nil {
			res.Failures = append(res.Failures, *f)
		}
	}
	return res, nil
}

// inSavepoint runs fn in a savepoint of tx, released when fn succeeds and
// rolled back when it fails. failed is fn's error; err is a failure of the
// savepoint itself, which the transaction cannot survive.
func inSavepoint(ctx context.Context, tx pgx.Tx, fn func(sp pgx.Tx) error) (failed, err error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("error starting a savepoint: %w", err)
	}
	if failed = fn(sp); failed != nil {
		if err := sp.Rollback(ctx); err != nil {
			return failed, fmt.Errorf("error rolling back a savepoint after %w: %w", failed, err)
		}
		return failed, nil
	}
	if err := sp.Commit(ctx); err != nil {
		return nil, fmt.Errorf("error releasing a savepoint: %w", err)
	}
	return nil, nil
}

// markFailed records a failed attempt of payload id; nil when the payload
// was deleted or processed meanwhile.
func markFailed(ctx context.Context, tx pgx.Tx, id uuid.UUID, cause error, now time.Time) (*PayloadFailure, error) {
	row, err := dbsqlc.New().ProviderPayloadMarkFailed(ctx, tx, dbsqlc.ProviderPayloadMarkFailedParams{
		ID: id, Error: esp.Clip(pgtext.Clean(cause.Error()), maxPayloadError), MaxAttempts: MaxPayloadAttempts, Now: now,
	})
	if dbutil.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error recording the failure of payload %s: %w", id, err)
	}
	return &PayloadFailure{PayloadID: id, Attempts: int(row.Attempts), GivenUp: row.GivenUp, Err: cause}, nil
}

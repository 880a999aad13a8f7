package reports

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// A report the parser fails on has been acknowledged (250 / 202) to its
// sender, who will not send it again; its raw bytes are kept so that a later
// release, whose parser reads it, can parse it again (Requeue, run by the
// reparse-reports maintenance task). They are bounded per domain and by age.
const (
	// MaxFailedRawBytesPerDomain bounds the raw bytes of failed reports a
	// domain keeps (each report is at most MaxRawBytes); a report failing
	// past it has its bytes dropped, as every other outcome does.
	MaxFailedRawBytesPerDomain = 64 << 20
	// FailedRawRetention is how long they are kept after the report was
	// received (PruneFailedRaw, daily).
	FailedRawRetention = 90 * 24 * time.Hour
)

// RequeueBatch is the number of failed reports Requeue moves per
// transaction.
const RequeueBatch = 100

// RequeueCursor is where a Requeue run is in its walk of failed reports.
type RequeueCursor struct {
	DomainID  uuid.UUID
	MessageID uuid.UUID
}

// Requeue moves the next failed reports (at most limit) whose raw bytes are
// kept, after cursor, back to pending and queues their report_parse job,
// in tx. It returns how many it queued and the cursor after them; zero
// means the walk is over. Each report is visited once per walk, so a report
// that fails again is not retried in the same run; running the task again
// parses again only what still failed, and a report already parsed is left
// as it is (Parse parses a pending report only).
func (s *Service) Requeue(ctx context.Context, tx pgx.Tx, cursor RequeueCursor, limit int) (int, RequeueCursor, error) {
	rows, err := q.ReportMessageRequeueFailed(ctx, tx, dbsqlc.ReportMessageRequeueFailedParams{
		AfterDomainID: cursor.DomainID, AfterID: cursor.MessageID, MaxRows: int32(limit),
	})
	if err != nil {
		return 0, cursor, fmt.Errorf("error requeueing failed reports: %w", err)
	}
	if len(rows) == 0 {
		return 0, cursor, nil
	}
	client := s.River
	if client == nil {
		if client, err = river.ClientFromContextSafely[pgx.Tx](ctx); err != nil {
			return 0, cursor, fmt.Errorf("reports: no River client: %w", err)
		}
	}
	params := make([]river.InsertManyParams, len(rows))
	next := cursor
	for i, r := range rows {
		params[i] = river.InsertManyParams{Args: ParseArgs{MessageID: r.ID}}
		if c := (RequeueCursor{DomainID: r.DomainID, MessageID: r.ID}); c.after(next) {
			next = c
		}
	}
	if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
		return 0, cursor, fmt.Errorf("error queueing report parses: %w", err)
	}
	return len(rows), next, nil
}

// after reports whether c comes after o in (domain, message) order, as
// Postgres orders uuids (bytewise).
func (c RequeueCursor) after(o RequeueCursor) bool {
	if d := bytes.Compare(c.DomainID[:], o.DomainID[:]); d != 0 {
		return d > 0
	}
	return bytes.Compare(c.MessageID[:], o.MessageID[:]) > 0
}

// PruneFailedRaw drops the kept raw bytes of failed reports received before
// cutoff, batch rows per statement, and returns how many it dropped. The
// reports themselves (status and reason) stay.
func PruneFailedRaw(ctx context.Context, db dbutil.Executor, cutoff time.Time, batch int) (int64, error) {
	var total int64
	for {
		n, err := q.ReportMessagePruneFailedRaw(ctx, db, dbsqlc.ReportMessagePruneFailedRawParams{Before: cutoff, MaxRows: int32(batch)})
		if err != nil {
			return total, fmt.Errorf("error pruning failed reports' raw bytes: %w", err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}

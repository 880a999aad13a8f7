package reports

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// SummaryCurrent reports whether the domain holds a current stored summary
// of [since, until]: the next Sources over it reads no daily row.
func SummaryCurrent(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, since, until time.Time) (bool, error) {
	kind := summaryOther
	if until.Sub(since) == ReadinessWindow {
		kind = summaryReadiness
	}
	_, err := q.DMARCSourceSummaryGet(ctx, db, dbsqlc.DMARCSourceSummaryGetParams{DomainID: domainID, Kind: kind, Since: since, Until: until})
	if dbutil.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

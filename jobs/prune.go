package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

func pruneUsage(ctx context.Context, db dbutil.Executor, cutoff time.Time) (int64, error) {
	q := dbsqlc.New()
	day := time.Date(cutoff.Year(), cutoff.Month(), cutoff.Day(), 0, 0, 0, 0, time.UTC)
	n, err := q.APIUsagePrune(ctx, db, day)
	if err != nil {
		return 0, fmt.Errorf("error pruning usage: %w", err)
	}
	keys, err := q.APIKeyPruneRevoked(ctx, db, cutoff)
	if err != nil {
		return 0, fmt.Errorf("error pruning revoked keys: %w", err)
	}
	return n + keys, nil
}

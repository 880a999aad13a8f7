package reports

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
)

// SummaryCurrent reports whether the domain holds a current stored summary
// of [since, until]: the next Sources over it reads no daily row.
func (s *Service) SummaryCurrent(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, since, until time.Time) (bool, error) {
	_, ok, err := s.stored(ctx, db, domainID, since, until)
	return ok, err
}

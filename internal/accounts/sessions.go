package accounts

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// EndSessions signs the account out of the dashboard everywhere: a change
// of its credentials (a new password) ends every session it has, the one
// that made the change included. db may be the transaction making the
// change.
func EndSessions(ctx context.Context, db dbutil.Executor, accountID uuid.UUID) error {
	if _, err := dbsqlc.New().WebSessionDeleteByAccount(ctx, db, accountID); err != nil {
		return fmt.Errorf("ending dashboard sessions: %w", err)
	}
	return nil
}

package authproviders

import (
	"context"
	"fmt"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Create inserts a provider in the caller's transaction, refusing one
// beyond MaxPerAccount with ErrTooMany. The account row is locked first
// (the lock plan limits take), so concurrent creates of one account count
// one after the other.
func Create(ctx context.Context, tx dbutil.Tx, params dbsqlc.AuthProviderInsertParams) (dbsqlc.AuthProvider, error) {
	q := dbsqlc.New()
	if _, err := q.AccountPlanLock(ctx, tx, params.AccountID); err != nil {
		return dbsqlc.AuthProvider{}, fmt.Errorf("error locking the account: %w", err)
	}
	n, err := q.AuthProviderCountByAccount(ctx, tx, params.AccountID)
	if err != nil {
		return dbsqlc.AuthProvider{}, fmt.Errorf("error counting the account's identity providers: %w", err)
	}
	if n >= MaxPerAccount {
		return dbsqlc.AuthProvider{}, ErrTooMany
	}
	return q.AuthProviderInsert(ctx, tx, params)
}

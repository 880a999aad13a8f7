// Package billing holds the rules of plans and payments: the limit checks
// the create routes run in their own transaction, the Stripe webhook
// events' verification, storage and application, the grace period of a
// failed payment, and the operator's manual plan change. Every function
// takes the caller's transaction; api/ and jobs/ are adapters over them.
package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/plans"
)

// LimitError is a create refused because the account's plan is full.
type LimitError struct {
	Limit string // a plans.Limit* name
	Plan  string
	Max   int
	Used  int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("plan limit reached: the %s plan allows %d %s (limit %q) and the account has %d; "+
		"delete one or upgrade the plan (GET /api/accounts/me/plan)", e.Plan, e.Max, plans.LimitNoun(e.Limit), e.Limit, e.Used)
}

// Counts is an account's usage of each counted limit.
type Counts struct {
	Domains       int64
	Receivers     int64
	Subscriptions int64
	Providers     int64
}

// Of returns the count of the limit called name.
func (c Counts) Of(name string) int64 {
	switch name {
	case plans.LimitDomains:
		return c.Domains
	case plans.LimitReceivers:
		return c.Receivers
	case plans.LimitSubscriptions:
		return c.Subscriptions
	case plans.LimitProviders:
		return c.Providers
	}
	return 0
}

// Usage counts what the account holds now (receivers: live ones only).
func Usage(ctx context.Context, db dbsqlc.DBTX, accountID uuid.UUID, now time.Time) (Counts, error) {
	row, err := dbsqlc.New().AccountUsageCounts(ctx, db, dbsqlc.AccountUsageCountsParams{AccountID: accountID, Now: now})
	if err != nil {
		return Counts{}, fmt.Errorf("error counting usage: %w", err)
	}
	return Counts(row), nil
}

// CheckLimit locks the account row, so that concurrent creates of one
// account count one after the other, and returns a *LimitError when one
// more of limit would exceed the account's plan (def when it has none of
// its own). Call it in the create's transaction, before the insert.
func CheckLimit(ctx context.Context, tx dbutil.Tx, accountID uuid.UUID, limit, def string, now time.Time) error {
	q := dbsqlc.New()
	locked, err := q.AccountPlanLock(ctx, tx, accountID)
	if err != nil {
		return fmt.Errorf("error locking the account: %w", err)
	}
	plan := plans.Effective(locked.Plan, def)
	max, limited, ok := plan.Limit(limit)
	if !ok {
		return fmt.Errorf("billing: unknown limit %q", limit)
	}
	if !limited {
		return nil
	}
	counts, err := Usage(ctx, tx, accountID, now)
	if err != nil {
		return err
	}
	if used := counts.Of(limit); used >= int64(max) {
		return &LimitError{Limit: limit, Plan: plan.Name, Max: max, Used: used}
	}
	return nil
}

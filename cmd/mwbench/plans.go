package main

import (
	"context"
	"fmt"
)

// setBenchPlan puts a bench account on the business plan, whose limits
// (internal/plans) hold what the benches create: 1,000 domains, 5,000
// live receivers.
func setBenchPlan(ctx context.Context, env *benchEnv, accountID string) error {
	_, err := env.Pool.Exec(ctx,
		`INSERT INTO account_plans (account_id, plan) VALUES ($1, 'business')
		 ON CONFLICT (account_id) DO UPDATE SET plan = excluded.plan`, accountID)
	if err != nil {
		return fmt.Errorf("error setting the bench account's plan: %w", err)
	}
	return nil
}

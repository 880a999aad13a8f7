package providers

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/events"
)

// spikeScheduleBatch bounds the domains one ScheduleSpikeChecks run enqueues.
const spikeScheduleBatch = 10000

// ScheduleSpikeChecks enqueues, in tx, a spike check for every linked
// domain with message events stored since a time; it returns how many.
func ScheduleSpikeChecks(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], since time.Time) (int, error) {
	ids, err := dbsqlc.New().MessageEventDomainsReceivedSince(ctx, tx, dbsqlc.MessageEventDomainsReceivedSinceParams{Since: since, Max: spikeScheduleBatch})
	if err != nil {
		return 0, fmt.Errorf("error listing active domains: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: SpikeCheckArgs{DomainID: id}}
	}
	if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
		return 0, fmt.Errorf("error enqueueing spike checks: %w", err)
	}
	return len(ids), nil
}

// CheckMessageSpikes evaluates a domain with the default rules in tx and
// enqueues rescore, the domain's health rescore (domains.HealthArgs, which
// this package cannot name: domains imports it), when an episode started
// or ended.
func CheckMessageSpikes(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], domainID uuid.UUID, now time.Time, rescore river.JobArgs) ([]SpikeChange, error) {
	changes, err := CheckSpikes(ctx, tx, &events.Emitter{River: client}, domainID, now, DefaultSpikeRules)
	if err != nil {
		return nil, err
	}
	if len(changes) > 0 {
		if _, err := client.InsertTx(ctx, tx, rescore, nil); err != nil {
			return nil, fmt.Errorf("error enqueueing health rescore: %w", err)
		}
	}
	return changes, nil
}

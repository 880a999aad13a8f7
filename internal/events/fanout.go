package events

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
)

// fanOut creates the deliveries of ev for every matching, enabled
// subscription. Event subscriptions land with the webhook-delivery issue.
func (e *Emitter) fanOut(ctx context.Context, tx pgx.Tx, ev dbsqlc.Event) error {
	_ = ctx
	_ = tx
	_ = ev
	return nil
}

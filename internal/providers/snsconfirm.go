package providers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
)

// ErrUnreadablePayload is returned by ConfirmSNSPayload when the stored
// payload is not an SNS envelope: retrying cannot help.
var ErrUnreadablePayload = errors.New("stored SNS payload is unreadable")

// ConfirmSNSPayload visits the SubscribeURL of a stored, verified
// SubscriptionConfirmation with client (ses.AWSOnlyClient over the guarded
// client) and marks the payload processed. A payload deleted since, or
// already confirmed, is nothing to do.
func ConfirmSNSPayload(ctx context.Context, db dbutil.Executor, client *http.Client, payloadID uuid.UUID, now time.Time) error {
	q := dbsqlc.New()
	pl, err := q.ProviderPayloadGetByID(ctx, db, payloadID)
	if dbutil.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading SNS payload: %w", err)
	}
	if pl.ProcessedAt != nil {
		return nil
	}
	env, err := ses.ParseEnvelope(pl.Body)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnreadablePayload, err)
	}
	if err := ses.Confirm(ctx, client, env); err != nil {
		return err
	}
	return q.ProviderPayloadMarkProcessed(ctx, db, dbsqlc.ProviderPayloadMarkProcessedParams{ID: pl.ID, Now: now, Events: 0})
}

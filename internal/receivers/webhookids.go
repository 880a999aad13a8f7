package receivers

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Outcomes of a signed email ingress request, recorded against its
// webhook-id by the first answer (see ConsumeWebhookID).
const (
	OutcomeDelivered        = "delivered"
	OutcomeUnknownRecipient = "unknown_recipient"
	OutcomeExpired          = "expired"
	OutcomeInvalidRecipient = "invalid_recipient"
	OutcomeUnreadable       = "unreadable"
	OutcomeUnsupportedType  = "unsupported_type"
)

// webhookIDRetention is how long a consumed email webhook-id is kept: well
// past the signature's timestamp tolerance (inbound.WebhookTolerance, 5
// minutes), after which a replay fails verification anyway. SMS MessageSids
// are kept for good (see claimWebhookID).
const webhookIDRetention = time.Hour

// WebhookIDUsedError is returned by DeliverEmail when the request's
// webhook-id was consumed by an earlier request that was refused: the `to`
// parameter is outside the signature, so a refused request must not be
// replayable with another recipient.
type WebhookIDUsedError struct {
	ID      string
	Outcome string
}

func (e *WebhookIDUsedError) Error() string {
	return fmt.Sprintf("webhook id %q was already used by a request that was refused (%s)", e.ID, e.Outcome)
}

// WebhookIDOutcome returns the outcome recorded for a webhook-id, or "" when
// the id is unused.
func (s *Store) WebhookIDOutcome(ctx context.Context, id string) (string, error) {
	outcome, err := dbsqlc.New().IngressWebhookIDGet(ctx, s.DB, id)
	if dbutil.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("error reading webhook id: %w", err)
	}
	return outcome, nil
}

// ConsumeWebhookID records the outcome of a verified request that stored
// nothing (a refusal), so that the id cannot be used again. The first
// outcome recorded for an id wins; consuming a used id is not an error.
func (s *Store) ConsumeWebhookID(ctx context.Context, id, outcome string) error {
	return dbutil.WithTx(ctx, s.DB, func(ctx context.Context, tx dbutil.Tx) error {
		_, err := claimWebhookID(ctx, tx, id, outcome, s.now())
		return err
	})
}

// claimWebhookID records outcome for id and reports whether this call was
// the first; it also drops ids past webhookIDRetention.
func claimWebhookID(ctx context.Context, db dbutil.Executor, id, outcome string, now time.Time) (bool, error) {
	q := dbsqlc.New()
	if err := q.IngressWebhookIDPurge(ctx, db, now.Add(-webhookIDRetention)); err != nil {
		return false, fmt.Errorf("error purging webhook ids: %w", err)
	}
	var err error
	if strings.HasPrefix(id, smsWebhookIDPrefix) {
		// Twilio signatures carry no timestamp: a captured request verifies
		// forever, so its MessageSid stays claimed for good.
		_, err = q.IngressWebhookIDClaimKept(ctx, db, dbsqlc.IngressWebhookIDClaimKeptParams{WebhookID: id, Outcome: outcome})
	} else {
		_, err = q.IngressWebhookIDClaim(ctx, db, dbsqlc.IngressWebhookIDClaimParams{WebhookID: id, Outcome: outcome, ConsumedAt: now})
	}
	if dbutil.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("error claiming webhook id: %w", err)
	}
	return true, nil
}

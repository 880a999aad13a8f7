package subscriptions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/billing"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// New is a subscription to create.
type New struct {
	URL          string
	EventTypes   []string // nil: every type
	DomainFilter *string
	TagFilter    *string
	// SigningSecret, when set, is the whsec_ secret to sign with; one is
	// generated otherwise.
	SigningSecret *string
	// MaxPerSecond and MaxInFlight, when set, bound the subscription's
	// pushes (Admit).
	MaxPerSecond, MaxInFlight *int32
}

// Create checks n and subscribes it for the account; it returns the row
// and the signing secret (shown once). The plan's subscriptions limit
// (*billing.LimitError) and MaxPerAccount (*LimitError) are checked in the
// insert's transaction.
func (s *Service) Create(ctx context.Context, db dbutil.Executor, accountID uuid.UUID, n New, now time.Time) (dbsqlc.EventSubscription, string, error) {
	params, err := s.insertParams(ctx, accountID, n)
	if err != nil {
		return dbsqlc.EventSubscription{}, "", err
	}
	secret := webhook.GenerateSecret()
	if n.SigningSecret != nil {
		if err := webhook.ValidateSecret(*n.SigningSecret); err != nil {
			msg := strings.TrimPrefix(err.Error(), webhook.ErrInvalidSecret.Error()+": ")
			return dbsqlc.EventSubscription{}, "", &FieldError{Field: "signing_secret", Message: msg}
		}
		secret = *n.SigningSecret
	}
	ct, keyID, err := s.Keyring.Seal([]byte(secret), params.ID[:])
	if err != nil {
		return dbsqlc.EventSubscription{}, "", fmt.Errorf("sealing signing secret: %w", err)
	}
	params.SecretCiphertext, params.SecretKeyID = ct, keyID
	row, err := dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.EventSubscription, error) {
		if err := billing.CheckLimit(ctx, tx, accountID, plans.LimitSubscriptions, s.DefaultPlan, now); err != nil {
			return dbsqlc.EventSubscription{}, err
		}
		existing, err := List(ctx, tx, accountID)
		if err != nil {
			return dbsqlc.EventSubscription{}, err
		}
		if len(existing) >= MaxPerAccount {
			return dbsqlc.EventSubscription{}, &LimitError{Max: MaxPerAccount}
		}
		row, err := dbsqlc.New().SubscriptionInsert(ctx, tx, params)
		if err != nil {
			return row, fmt.Errorf("inserting event subscription: %w", err)
		}
		return row, nil
	})
	if err != nil {
		return row, "", err
	}
	return row, secret, nil
}

// insertParams checks n's destination and filters.
func (s *Service) insertParams(ctx context.Context, accountID uuid.UUID, n New) (dbsqlc.SubscriptionInsertParams, error) {
	params := dbsqlc.SubscriptionInsertParams{ID: uuid.Must(uuid.NewV7()), AccountID: accountID, URL: n.URL,
		MaxPerSecond: n.MaxPerSecond, MaxInFlight: n.MaxInFlight}
	if err := CheckBounds(n.MaxPerSecond, n.MaxInFlight); err != nil {
		return params, err
	}
	if err := s.CheckURL(ctx, n.URL); err != nil {
		return params, err
	}
	if n.EventTypes != nil {
		if err := CheckEventTypes(n.EventTypes); err != nil {
			return params, err
		}
		params.EventTypes = n.EventTypes
	}
	if n.DomainFilter != nil {
		d, err := NormalizeDomainFilter(*n.DomainFilter)
		if err != nil {
			return params, err
		}
		params.DomainFilter = &d
	}
	if n.TagFilter != nil {
		t, err := CheckTag(*n.TagFilter)
		if err != nil {
			return params, err
		}
		params.TagFilter = &t
	}
	return params, nil
}

// Change is a partial update: nil fields stay as they are.
type Change struct {
	URL *string
	// EventTypes, when set, replaces the type filter; a nil *EventTypes
	// (pointer to a nil slice) means every type.
	EventTypes *[]string
	// DomainFilter and TagFilter, when set, replace the filter; a nil
	// inner pointer clears it.
	DomainFilter **string
	TagFilter    **string
	Enabled      *bool
	// MaxPerSecond and MaxInFlight, when set, replace the bound; a nil
	// inner pointer removes it.
	MaxPerSecond, MaxInFlight **int32
}

// Update checks c and applies it to the account's subscription id.
func (s *Service) Update(ctx context.Context, db dbutil.Executor, accountID, id uuid.UUID, c Change) (dbsqlc.EventSubscription, error) {
	if err := s.checkChange(ctx, &c); err != nil {
		return dbsqlc.EventSubscription{}, err
	}
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.EventSubscription, error) {
		cur, err := Get(ctx, tx, accountID, id)
		if err != nil {
			return cur, err
		}
		p := dbsqlc.SubscriptionUpdateParams{
			ID: cur.ID, AccountID: accountID, URL: cur.URL, EventTypes: cur.EventTypes,
			DomainFilter: cur.DomainFilter, TagFilter: cur.TagFilter, Enabled: cur.Enabled,
			MaxPerSecond: cur.MaxPerSecond, MaxInFlight: cur.MaxInFlight,
		}
		if c.MaxPerSecond != nil {
			p.MaxPerSecond = *c.MaxPerSecond
		}
		if c.MaxInFlight != nil {
			p.MaxInFlight = *c.MaxInFlight
		}
		if c.URL != nil {
			p.URL = *c.URL
		}
		if c.EventTypes != nil {
			p.EventTypes = slices.Clone(*c.EventTypes)
		}
		if c.DomainFilter != nil {
			p.DomainFilter = *c.DomainFilter
		}
		if c.TagFilter != nil {
			p.TagFilter = *c.TagFilter
		}
		if c.Enabled != nil {
			p.Enabled = *c.Enabled
		}
		row, err := dbsqlc.New().SubscriptionUpdate(ctx, tx, p)
		if dbutil.IsNotFound(err) {
			return row, ErrNotFound
		}
		if err != nil {
			return row, fmt.Errorf("updating event subscription: %w", err)
		}
		return row, nil
	})
}

// checkChange checks c's fields and normalises its filters in place.
func (s *Service) checkChange(ctx context.Context, c *Change) error {
	var perSecond, inFlight *int32
	if c.MaxPerSecond != nil {
		perSecond = *c.MaxPerSecond
	}
	if c.MaxInFlight != nil {
		inFlight = *c.MaxInFlight
	}
	if err := CheckBounds(perSecond, inFlight); err != nil {
		return err
	}
	if c.URL != nil {
		if err := s.CheckURL(ctx, *c.URL); err != nil {
			return err
		}
	}
	if c.EventTypes != nil && *c.EventTypes != nil {
		if err := CheckEventTypes(*c.EventTypes); err != nil {
			return err
		}
	}
	if c.DomainFilter != nil && *c.DomainFilter != nil {
		d, err := NormalizeDomainFilter(**c.DomainFilter)
		if err != nil {
			return err
		}
		c.DomainFilter = ptr(&d)
	}
	if c.TagFilter != nil && *c.TagFilter != nil {
		t, err := CheckTag(**c.TagFilter)
		if err != nil {
			return err
		}
		c.TagFilter = ptr(&t)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// CheckBounds checks throughput bounds that are set.
func CheckBounds(perSecond, inFlight *int32) error {
	if perSecond != nil && (*perSecond < 1 || *perSecond > MaxPerSecondLimit) {
		return &FieldError{Field: "max_per_second", Message: fmt.Sprintf("must be 1 to %d, or null for no bound", MaxPerSecondLimit)}
	}
	if inFlight != nil && (*inFlight < 1 || *inFlight > MaxInFlightLimit) {
		return &FieldError{Field: "max_in_flight", Message: fmt.Sprintf("must be 1 to %d, or null for no bound", MaxInFlightLimit)}
	}
	return nil
}

// Test pushes a signed synthetic event of type test to the account's
// subscription id now (disabled or not), signed as its pushes are (both
// secrets during a rotation's grace), and returns the outcome; nothing
// is stored or retried. ErrSecretUnreadable when the secret cannot be
// opened.
func (s *Service) Test(ctx context.Context, db dbsqlc.DBTX, accountID, id uuid.UUID, now time.Time) (webhook.Attempt, error) {
	sub, err := Get(ctx, db, accountID, id)
	if err != nil {
		return webhook.Attempt{}, err
	}
	now = now.UTC()
	secret, previous, err := OpenSecrets(s.Keyring, sub, now)
	if err != nil {
		return webhook.Attempt{}, err
	}
	msgID := uuid.Must(uuid.NewV7())
	body, err := webhook.Payload("test", now, map[string]any{
		"id": msgID, "event_type": "test", "subscription_id": sub.ID,
		"message": "This is a test event sent from mailwatch.", "created_at": now,
	})
	if err != nil {
		return webhook.Attempt{}, fmt.Errorf("building test payload: %w", err)
	}
	return webhook.Send(ctx, s.Client, webhook.Request{URL: sub.URL, MsgID: msgID.String(), Body: body, Secret: secret, PreviousSecret: previous}), nil
}

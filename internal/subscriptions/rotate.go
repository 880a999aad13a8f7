package subscriptions

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// Rotation grace periods: how long the secret a rotation replaces keeps
// signing beside the new one.
const (
	DefaultGrace = 24 * time.Hour
	MaxGrace     = 7 * 24 * time.Hour
)

// Rotation is a request to rotate a subscription's signing secret.
type Rotation struct {
	// Grace is how long the replaced secret keeps signing: nil means
	// DefaultGrace, zero retires it at once, at most MaxGrace.
	Grace *time.Duration
	// SigningSecret, when set, is the new whsec_ secret; one is generated
	// otherwise.
	SigningSecret *string
	// KeyIdentifier names the API key (or session) that rotates, for the
	// audit event.
	KeyIdentifier string
}

// Rotated is the outcome of a rotation: the row and the new secret, shown
// once.
type Rotated struct {
	Sub    dbsqlc.EventSubscription
	Secret string
}

// Rotate seals a new signing secret into the account's subscription id.
// In the same transaction it emits subscription_secret_rotated and, when
// the replaced secret has a grace period, schedules the job that retires
// it at the period's end (RetireSecretArgs). Until then every push is
// signed under both (webhook.SignAll). A secret still in the grace of an
// earlier rotation is dropped: at most two secrets sign at once.
func (s *Service) Rotate(ctx context.Context, db dbutil.Executor, em *events.Emitter, accountID, id uuid.UUID, r Rotation, now time.Time) (Rotated, error) {
	grace := DefaultGrace
	if r.Grace != nil {
		grace = *r.Grace
	}
	if grace < 0 || grace > MaxGrace {
		return Rotated{}, &FieldError{Field: "grace_period_seconds", Message: fmt.Sprintf("must be 0 to %d (7 days)", int(MaxGrace/time.Second))}
	}
	secret := webhook.GenerateSecret()
	if r.SigningSecret != nil {
		if err := webhook.ValidateSecret(*r.SigningSecret); err != nil {
			msg := strings.TrimPrefix(err.Error(), webhook.ErrInvalidSecret.Error()+": ")
			return Rotated{}, &FieldError{Field: "signing_secret", Message: msg}
		}
		secret = *r.SigningSecret
	}
	ct, keyID, err := s.Keyring.Seal([]byte(secret), id[:])
	if err != nil {
		return Rotated{}, fmt.Errorf("sealing signing secret: %w", err)
	}
	now = now.UTC().Truncate(time.Microsecond)
	p := dbsqlc.SubscriptionRotateSecretParams{ID: id, AccountID: accountID, SecretCiphertext: ct, SecretKeyID: keyID, Now: now}
	if grace > 0 {
		until := now.Add(grace)
		p.PreviousExpiresAt = &until
	}
	row, err := dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.EventSubscription, error) {
		row, err := dbsqlc.New().SubscriptionRotateSecret(ctx, tx, p)
		if dbutil.IsNotFound(err) {
			return row, ErrNotFound
		}
		if err != nil {
			return row, fmt.Errorf("rotating signing secret: %w", err)
		}
		if _, err := em.Emit(ctx, tx, events.Event{
			AccountID: accountID, Type: events.TypeSubscriptionSecretRotated, At: now,
			Payload: map[string]any{"subscription_id": row.ID, "rotated_at": now,
				"previous_secret_expires_at": p.PreviousExpiresAt, "key_identifier": r.KeyIdentifier},
		}); err != nil {
			return row, fmt.Errorf("emitting %s: %w", events.TypeSubscriptionSecretRotated, err)
		}
		if p.PreviousExpiresAt == nil {
			return row, nil
		}
		client, err := em.Client(ctx)
		if err != nil {
			return row, err
		}
		_, err = client.InsertTx(ctx, tx, RetireSecretArgs{SubscriptionID: row.ID, At: *p.PreviousExpiresAt},
			&river.InsertOpts{ScheduledAt: *p.PreviousExpiresAt})
		if err != nil {
			return row, fmt.Errorf("scheduling the retirement of the replaced secret: %w", err)
		}
		return row, nil
	})
	if err != nil {
		return Rotated{}, err
	}
	return Rotated{Sub: row, Secret: secret}, nil
}

// RetireSecretArgs retire a subscription's replaced secret once its grace
// period (ending At) is over. Signing already ignores a secret past its
// grace (Secrets); the job clears the sealed copy so it is kept no longer
// than promised. A later rotation schedules its own job; this one then
// finds nothing due and does nothing.
type RetireSecretArgs struct {
	SubscriptionID uuid.UUID `json:"subscription_id"`
	At             time.Time `json:"at"`
}

// Kind implements river.JobArgs.
func (RetireSecretArgs) Kind() string { return "subscription_secret_retire" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RetireSecretArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, MaxAttempts: 25}
}

// RetireSecret drops the subscription's replaced secret if its grace has
// ended by now; it reports whether it did.
func RetireSecret(ctx context.Context, db dbutil.Executor, id uuid.UUID, now time.Time) (bool, error) {
	n, err := dbsqlc.New().SubscriptionRetirePreviousSecret(ctx, db, dbsqlc.SubscriptionRetirePreviousSecretParams{ID: id, Now: now})
	if err != nil {
		return false, fmt.Errorf("retiring replaced secret: %w", err)
	}
	return n > 0, nil
}

// Opener opens sealed secrets (a *secretbox.Keyring).
type Opener interface {
	Open(keyID string, ciphertext, associated []byte) ([]byte, error)
}

// OpenSecrets opens the secrets a push of sub is signed with at now: its
// current secret and, while a rotation's grace lasts, the one it replaced
// ("" otherwise). ErrSecretUnreadable when either cannot be opened.
func OpenSecrets(keys Opener, sub dbsqlc.EventSubscription, now time.Time) (current, previous string, err error) {
	cur, err := keys.Open(sub.SecretKeyID, sub.SecretCiphertext, sub.ID[:])
	if err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrSecretUnreadable, err)
	}
	if sub.PreviousSecretExpiresAt == nil || !now.Before(*sub.PreviousSecretExpiresAt) || sub.PreviousSecretKeyID == nil {
		return string(cur), "", nil
	}
	prev, err := keys.Open(*sub.PreviousSecretKeyID, sub.PreviousSecretCiphertext, sub.ID[:])
	if err != nil {
		return "", "", fmt.Errorf("%w (the replaced secret): %w", ErrSecretUnreadable, err)
	}
	return string(cur), string(prev), nil
}

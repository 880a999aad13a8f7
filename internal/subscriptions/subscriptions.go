// Package subscriptions holds the rules of event subscriptions: an account
// subscribes a URL to the events of its log; the webhook workers push them
// there, signed with the subscription's secret (Standard Webhooks), which is
// stored sealed (internal/secretbox). Destinations pass the SSRF guard
// (internal/netguard) on save as they do at every delivery.
package subscriptions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/netguard"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// Limits.
const (
	// MaxPerAccount is the server's absolute cap on an account's
	// subscriptions, whatever its plan.
	MaxPerAccount = 100
	MaxEventTypes = 50
	// urlCheckTimeout bounds the DNS resolution of a destination at create
	// and update time.
	urlCheckTimeout = 5 * time.Second
)

var (
	// ErrNotFound: the account has no subscription with the id.
	ErrNotFound = errors.New("event subscription not found")
	// ErrSecretUnreadable: the sealed signing secret cannot be opened with
	// the configured keys.
	ErrSecretUnreadable = errors.New("the subscription's signing secret cannot be decrypted with the configured keys")
)

// FieldError is a refused field: Message completes the sentence "Field ...".
type FieldError struct {
	Field, Message string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Message }

// LimitError: the account has MaxPerAccount subscriptions already.
type LimitError struct{ Max int }

func (e *LimitError) Error() string {
	return fmt.Sprintf("an account may have at most %d event subscriptions", e.Max)
}

// Service applies the rules with the server's guard, keys and client.
type Service struct {
	// Guard checks destinations (the advisory SSRF check on save).
	Guard *netguard.Guard
	// Keyring seals and opens signing secrets.
	Keyring *secretbox.Keyring
	// Client sends test pushes.
	Client *http.Client
	// DefaultPlan is the plan of accounts without one (the subscriptions
	// limit).
	DefaultPlan string
	// Logger hears, at info, what an operator could set to admit a
	// refused destination (the customer is told what to do instead); nil
	// logs nothing.
	Logger *slog.Logger
}

// CheckURL validates a destination: absolute http(s), and every address it
// resolves to is allowed (a *FieldError on url otherwise).
func (s *Service) CheckURL(ctx context.Context, raw string) error {
	ctx, cancel := context.WithTimeout(ctx, urlCheckTimeout)
	defer cancel()
	err := s.Guard.CheckURL(ctx, raw, nil)
	var ue *netguard.URLError
	if errors.As(err, &ue) {
		if ue.OperatorHint != "" && s.Logger != nil {
			s.Logger.InfoContext(ctx, "webhook destination refused", slog.String("reason", ue.Message),
				slog.String("operator_hint", ue.OperatorHint))
		}
		return &FieldError{Field: "url", Message: ue.Message}
	}
	if err != nil {
		return fmt.Errorf("checking url: %w", err)
	}
	return nil
}

// CheckEventTypes checks a type filter: 1 to MaxEventTypes registered
// types, none twice.
func CheckEventTypes(types []string) error {
	if len(types) > MaxEventTypes {
		return &FieldError{Field: "event_types", Message: fmt.Sprintf("must have at most %d items", MaxEventTypes)}
	}
	if len(types) == 0 {
		return &FieldError{Field: "event_types", Message: "must name at least one type; omit it (or send null) for every type"}
	}
	seen := map[string]bool{}
	for i, t := range types {
		field := fmt.Sprintf("event_types[%d]", i)
		if _, ok := events.Lookup(t); !ok {
			return &FieldError{Field: field, Message: fmt.Sprintf("%q is not a registered event type (see GET /api/accounts/me/events/types)", t)}
		}
		if seen[t] {
			return &FieldError{Field: field, Message: fmt.Sprintf("%q is listed twice", t)}
		}
		seen[t] = true
	}
	return nil
}

// NormalizeDomainFilter normalises a domain filter (events'
// rule).
func NormalizeDomainFilter(raw string) (string, error) {
	d, err := events.NormalizeDomainFilter(raw)
	if err != nil {
		return "", &FieldError{Field: "domain_filter", Message: err.Error()}
	}
	return d, nil
}

// CheckTag trims a tag filter and checks its length (events' rule).
func CheckTag(raw string) (string, error) {
	t, err := events.NormalizeTagFilter(raw)
	if err != nil {
		return "", &FieldError{Field: "tag_filter", Message: err.Error()}
	}
	return t, nil
}

// Get returns the account's subscription id.
func Get(ctx context.Context, db dbsqlc.DBTX, accountID, id uuid.UUID) (dbsqlc.EventSubscription, error) {
	row, err := dbsqlc.New().SubscriptionGetByID(ctx, db, dbsqlc.SubscriptionGetByIDParams{ID: id, AccountID: accountID})
	if dbutil.IsNotFound(err) {
		return row, ErrNotFound
	}
	if err != nil {
		return row, fmt.Errorf("reading event subscription: %w", err)
	}
	return row, nil
}

// List returns the account's subscriptions.
func List(ctx context.Context, db dbsqlc.DBTX, accountID uuid.UUID) ([]dbsqlc.EventSubscription, error) {
	rows, err := dbsqlc.New().SubscriptionListByAccount(ctx, db, dbsqlc.SubscriptionListByAccountParams{AccountID: accountID, Max: MaxPerAccount})
	if err != nil {
		return nil, fmt.Errorf("listing event subscriptions: %w", err)
	}
	return rows, nil
}

// Delete deletes the account's subscription id and its deliveries.
func Delete(ctx context.Context, db dbsqlc.DBTX, accountID, id uuid.UUID) error {
	n, err := dbsqlc.New().SubscriptionDelete(ctx, db, dbsqlc.SubscriptionDeleteParams{ID: id, AccountID: accountID})
	if err != nil {
		return fmt.Errorf("deleting event subscription: %w", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

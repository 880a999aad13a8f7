package providers

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/mail"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Suppression reasons.
const (
	ReasonHardBounce = "hard_bounce"
	ReasonComplaint  = "complaint"
	ReasonManual     = "manual"
)

// RecipientHash is the lookup key of an address: SHA-256 of the trimmed,
// lower-cased whole address (emails match case-insensitively).
func RecipientHash(addr string) [32]byte {
	return sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(addr))))
}

// ErrBadEmail means an address is not one bare email address (422).
var ErrBadEmail = errors.New("must be one email address such as ann@example.com")

// ErrAlreadySuppressed is a manual add of a suppressed address (409).
var ErrAlreadySuppressed = errors.New("the address is already suppressed")

// CheckEmail validates an address given to the suppression routes.
func CheckEmail(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if len(raw) < 3 || len(raw) > 320 {
		return "", ErrBadEmail
	}
	a, err := mail.ParseAddress(raw)
	if err != nil || a.Address != raw || a.Name != "" {
		return "", ErrBadEmail
	}
	at := strings.LastIndexByte(raw, '@')
	if at <= 0 || at == len(raw)-1 {
		return "", ErrBadEmail
	}
	return raw, nil
}

// Suppression is one entry as the API shows it.
type Suppression struct {
	Email      string
	Reason     string
	Domain     *string
	ProviderID *uuid.UUID
	Since      time.Time
}

func suppressionFromRow(r dbsqlc.Suppression) Suppression {
	return Suppression{Email: r.Email, Reason: r.Reason, Domain: r.Domain, ProviderID: r.ProviderID, Since: r.CreatedAt.UTC()}
}

// CheckSuppression looks an address up (one unique-index probe).
func CheckSuppression(ctx context.Context, db dbutil.Executor, accountID uuid.UUID, email string) (*Suppression, error) {
	h := RecipientHash(email)
	row, err := dbsqlc.New().SuppressionGetByHash(ctx, db, dbsqlc.SuppressionGetByHashParams{AccountID: accountID, EmailHash: h[:]})
	if dbutil.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s := suppressionFromRow(row)
	return &s, nil
}

// AddManual suppresses an address by hand.
func AddManual(ctx context.Context, db dbutil.Executor, accountID uuid.UUID, email string, domain *string) (Suppression, error) {
	h := RecipientHash(email)
	row, err := dbsqlc.New().SuppressionInsert(ctx, db, dbsqlc.SuppressionInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: accountID, Email: email, EmailHash: h[:], Reason: ReasonManual, Domain: domain,
	})
	if dbutil.IsNotFound(err) {
		return Suppression{}, ErrAlreadySuppressed
	}
	if err != nil {
		return Suppression{}, err
	}
	return suppressionFromRow(row), nil
}

// Remove deletes an address's entry; false when there was none.
func Remove(ctx context.Context, db dbutil.Executor, accountID uuid.UUID, email string) (bool, error) {
	h := RecipientHash(email)
	n, err := dbsqlc.New().SuppressionDeleteByHash(ctx, db, dbsqlc.SuppressionDeleteByHashParams{AccountID: accountID, EmailHash: h[:]})
	return n > 0, err
}

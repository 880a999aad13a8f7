// Package alerts is the acknowledgement of alerts: an alert is an event of
// the account's log raised to critical severity (internal/events stores and
// lists it); this package records and withdraws who investigated it, each
// time with an audit event in the same transaction.
package alerts

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

var (
	// ErrNotFound: the event is not the account's, or is not an alert.
	ErrNotFound = errors.New("alert not found")
	// ErrNotAcknowledged: withdrawing an acknowledgement the alert has not.
	ErrNotAcknowledged = errors.New("the alert is not acknowledged")
	// ErrBlankAcknowledger: an acknowledgement names nobody.
	ErrBlankAcknowledger = errors.New("must not be blank")
)

// AlreadyAcknowledgedError: acknowledging an alert that is acknowledged.
type AlreadyAcknowledgedError struct {
	By *string // who acknowledged it
}

func (e *AlreadyAcknowledgedError) Error() string {
	by := ""
	if e.By != nil {
		by = " by " + strconv.Quote(*e.By)
	}
	return "the alert is already acknowledged" + by + "; withdraw the acknowledgement (DELETE) first"
}

// Acknowledgement is who investigated an alert.
type Acknowledgement struct {
	By   string  // trimmed; ErrBlankAcknowledger when blank
	Note *string // a blank note is none
	// KeyIdentifier identifies the API key that acknowledges.
	KeyIdentifier string
}

// AcknowledgedPayload is the payload of alert_acknowledged.
type AcknowledgedPayload struct {
	AlertID        uuid.UUID `json:"alert_id"`
	AlertType      string    `json:"alert_type"`
	AcknowledgedBy string    `json:"acknowledged_by"`
	Note           *string   `json:"note"`
	KeyIdentifier  string    `json:"key_identifier"`
}

// UnacknowledgedPayload is the payload of alert_unacknowledged.
type UnacknowledgedPayload struct {
	AlertID                  uuid.UUID `json:"alert_id"`
	AlertType                string    `json:"alert_type"`
	PreviouslyAcknowledgedBy *string   `json:"previously_acknowledged_by"`
	PreviousNote             *string   `json:"previous_note"`
	KeyIdentifier            string    `json:"key_identifier"`
}

// Acknowledge records ack on the account's alert id and emits
// alert_acknowledged in the same transaction. Of concurrent
// acknowledgements exactly one succeeds; the others, and any on an
// acknowledged alert, fail with *AlreadyAcknowledgedError.
func Acknowledge(ctx context.Context, db dbutil.Executor, em *events.Emitter, accountID, id uuid.UUID, ack Acknowledgement, now time.Time) (dbsqlc.Event, error) {
	by := strings.TrimSpace(ack.By)
	if by == "" {
		return dbsqlc.Event{}, ErrBlankAcknowledger
	}
	var note *string
	if ack.Note != nil && strings.TrimSpace(*ack.Note) != "" {
		note = ack.Note
	}
	now = now.UTC()
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.Event, error) {
		row, err := dbsqlc.New().AlertAcknowledge(ctx, tx, dbsqlc.AlertAcknowledgeParams{
			AcknowledgedAt: now, AcknowledgedBy: by, Note: note, KeyIdentifier: ack.KeyIdentifier,
			ID: id, AccountID: accountID,
		})
		if dbutil.IsNotFound(err) {
			return row, stateError(ctx, tx, accountID, id, true)
		}
		if err != nil {
			return row, fmt.Errorf("acknowledging alert: %w", err)
		}
		if _, err := em.Emit(ctx, tx, events.Event{
			AccountID: accountID, Type: events.TypeAlertAcknowledged, Domain: deref(row.Domain), Tags: row.Tags, At: now,
			Payload: AcknowledgedPayload{AlertID: row.ID, AlertType: row.EventType, AcknowledgedBy: by, Note: note, KeyIdentifier: ack.KeyIdentifier},
		}); err != nil {
			return row, fmt.Errorf("emitting alert_acknowledged: %w", err)
		}
		return row, nil
	})
}

// Unacknowledge withdraws the acknowledgement of the account's alert id and
// emits alert_unacknowledged (with what was withdrawn) in the same
// transaction: ErrNotAcknowledged when there is none.
func Unacknowledge(ctx context.Context, db dbutil.Executor, em *events.Emitter, accountID, id uuid.UUID, keyIdentifier string, now time.Time) (dbsqlc.Event, error) {
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.Event, error) {
		row, err := dbsqlc.New().AlertUnacknowledge(ctx, tx, dbsqlc.AlertUnacknowledgeParams{ID: id, AccountID: accountID})
		if dbutil.IsNotFound(err) {
			return dbsqlc.Event{}, stateError(ctx, tx, accountID, id, false)
		}
		if err != nil {
			return dbsqlc.Event{}, fmt.Errorf("withdrawing acknowledgement: %w", err)
		}
		if _, err := em.Emit(ctx, tx, events.Event{
			AccountID: accountID, Type: events.TypeAlertUnacknowledged, Domain: deref(row.Domain), Tags: row.Tags, At: now,
			Payload: UnacknowledgedPayload{AlertID: row.ID, AlertType: row.EventType, PreviouslyAcknowledgedBy: row.PreviousBy,
				PreviousNote: row.PreviousNote, KeyIdentifier: keyIdentifier},
		}); err != nil {
			return dbsqlc.Event{}, fmt.Errorf("emitting alert_unacknowledged: %w", err)
		}
		return dbsqlc.Event{ID: row.ID, AccountID: row.AccountID, EventType: row.EventType, Severity: row.Severity,
			Domain: row.Domain, Tags: row.Tags, Payload: row.Payload, CreatedAt: row.CreatedAt}, nil
	})
}

// stateError explains why a transition did not apply: the event is not
// the account's alert (ErrNotFound) or is not in the state the transition
// leaves.
func stateError(ctx context.Context, tx dbutil.Tx, accountID, id uuid.UUID, acknowledging bool) error {
	row, err := dbsqlc.New().EventGetByID(ctx, tx, dbsqlc.EventGetByIDParams{ID: id, AccountID: accountID})
	if dbutil.IsNotFound(err) || (err == nil && row.Severity != string(events.SeverityCritical)) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("reading alert: %w", err)
	}
	if acknowledging {
		return &AlreadyAcknowledgedError{By: row.AcknowledgedBy}
	}
	return ErrNotAcknowledged
}

// List lists a page of the account's alerts (f.AccountID), only the
// acknowledged or unacknowledged ones when acknowledged is set.
func List(ctx context.Context, db dbutil.Executor, f events.ListFilter, acknowledged *bool) ([]dbsqlc.Event, *events.Cursor, error) {
	f.AlertsOnly = true
	f.Acknowledged = acknowledged
	rows, next, err := events.List(ctx, db, f)
	if err != nil {
		return nil, nil, fmt.Errorf("listing alerts: %w", err)
	}
	return rows, next, nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

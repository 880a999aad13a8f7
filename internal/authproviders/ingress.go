package authproviders

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/pgtext"
)

// ErrSignature is a webhook whose signature does not verify.
var ErrSignature = errors.New("webhook signature does not verify")

// ErrNoEventID is returned by Apply for a verified event that carries no
// id to deduplicate it by (neither in its payload nor in its headers).
var ErrNoEventID = errors.New("the event has no id")

// ErrBadEventID is returned by Apply for a webhook-id header that Postgres
// cannot store (ParseEvent checks the payload's own strings).
var ErrBadEventID = errors.New("the webhook-id header holds a NUL character or invalid UTF-8, which cannot be stored")

// Tolerance is how far a webhook's timestamp may be from now.
const Tolerance = 5 * time.Minute

// VerifySignature checks a provider webhook over its raw body: WorkOS's
// WorkOS-Signature (t=<ms>, v1=<hex HMAC-SHA256 of "t.body">), or Standard
// Webhooks under its own header names or Svix's (svix-id, svix-timestamp,
// svix-signature: Clerk). It returns the message id of the headers.
func VerifySignature(secret string, h http.Header, body []byte, now time.Time) (string, error) {
	if sig := h.Get("WorkOS-Signature"); sig != "" {
		return "", verifyWorkOS(secret, sig, body, now)
	}
	std := http.Header{}
	for _, name := range []string{"id", "timestamp", "signature"} {
		v := h.Get("webhook-" + name)
		if v == "" {
			v = h.Get("svix-" + name)
		}
		std.Set("webhook-"+name, v)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return "", fmt.Errorf("the provider's webhook secret is not a Standard Webhooks secret: %w", err)
	}
	if err := wh.Verify(body, std); err != nil {
		return "", fmt.Errorf("%w: %v", ErrSignature, err)
	}
	return std.Get("webhook-id"), nil
}

func verifyWorkOS(secret, header string, body []byte, now time.Time) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	ms, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return fmt.Errorf("%w: malformed WorkOS-Signature", ErrSignature)
	}
	if math.Abs(float64(now.UnixMilli()-ms)) > float64(Tolerance.Milliseconds()) {
		return fmt.Errorf("%w: timestamp outside the tolerance", ErrSignature)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(want, got) {
		return ErrSignature
	}
	return nil
}

// Action is what a user event does to links.
type Action int

// Actions.
const (
	ActionIgnore Action = iota
	ActionUpsert
	ActionDelete
)

// Event is a provider's user event, normalised.
type Event struct {
	ID      string // the provider's stable event id ("" when it has none)
	Type    string
	Action  Action
	Subject string
	Email   string
}

// MaxBodyBytes bounds a webhook body.
const MaxBodyBytes = 256 << 10

// ParseEvent reads the user events of every supported shape: Clerk
// ({type, data: {id, email_addresses, primary_email_address_id}}), WorkOS
// ({id, event, data: {id, email}}), Supabase database webhooks on
// auth.users ({type: INSERT|UPDATE|DELETE, table: users, record,
// old_record}) and the generic {id, type, data: {id, email}}. A user
// event whose strings Postgres cannot store (a NUL character) is refused.
func ParseEvent(body []byte) (Event, error) {
	if len(body) > MaxBodyBytes {
		return Event{}, fmt.Errorf("body larger than %d bytes", MaxBodyBytes)
	}
	var raw struct {
		ID        string          `json:"id"`
		Type      string          `json:"type"`
		Event     string          `json:"event"`
		Table     string          `json:"table"`
		Data      json.RawMessage `json:"data"`
		Record    json.RawMessage `json:"record"`
		OldRecord json.RawMessage `json:"old_record"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return Event{}, fmt.Errorf("malformed JSON: %w", err)
	}
	ev := Event{ID: raw.ID, Type: raw.Type}
	if ev.Type == "" {
		ev.Type = raw.Event
	}
	user := raw.Data
	switch strings.ToUpper(ev.Type) {
	case "INSERT", "UPDATE", "DELETE": // Supabase database webhook
		if raw.Table != "users" {
			return Event{Type: ev.Type}, nil
		}
		ev.Type = map[string]string{"INSERT": "user.created", "UPDATE": "user.updated", "DELETE": "user.deleted"}[strings.ToUpper(ev.Type)]
		user = raw.Record
		if ev.Type == "user.deleted" {
			user = raw.OldRecord
		}
	}
	switch ev.Type {
	case "user.created", "user.updated", "user.signedup", "user.signed_up":
		ev.Action = ActionUpsert
	case "user.deleted", "user.removed":
		ev.Action = ActionDelete
	default:
		return ev, nil
	}
	var u struct {
		ID             string `json:"id"`
		UserID         string `json:"user_id"`
		Email          string `json:"email"`
		PrimaryEmailID string `json:"primary_email_address_id"`
		EmailAddresses []struct {
			ID    string `json:"id"`
			Email string `json:"email_address"`
		} `json:"email_addresses"`
		UpdatedAt string `json:"updated_at"`
	}
	if len(user) == 0 || json.Unmarshal(user, &u) != nil {
		return ev, errors.New("the event carries no user object")
	}
	ev.Subject = u.ID
	if ev.Subject == "" {
		ev.Subject = u.UserID
	}
	ev.Email = u.Email
	for _, a := range u.EmailAddresses {
		if ev.Email == "" || a.ID == u.PrimaryEmailID {
			ev.Email = a.Email
		}
	}
	ev.Email = strings.ToLower(strings.TrimSpace(ev.Email))
	if ev.Subject == "" {
		return ev, errors.New("the event's user has no id")
	}
	if ev.ID == "" && raw.Table == "users" {
		// Supabase signs each retry with a new webhook id: the payload
		// itself names the change.
		ev.ID = ev.Type + ":" + ev.Subject + ":" + u.UpdatedAt
	}
	for _, f := range []struct{ name, v string }{{"id", ev.ID}, {"type", ev.Type}, {"user id", ev.Subject}, {"email", ev.Email}} {
		if err := pgtext.Check(f.v); err != nil {
			return ev, fmt.Errorf("the event's %s %w", f.name, err)
		}
	}
	return ev, nil
}

// Apply records ev for provider p within tx, once per event id, and
// creates, updates or removes the subject's link. applied is false for a
// duplicate.
func Apply(ctx context.Context, tx dbutil.Tx, p dbsqlc.AuthProvider, ev Event, headerID string) (bool, error) {
	q := dbsqlc.New()
	id := ev.ID
	if id == "" {
		id = headerID
	}
	if id == "" {
		return false, ErrNoEventID
	}
	if pgtext.Check(id) != nil {
		return false, ErrBadEventID
	}
	n, err := q.AuthProviderWebhookEventInsert(ctx, tx, dbsqlc.AuthProviderWebhookEventInsertParams{ProviderID: p.ID, EventID: id, EventType: ev.Type})
	if err != nil {
		return false, fmt.Errorf("error recording webhook event: %w", err)
	}
	if n == 0 {
		return false, nil
	}
	switch ev.Action {
	case ActionUpsert:
		_, err = q.AuthProviderLinkUpsertSubject(ctx, tx, dbsqlc.AuthProviderLinkUpsertSubjectParams{
			ID: uuid.Must(uuid.NewV7()), ProviderID: p.ID, AccountID: p.AccountID, Subject: ev.Subject, Email: nonEmpty(ev.Email),
		})
	case ActionDelete:
		_, err = q.AuthProviderLinkDeleteBySubject(ctx, tx, dbsqlc.AuthProviderLinkDeleteBySubjectParams{ProviderID: p.ID, Subject: ev.Subject})
	}
	if err != nil {
		return false, fmt.Errorf("error applying %s: %w", ev.Type, err)
	}
	return true, nil
}

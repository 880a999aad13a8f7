// Package esp holds what every sending provider's webhook package shares:
// the normalised, per-recipient message event and the limits every parser
// of a provider payload applies. Each provider's signature scheme and
// payload format is a leaf package beside it (sendgrid, mailgun, resend,
// postmark, ses), none of which knows the database.
package esp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/pgtext"
)

// ReplayRetention is how long a stored provider payload, and with it the
// replay key (Svix id, SNS MessageId, Mailgun token, body hash) that makes a
// repeat of the request a duplicate, is kept after it was normalised.
const ReplayRetention = 7 * 24 * time.Hour

// MaxAgeLimit is the largest PROVIDER_WEBHOOK_MAX_AGE. The window is open on
// both sides of the clock: a request's timestamp may be up to the window
// ahead of its arrival, and a replay is accepted up to the window after the
// timestamp, so a replay can come up to twice the window after the original
// arrived. Twice the window must stay within ReplayRetention, or a replay
// arriving after its key was pruned would be stored as new.
const MaxAgeLimit = ReplayRetention / 2

// DefaultMaxAge is PROVIDER_WEBHOOK_MAX_AGE's default: longer than
// providers' retries with the original timestamp (SendGrid 24 h, Mailgun 8
// h, Svix about 1.5 days, SNS about an hour by default), within MaxAgeLimit.
const DefaultMaxAge = 72 * time.Hour

// MaxPayloadBytes bounds one webhook body a provider package parses.
const MaxPayloadBytes = 1 << 20

// MaxEventsPerPayload bounds the events one payload may split into
// (SendGrid batches up to a few thousand; SES lists at most 50 recipients).
const MaxEventsPerPayload = 5000

// Limits on the strings an event carries, so a hostile payload cannot blow
// up a row.
const (
	MaxIDLength        = 256
	MaxRecipientLength = 320
	MaxDetailLength    = 1000
)

// Type is a normalised message event type.
type Type string

// Event types, the same words for every provider.
const (
	TypeSent         Type = "sent"
	TypeDelivered    Type = "delivered"
	TypeDeferred     Type = "deferred"
	TypeBounced      Type = "bounced"
	TypeComplained   Type = "complained"
	TypeUnsubscribed Type = "unsubscribed"
	// TypeSuppressed is a message the provider did not send because the
	// recipient is on its own suppression list. It never counts as a bounce.
	TypeSuppressed Type = "suppressed"
)

// Types lists every event type in display order.
var Types = []Type{TypeSent, TypeDelivered, TypeDeferred, TypeBounced, TypeComplained, TypeUnsubscribed, TypeSuppressed}

// Bounce classes.
const (
	BounceHard = "hard"
	BounceSoft = "soft"
)

// Event is one provider event about one recipient.
type Event struct {
	// ID is the provider's event id, made unique per recipient when one
	// provider event covers several; it is the dedupe key.
	ID string `json:"id"`
	// MessageID is the provider's message id (may be empty).
	MessageID string `json:"message_id"`
	// Sender is the envelope or From address when the payload carries one
	// (its domain is the sending domain).
	Sender string `json:"sender,omitempty"`
	// Recipient is the address as the provider gave it.
	Recipient string    `json:"recipient"`
	Type      Type      `json:"type"`
	Bounce    string    `json:"bounce,omitempty"` // hard or soft, for bounced
	Timestamp time.Time `json:"timestamp"`
	// Classification is the provider's own words for the event, e.g.
	// "bounce/bounce 5.1.1", "Permanent/General", "HardBounce".
	Classification string `json:"classification"`
	// Detail is the provider's human-readable reason, if any (truncated).
	Detail string `json:"detail,omitempty"`
}

// ErrPayload means a payload could not be parsed; it is the caller's 400.
var ErrPayload = errors.New("malformed provider payload")

// ErrSignature means a signature (or its headers) is missing or does not
// verify; it is the caller's 401.
var ErrSignature = errors.New("invalid provider signature")

// ErrTooOld means a signed timestamp is outside the allowed age; it wraps
// ErrSignature.
var ErrTooOld = fmt.Errorf("%w: timestamp outside PROVIDER_WEBHOOK_MAX_AGE", ErrSignature)

// Errorf returns an error wrapping base (ErrPayload or ErrSignature) with a
// message.
func Errorf(base error, msg string) error { return fmt.Errorf("%w: %s", base, msg) }

// CheckAge reports whether ts is within maxAge of now, either way. A zero
// maxAge turns the check off.
func CheckAge(ts, now time.Time, maxAge time.Duration) error {
	if maxAge <= 0 {
		return nil
	}
	if ts.Before(now.Add(-maxAge)) || ts.After(now.Add(maxAge)) {
		return ErrTooOld
	}
	return nil
}

// Clip truncates s to n bytes on a rune boundary.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !validTail(s) {
		s = s[:len(s)-1]
	}
	return s
}

func validTail(s string) bool {
	// A string cut inside a multi-byte rune ends in a continuation byte
	// whose lead byte is incomplete.
	for i := len(s) - 1; i >= 0 && i >= len(s)-4; i-- {
		c := s[i]
		if c < 0x80 {
			return true
		}
		if c >= 0xC0 {
			need := 2
			switch {
			case c >= 0xF0:
				need = 4
			case c >= 0xE0:
				need = 3
			}
			return len(s)-i >= need
		}
	}
	return true
}

// Finish checks and trims the events a parser produced: each must have an
// id, a recipient and a type; strings are cleaned for Postgres (a NUL
// character or invalid UTF-8 becomes U+FFFD: a signed payload may carry
// them, and refusing would lose the real events beside them) and clipped.
// It returns ErrPayload when there are more than MaxEventsPerPayload.
func Finish(evs []Event) ([]Event, error) {
	if len(evs) > MaxEventsPerPayload {
		return nil, Errorf(ErrPayload, "too many events in one payload")
	}
	out := evs[:0]
	for _, e := range evs {
		e.Recipient = strings.TrimSpace(e.Recipient)
		if e.ID == "" || e.Recipient == "" || e.Type == "" {
			continue
		}
		e.ID = Clip(pgtext.Clean(e.ID), MaxIDLength)
		e.MessageID = Clip(pgtext.Clean(e.MessageID), MaxIDLength)
		e.Recipient = Clip(pgtext.Clean(e.Recipient), MaxRecipientLength)
		e.Sender = Clip(pgtext.Clean(strings.TrimSpace(e.Sender)), MaxRecipientLength)
		e.Classification = Clip(pgtext.Clean(e.Classification), MaxDetailLength)
		e.Detail = Clip(pgtext.Clean(e.Detail), MaxDetailLength)
		if e.Timestamp.IsZero() {
			e.Timestamp = time.Unix(0, 0).UTC()
		}
		e.Timestamp = e.Timestamp.UTC()
		out = append(out, e)
	}
	return out, nil
}

// Domain returns the lower-case domain of an address (after the last @), or
// "" when there is none.
func Domain(addr string) string {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 || at == len(addr)-1 {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(addr[at+1:])), ">")
}

// UnixSeconds converts a JSON number of (possibly fractional) Unix seconds;
// anything unusable gives the zero time.
func UnixSeconds(n json.Number) time.Time {
	f, err := n.Float64()
	if err != nil || f < 0 || f > 1e11 {
		return time.Time{}
	}
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9)).UTC()
}

// Join joins the non-empty parts with "/".
func Join(parts ...string) string {
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, "/")
}

// SenderDomain returns the lower-case domain of a sender, which may be a
// bare address or "Name <addr>"; "" when there is none.
func SenderDomain(sender string) string {
	if i := strings.LastIndexByte(sender, '<'); i >= 0 {
		sender = strings.TrimSuffix(strings.TrimSpace(sender[i+1:]), ">")
	}
	return Domain(sender)
}

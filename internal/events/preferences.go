package events

import (
	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// Channels an event goes out on.
const (
	ChannelEmail   = "email"
	ChannelWebhook = "webhook"
)

// ChannelPrefs is what an account has set for one channel and one event
// type: the account-wide mute, the type's override (nil: not set) and its
// group's switch (nil: not set).
type ChannelPrefs struct {
	Muted    bool
	Override *bool
	Group    *bool
}

// Decision is the outcome of Resolve and the rule that gave it.
type Decision struct {
	Send bool `json:"send"`
	// Rule is "required", "mute", "override", "group" or "default".
	Rule string `json:"rule"`
}

// Resolve decides whether an event goes out on a channel. First match
// wins: a required type (a group with Required: audit, security) always
// goes out; the account-wide channel mute blocks; the type's override
// decides; the group's switch decides; otherwise on. It is the only place
// the precedence is written: the fan-out, the alert mail and the digest
// all call it.
func Resolve(required bool, p ChannelPrefs) Decision {
	switch {
	case required:
		return Decision{Send: true, Rule: "required"}
	case p.Muted:
		return Decision{Send: false, Rule: "mute"}
	case p.Override != nil:
		return Decision{Send: *p.Override, Rule: "override"}
	case p.Group != nil:
		return Decision{Send: *p.Group, Rule: "group"}
	default:
		return Decision{Send: true, Rule: "default"}
	}
}

// AlertEmailKind is the River job kind that mails one alert.
const AlertEmailKind = "notify_alert_email"

// AlertEmailArgs mail one alert (a critical event) to the account's
// verified notification addresses. The emitter inserts it in the emitting
// transaction when the email channel resolves to on and the account has a
// verified address; the worker is jobs/notify.go. River retries it while
// the relay is down (MaxAttempts 25, about three weeks of backoff).
type AlertEmailArgs struct {
	EventID uuid.UUID `json:"event_id"`
}

// Kind implements river.JobArgs.
func (AlertEmailArgs) Kind() string { return AlertEmailKind }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (AlertEmailArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: river.QueueDefault, MaxAttempts: 25}
}

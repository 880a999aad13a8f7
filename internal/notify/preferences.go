// Package notify holds the account's notification preferences, its
// notification addresses and their verification, and the email channel:
// the alert, digest and verification messages and the SMTP relay that
// sends them. The precedence of preferences is events.Resolve; this
// package stores what it reads.
package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

// Errors the API maps to statuses.
var (
	ErrUnknownGroup     = errors.New("unknown preference group")
	ErrUnknownType      = errors.New("unknown event type")
	ErrRequired         = errors.New("required events are always sent")
	ErrNoOverride       = errors.New("no override for this event type")
	ErrEmptyOverride    = errors.New("an override sets email, webhook or both")
	ErrAddressNotFound  = errors.New("notification address not found")
	ErrAddressExists    = errors.New("this address is already a notification address of the account")
	ErrTooManyAddresses = fmt.Errorf("an account has at most %d notification addresses; remove one first", MaxAddresses)
	ErrBadToken         = errors.New("the verification token is unknown, used or expired")
)

// Channels are a pair of channel switches.
type Channels struct {
	Email   bool `json:"email"`
	Webhook bool `json:"webhook"`
}

// Override is a per-type override; nil on a channel means the group decides.
type Override struct {
	Email   *bool `json:"email"`
	Webhook *bool `json:"webhook"`
}

// TypePrefs is one event type with its override and the effective result.
type TypePrefs struct {
	EventType string `json:"event_type"`
	// Override has both channels null when the type has none.
	Override Override        `json:"override"`
	Email    events.Decision `json:"email"`
	Webhook  events.Decision `json:"webhook"`
}

// GroupPrefs is one group with its switches and its types.
type GroupPrefs struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
	// Set is false while the account has not set the group (both on).
	Set      bool        `json:"set"`
	Channels Channels    `json:"channels"`
	Types    []TypePrefs `json:"types"`
}

// Preferences is everything an account has set, resolved per type.
type Preferences struct {
	Mutes  Channels     `json:"mutes"`
	Groups []GroupPrefs `json:"groups"`
}

// Set is an account's stored preferences, for deciding many types at
// once (the digest, the preferences view).
type Set struct {
	Mutes     Channels
	Groups    map[string]Channels
	Overrides map[string]Override
}

// Load reads an account's preferences: three small reads.
func Load(ctx context.Context, db dbutil.Executor, account uuid.UUID) (Set, error) {
	q := dbsqlc.New()
	set := Set{Groups: map[string]Channels{}, Overrides: map[string]Override{}}
	st, err := q.NotificationSettingsGet(ctx, db, account)
	switch {
	case dbutil.IsNotFound(err):
	case err != nil:
		return Set{}, fmt.Errorf("error reading notification settings: %w", err)
	default:
		set.Mutes = Channels{Email: st.MuteEmail, Webhook: st.MuteWebhook}
	}
	groups, err := q.PreferenceGroupList(ctx, db, account)
	if err != nil {
		return Set{}, fmt.Errorf("error reading preference groups: %w", err)
	}
	for _, g := range groups {
		set.Groups[g.GroupName] = Channels{Email: g.Email, Webhook: g.Webhook}
	}
	overrides, err := q.PreferenceOverrideList(ctx, db, account)
	if err != nil {
		return Set{}, fmt.Errorf("error reading preference overrides: %w", err)
	}
	for _, o := range overrides {
		set.Overrides[o.EventType] = Override{Email: o.Email, Webhook: o.Webhook}
	}
	return set, nil
}

// Decide resolves one type on one channel (events.ChannelEmail or
// events.ChannelWebhook) with events.Resolve.
func (s Set) Decide(eventType, channel string) events.Decision {
	t, _ := events.Lookup(eventType)
	p := events.ChannelPrefs{}
	email := channel == events.ChannelEmail
	if email {
		p.Muted = s.Mutes.Email
	} else {
		p.Muted = s.Mutes.Webhook
	}
	if o, ok := s.Overrides[eventType]; ok {
		if email {
			p.Override = o.Email
		} else {
			p.Override = o.Webhook
		}
	}
	if g, ok := s.Groups[t.Group]; ok {
		v := g.Webhook
		if email {
			v = g.Email
		}
		p.Group = &v
	}
	return events.Resolve(events.Required(eventType), p)
}

// View builds the preferences as the API shows them.
func (s Set) View() Preferences {
	out := Preferences{Mutes: s.Mutes, Groups: []GroupPrefs{}}
	byGroup := map[string][]events.Type{}
	for _, t := range events.Types() {
		byGroup[t.Group] = append(byGroup[t.Group], t)
	}
	for _, g := range events.Groups() {
		gp := GroupPrefs{Name: g.Name, Description: g.Description, Required: g.Required, Channels: Channels{Email: true, Webhook: true}, Types: []TypePrefs{}}
		if c, ok := s.Groups[g.Name]; ok {
			gp.Set, gp.Channels = true, c
		}
		for _, t := range byGroup[g.Name] {
			tp := TypePrefs{EventType: t.Name, Email: s.Decide(t.Name, events.ChannelEmail), Webhook: s.Decide(t.Name, events.ChannelWebhook)}
			tp.Override = s.Overrides[t.Name]
			gp.Types = append(gp.Types, tp)
		}
		out.Groups = append(out.Groups, gp)
	}
	return out
}

// SwitchableGroups lists the groups SetGroup accepts: every group but the
// required ones.
func SwitchableGroups() []string {
	var out []string
	for _, g := range events.Groups() {
		if !g.Required {
			out = append(out, g.Name)
		}
	}
	return out
}

// OverridableTypes lists the event types SetOverride accepts: those of the
// switchable groups.
func OverridableTypes() []string {
	var out []string
	for _, t := range events.Types() {
		if !events.Required(t.Name) {
			out = append(out, t.Name)
		}
	}
	return out
}

// SetGroup sets a group's switches. A required group cannot be switched.
func SetGroup(ctx context.Context, db dbutil.Executor, account uuid.UUID, group string, c Channels) error {
	g, ok := events.LookupGroup(group)
	if !ok {
		return ErrUnknownGroup
	}
	if g.Required {
		return ErrRequired
	}
	_, err := dbsqlc.New().PreferenceGroupUpsert(ctx, db, dbsqlc.PreferenceGroupUpsertParams{
		AccountID: account, GroupName: group, Email: c.Email, Webhook: c.Webhook,
	})
	if err != nil {
		return fmt.Errorf("error storing preference group: %w", err)
	}
	return nil
}

// SetOverride sets a type's override; a channel left nil follows the group.
func SetOverride(ctx context.Context, db dbutil.Executor, account uuid.UUID, eventType string, o Override) error {
	if _, ok := events.Lookup(eventType); !ok {
		return ErrUnknownType
	}
	if events.Required(eventType) {
		return ErrRequired
	}
	if o.Email == nil && o.Webhook == nil {
		return ErrEmptyOverride
	}
	_, err := dbsqlc.New().PreferenceOverrideUpsert(ctx, db, dbsqlc.PreferenceOverrideUpsertParams{
		AccountID: account, EventType: eventType, Email: o.Email, Webhook: o.Webhook,
	})
	if err != nil {
		return fmt.Errorf("error storing preference override: %w", err)
	}
	return nil
}

// DeleteOverride removes a type's override.
func DeleteOverride(ctx context.Context, db dbutil.Executor, account uuid.UUID, eventType string) error {
	if _, ok := events.Lookup(eventType); !ok {
		return ErrUnknownType
	}
	n, err := dbsqlc.New().PreferenceOverrideDelete(ctx, db, dbsqlc.PreferenceOverrideDeleteParams{AccountID: account, EventType: eventType})
	if err != nil {
		return fmt.Errorf("error deleting preference override: %w", err)
	}
	if n == 0 {
		return ErrNoOverride
	}
	return nil
}

// SetMutes sets the account-wide channel mutes.
func SetMutes(ctx context.Context, db dbutil.Executor, account uuid.UUID, m Channels) error {
	_, err := dbsqlc.New().NotificationSettingsUpsert(ctx, db, dbsqlc.NotificationSettingsUpsertParams{
		AccountID: account, MuteEmail: m.Email, MuteWebhook: m.Webhook,
	})
	if err != nil {
		return fmt.Errorf("error storing channel mutes: %w", err)
	}
	return nil
}

// VerificationTokenTTL is how long a verification token works: the mail,
// the API's description and the token's expiry all read it.
const VerificationTokenTTL = 48 * time.Hour

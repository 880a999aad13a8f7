// Package channels sends events to chat and paging tools beside email and
// webhook subscriptions: Slack (incoming webhooks, Block Kit), Microsoft
// Teams (workflow webhooks, Adaptive Cards 1.4) and PagerDuty (Events API
// v2, triggered by an alert and resolved when it is acknowledged).
//
// The emitting transaction chooses the channels (internal/events fanOut,
// query ChannelEmitTargets) and inserts one River job per channel; the
// rules of that choice, the messages, the outbound checks and the outcome
// of a send live here. Destinations (webhook URLs, routing keys) are
// secrets: sealed with internal/secretbox and bound to the row id.
package channels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/secretbox"
)

// Kinds of channel.
const (
	KindSlack     = "slack"
	KindTeams     = "teams"
	KindPagerDuty = "pagerduty"
)

// Kinds lists every kind, in the order the API documents them.
var Kinds = []string{KindSlack, KindTeams, KindPagerDuty}

var kindTitles = map[string]string{KindSlack: "Slack", KindTeams: "Microsoft Teams", KindPagerDuty: "PagerDuty"}

// Limits.
const (
	// MaxPerAccount caps an account's channels.
	MaxPerAccount = 20
	// MaxLabel bounds a channel's label.
	MaxLabel = 100
	// RoutingKeyLength is the length of a PagerDuty integration key.
	RoutingKeyLength = 32
	// FailingAfter is how long a channel fails before
	// notification_channel_failing is raised (once per failing period).
	FailingAfter = 24 * time.Hour
)

// DefaultPagerDutyURL is the Events API v2 endpoint of PagerDuty's US
// service region; EU accounts use https://events.eu.pagerduty.com/v2/enqueue.
const DefaultPagerDutyURL = "https://events.pagerduty.com/v2/enqueue"

var (
	// ErrNotFound: the account has no channel with the id.
	ErrNotFound = errors.New("notification channel not found")
	// ErrSecretUnreadable: the sealed destination cannot be opened with
	// the configured keys.
	ErrSecretUnreadable = errors.New("the channel's destination cannot be decrypted with the configured keys")
)

// FieldError is an invalid field of a new channel.
type FieldError struct {
	Field, Message string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Message }

// LimitError: the account has MaxPerAccount channels already.
type LimitError struct{ Max int }

func (e *LimitError) Error() string {
	return fmt.Sprintf("an account may have at most %d notification channels", e.Max)
}

// Service applies the rules with the server's keys, client and settings.
type Service struct {
	// Keyring seals and opens destinations.
	Keyring *secretbox.Keyring
	// Hosts is where channels may send (nil: the built-in lists).
	Hosts *AllowList
	// Client sends (the SSRF-guarded webhook client: no redirects).
	Client *http.Client
	// BaseURL is the dashboard's base URL, for links in messages.
	BaseURL string
	// Admit, when set, counts a send of account to url in flight, or
	// refuses it with the bound it is over (webhook.Gate.Admit): the
	// send is then not made and Result.Busy says why.
	Admit func(account uuid.UUID, url string) (release func(), busy error)
}

// New is a channel to create.
type New struct {
	Kind       string
	Label      string
	URL        *string
	RoutingKey *string
	// Groups are preference group names; nil means every group.
	Groups []string
	// MinSeverity is info, warning or critical ("" means critical).
	MinSeverity  string
	DomainFilter *string
	TagFilter    *string
}

// destination is what is sealed: the URL and, for PagerDuty, the routing
// key.
type destination struct {
	URL        string `json:"url"`
	RoutingKey string `json:"routing_key,omitempty"`
}

// Create checks n and stores the account's channel; MaxPerAccount
// (*LimitError) is checked in the insert's transaction.
func (s *Service) Create(ctx context.Context, db dbutil.Executor, accountID uuid.UUID, n New) (dbsqlc.NotificationChannel, error) {
	params, dest, err := s.insertParams(accountID, n)
	if err != nil {
		return dbsqlc.NotificationChannel{}, err
	}
	plain, err := json.Marshal(dest)
	if err != nil {
		return dbsqlc.NotificationChannel{}, fmt.Errorf("encoding destination: %w", err)
	}
	params.SecretCiphertext, params.SecretKeyID, err = s.Keyring.Seal(plain, params.ID[:])
	if err != nil {
		return dbsqlc.NotificationChannel{}, fmt.Errorf("sealing destination: %w", err)
	}
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.NotificationChannel, error) {
		q := dbsqlc.New()
		if err := q.ChannelLockAccount(ctx, tx, accountID); err != nil {
			return dbsqlc.NotificationChannel{}, fmt.Errorf("locking account: %w", err)
		}
		count, err := q.ChannelCount(ctx, tx, accountID)
		if err != nil {
			return dbsqlc.NotificationChannel{}, fmt.Errorf("counting notification channels: %w", err)
		}
		if count >= MaxPerAccount {
			return dbsqlc.NotificationChannel{}, &LimitError{Max: MaxPerAccount}
		}
		row, err := q.ChannelInsert(ctx, tx, params)
		if err != nil {
			return row, fmt.Errorf("inserting notification channel: %w", err)
		}
		return row, nil
	})
}

// Change is a partial update of a channel's label and routing filters:
// nil fields stay as they are. Its kind and destination never change
// (delete the channel and add another).
type Change struct {
	Label       *string
	MinSeverity *string
	// Groups, when set, replaces the groups; a nil *Groups (pointer to a
	// nil slice) means every group.
	Groups *[]string
	// DomainFilter and TagFilter, when set, replace the filter; a nil
	// inner pointer clears it.
	DomainFilter, TagFilter **string
}

// Update checks c, with the same rules as Create, and applies it to the
// account's channel id.
func (s *Service) Update(ctx context.Context, db dbutil.Executor, accountID, id uuid.UUID, c Change) (dbsqlc.NotificationChannel, error) {
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.NotificationChannel, error) {
		cur, err := Get(ctx, tx, accountID, id)
		if err != nil {
			return cur, err
		}
		n := New{Label: cur.Label, MinSeverity: cur.MinSeverity, Groups: cur.Groups, DomainFilter: cur.DomainFilter, TagFilter: cur.TagFilter}
		if c.Label != nil {
			n.Label = *c.Label
		}
		if c.MinSeverity != nil {
			n.MinSeverity = *c.MinSeverity
		}
		if c.Groups != nil {
			n.Groups = *c.Groups
		}
		if c.DomainFilter != nil {
			n.DomainFilter = *c.DomainFilter
		}
		if c.TagFilter != nil {
			n.TagFilter = *c.TagFilter
		}
		p := dbsqlc.ChannelInsertParams{MinSeverity: n.MinSeverity}
		if p.Label, err = checkLabel(n.Label); err != nil {
			return cur, err
		}
		if err := checkFilters(&p, n); err != nil {
			return cur, err
		}
		row, err := dbsqlc.New().ChannelUpdate(ctx, tx, dbsqlc.ChannelUpdateParams{
			ID: id, AccountID: accountID, Label: p.Label, Groups: p.Groups, MinSeverity: p.MinSeverity,
			DomainFilter: p.DomainFilter, TagFilter: p.TagFilter,
		})
		if err != nil {
			return row, fmt.Errorf("updating notification channel: %w", err)
		}
		return row, nil
	})
}

// checkLabel trims a label and checks its length.
func checkLabel(raw string) (string, error) {
	l := strings.TrimSpace(raw)
	if len([]rune(l)) > MaxLabel {
		return l, &FieldError{Field: "label", Message: fmt.Sprintf("must be at most %d characters", MaxLabel)}
	}
	return l, nil
}

// insertParams checks n: its kind, destination and filters.
func (s *Service) insertParams(accountID uuid.UUID, n New) (dbsqlc.ChannelInsertParams, destination, error) {
	p := dbsqlc.ChannelInsertParams{ID: uuid.Must(uuid.NewV7()), AccountID: accountID, Kind: n.Kind, MinSeverity: n.MinSeverity}
	if !slices.Contains(Kinds, n.Kind) {
		return p, destination{}, &FieldError{Field: "kind", Message: "must be one of " + strings.Join(Kinds, ", ")}
	}
	var err error
	if p.Label, err = checkLabel(n.Label); err != nil {
		return p, destination{}, err
	}
	dest, err := s.checkDestination(n)
	if err != nil {
		return p, dest, err
	}
	p.Destination = Redact(n.Kind, dest.URL, dest.RoutingKey)
	if err := checkFilters(&p, n); err != nil {
		return p, dest, err
	}
	return p, dest, nil
}

// checkDestination checks the URL against the kind's hosts and, for
// PagerDuty, the routing key.
func (s *Service) checkDestination(n New) (destination, error) {
	var d destination
	if n.URL != nil {
		d.URL = strings.TrimSpace(*n.URL)
	}
	switch {
	case n.Kind == KindPagerDuty:
		if n.RoutingKey == nil || !validRoutingKey(*n.RoutingKey) {
			return d, &FieldError{Field: "routing_key", Message: fmt.Sprintf("must be the %d-character integration key of a PagerDuty Events API v2 integration", RoutingKeyLength)}
		}
		d.RoutingKey = *n.RoutingKey
		if d.URL == "" {
			d.URL = DefaultPagerDutyURL
		}
	case n.RoutingKey != nil:
		return d, &FieldError{Field: "routing_key", Message: "is only for pagerduty channels"}
	case d.URL == "":
		return d, &FieldError{Field: "url", Message: "is required for " + n.Kind + " channels"}
	}
	if len(d.URL) > 2048 {
		return d, &FieldError{Field: "url", Message: "must be at most 2048 characters"}
	}
	if err := s.Hosts.Check(n.Kind, d.URL); err != nil {
		return d, &FieldError{Field: "url", Message: err.Error()}
	}
	return d, nil
}

func validRoutingKey(k string) bool {
	if len(k) != RoutingKeyLength {
		return false
	}
	for _, c := range k {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// checkFilters checks and normalises the routing filters into p.
func checkFilters(p *dbsqlc.ChannelInsertParams, n New) error {
	if p.MinSeverity == "" {
		p.MinSeverity = string(events.SeverityCritical)
	}
	if !events.Severity(p.MinSeverity).Valid() {
		return &FieldError{Field: "min_severity", Message: "must be info, warning or critical"}
	}
	if n.Groups != nil {
		p.Groups = []string{}
		for _, g := range n.Groups {
			if _, ok := events.LookupGroup(g); !ok {
				return &FieldError{Field: "groups", Message: fmt.Sprintf("%q is not a preference group (GET .../preferences lists them)", g)}
			}
			if !slices.Contains(p.Groups, g) {
				p.Groups = append(p.Groups, g)
			}
		}
	}
	if n.DomainFilter != nil {
		d, err := events.NormalizeDomainFilter(*n.DomainFilter)
		if err != nil {
			return &FieldError{Field: "domain_filter", Message: err.Error()}
		}
		p.DomainFilter = &d
	}
	if n.TagFilter != nil {
		t, err := events.NormalizeTagFilter(*n.TagFilter)
		if err != nil {
			return &FieldError{Field: "tag_filter", Message: err.Error()}
		}
		p.TagFilter = &t
	}
	return nil
}

// Redact is the form of a destination the API shows: the URL's scheme
// and host followed by "…", and for PagerDuty the routing key's last 4
// characters.
func Redact(kind, rawURL, routingKey string) string {
	s := "…"
	if u, err := url.Parse(rawURL); err == nil && u.Host != "" {
		s = u.Scheme + "://" + u.Host + "/…"
	}
	if kind == KindPagerDuty && len(routingKey) >= 4 {
		s += " key …" + routingKey[len(routingKey)-4:]
	}
	return s
}

// Get returns the account's channel id.
func Get(ctx context.Context, db dbsqlc.DBTX, accountID, id uuid.UUID) (dbsqlc.NotificationChannel, error) {
	row, err := dbsqlc.New().ChannelGetByID(ctx, db, dbsqlc.ChannelGetByIDParams{ID: id, AccountID: accountID})
	if dbutil.IsNotFound(err) {
		return row, ErrNotFound
	}
	if err != nil {
		return row, fmt.Errorf("reading notification channel: %w", err)
	}
	return row, nil
}

// List returns the account's channels, oldest first.
func List(ctx context.Context, db dbsqlc.DBTX, accountID uuid.UUID) ([]dbsqlc.NotificationChannel, error) {
	rows, err := dbsqlc.New().ChannelListByAccount(ctx, db, dbsqlc.ChannelListByAccountParams{AccountID: accountID, Max: MaxPerAccount})
	if err != nil {
		return nil, fmt.Errorf("listing notification channels: %w", err)
	}
	return rows, nil
}

// Delete deletes the account's channel id; its queued sends find it gone
// and complete without sending.
func Delete(ctx context.Context, db dbsqlc.DBTX, accountID, id uuid.UUID) error {
	n, err := dbsqlc.New().ChannelDelete(ctx, db, dbsqlc.ChannelDeleteParams{ID: id, AccountID: accountID})
	if err != nil {
		return fmt.Errorf("deleting notification channel: %w", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// open returns the channel's sealed destination.
func (s *Service) open(ch dbsqlc.NotificationChannel) (destination, error) {
	var d destination
	plain, err := s.Keyring.Open(ch.SecretKeyID, ch.SecretCiphertext, ch.ID[:])
	if err != nil {
		return d, fmt.Errorf("%w: %w", ErrSecretUnreadable, err)
	}
	if err := json.Unmarshal(plain, &d); err != nil {
		return d, fmt.Errorf("%w: %w", ErrSecretUnreadable, err)
	}
	return d, nil
}

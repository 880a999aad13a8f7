// Package selectors keeps a domain's DKIM selector inventory: every
// selector seen signing the domain's mail in aggregate reports or found
// published in DNS, with when, by which source IPs, and its key. Reports
// and DNS checks write it in their own transactions (SeenInReport,
// SeenInDNS); a daily watch marks the selectors idle that are published
// but unseen in reports for IdleAfter (WatchIdle). Events: dkim_selector_new,
// dkim_selector_idle and dkim_key_weak.
package selectors

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
)

// Bounds and rules.
const (
	// MaxPerDomain bounds the selectors kept per domain.
	MaxPerDomain = 100
	// MaxPerReport bounds the selectors one report records (the most used).
	MaxPerReport = 20
	// maxSources bounds the source IPs kept per selector.
	maxSources = 10
	// ActiveWithin: a selector seen in reports this recently is active.
	ActiveWithin = 30 * 24 * time.Hour
	// IdleAfter: a published selector unseen in reports this long is idle.
	IdleAfter = 90 * 24 * time.Hour
	// WeakBits: an RSA key shorter than this is weak.
	WeakBits = 2048
	// reportsCurrent: a domain's reports cover the idle period only when a
	// reporter that sent before it also sent this recently.
	reportsCurrent = 7 * 24 * time.Hour
)

// Statuses.
const (
	StatusActive  = "active"
	StatusIdle    = "idle"
	StatusRetired = "retired"
)

var q = dbsqlc.New()

// Domain names the domain an inventory change belongs to, for its events.
type Domain struct {
	ID        uuid.UUID
	AccountID uuid.UUID
	Name      string
	Tags      []string
}

// Use is a selector seen in a report: the source IPs that signed with it,
// and the messages they sent (to keep the busiest).
type Use struct {
	Selector string
	Sources  []string
	Messages int64
}

// SeenInReport records the selectors a report stored at now shows signing
// the domain's mail (the MaxPerReport most used), in tx, and raises
// dkim_selector_new for each new one.
func SeenInReport(ctx context.Context, tx pgx.Tx, em *events.Emitter, d Domain, uses []Use, now time.Time) error {
	sort.SliceStable(uses, func(i, j int) bool { return uses[i].Messages > uses[j].Messages })
	for _, u := range uses[:min(len(uses), MaxPerReport)] {
		sources := u.Sources[:min(len(u.Sources), maxSources)]
		inserted, err := q.DKIMSelectorSeenInReport(ctx, tx, dbsqlc.DKIMSelectorSeenInReportParams{
			DomainID: d.ID, Selector: u.Selector, SeenAt: now, Sources: sources, MaxSelectors: MaxPerDomain,
		})
		if dbutil.IsNotFound(err) {
			continue // past MaxPerDomain
		}
		if err != nil {
			return fmt.Errorf("error recording DKIM selector %s: %w", u.Selector, err)
		}
		if inserted {
			if err := emit(ctx, tx, em, d, events.TypeDKIMSelectorNew, now, map[string]any{
				"domain": d.Name, "selector": u.Selector, "origin": "report", "sources": sources}); err != nil {
				return err
			}
		}
	}
	return nil
}

// SeenInDNS records what a DNS check at now found for each selector it
// looked up, in tx: a usable or weak key publishes the selector (new ones
// raise dkim_selector_new, a new RSA key under WeakBits dkim_key_weak); no
// record unpublishes it. A check whose DKIM lookup failed (temperror)
// changes nothing.
func SeenInDNS(ctx context.Context, tx pgx.Tx, em *events.Emitter, d Domain, r *dnscheck.DKIMResult, now time.Time) error {
	if r == nil || r.Status == dnscheck.StatusTemperror {
		return nil
	}
	for _, s := range r.Selectors {
		switch {
		case s.Status == dnscheck.StatusNone:
			if err := q.DKIMSelectorUnpublished(ctx, tx, dbsqlc.DKIMSelectorUnpublishedParams{DomainID: d.ID, Selector: s.Selector}); err != nil {
				return fmt.Errorf("error recording DKIM selector %s: %w", s.Selector, err)
			}
		case s.Key != nil && !s.Key.Revoked:
			if err := published(ctx, tx, em, d, s, now); err != nil {
				return err
			}
		}
	}
	return nil
}

func published(ctx context.Context, tx pgx.Tx, em *events.Emitter, d Domain, s dnscheck.DKIMSelector, now time.Time) error {
	row, err := q.DKIMSelectorSeenInDNS(ctx, tx, dbsqlc.DKIMSelectorSeenInDNSParams{
		DomainID: d.ID, Selector: s.Selector, SeenAt: now, KeyType: s.Key.KeyType, KeyBits: int32(s.Key.Bits), MaxSelectors: MaxPerDomain,
	})
	if dbutil.IsNotFound(err) {
		return nil // past MaxPerDomain
	}
	if err != nil {
		return fmt.Errorf("error recording DKIM selector %s: %w", s.Selector, err)
	}
	if row.Inserted {
		if err := emit(ctx, tx, em, d, events.TypeDKIMSelectorNew, now, map[string]any{"domain": d.Name, "selector": s.Selector,
			"origin": "dns", "key_type": s.Key.KeyType, "key_bits": s.Key.Bits}); err != nil {
			return err
		}
	}
	if !Weak(s.Key.KeyType, s.Key.Bits) || row.PreviousWeakRecord == s.Record {
		return nil
	}
	if err := q.DKIMSelectorMarkWeak(ctx, tx, dbsqlc.DKIMSelectorMarkWeakParams{Record: s.Record, DomainID: d.ID, Selector: s.Selector}); err != nil {
		return fmt.Errorf("error marking a weak key: %w", err)
	}
	return emit(ctx, tx, em, d, events.TypeDKIMKeyWeak, now, map[string]any{"domain": d.Name, "selector": s.Selector,
		"key_type": s.Key.KeyType, "key_bits": s.Key.Bits})
}

// Weak reports whether a key is an RSA key shorter than WeakBits.
func Weak(keyType string, bits int) bool {
	return (keyType == "" || keyType == "rsa") && bits > 0 && bits < WeakBits
}

// WatchIdle raises dkim_selector_idle for every published selector unseen
// in reports for IdleAfter at now, batch per transaction, once per idle
// period (a report showing it again clears the mark), and returns how many.
// Only domains whose reports cover the period count: a reporter of the
// domain sent before it and within the last 7 days.
func WatchIdle(ctx context.Context, db dbutil.Executor, em *events.Emitter, now time.Time, batch int) (int, error) {
	total := 0
	for {
		n, err := dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (int, error) {
			rows, err := q.DKIMSelectorsIdle(ctx, tx, dbsqlc.DKIMSelectorsIdleParams{
				Before: now.Add(-IdleAfter), ReportedSince: now.Add(-reportsCurrent), MaxRows: int32(batch)})
			if err != nil {
				return 0, fmt.Errorf("error reading idle DKIM selectors: %w", err)
			}
			for _, r := range rows {
				if err := markIdle(ctx, tx, em, r, now); err != nil {
					return 0, err
				}
			}
			return len(rows), nil
		})
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
}

func markIdle(ctx context.Context, tx pgx.Tx, em *events.Emitter, r dbsqlc.DKIMSelectorsIdleRow, now time.Time) error {
	if err := q.DKIMSelectorMarkIdle(ctx, tx, dbsqlc.DKIMSelectorMarkIdleParams{IdleSince: now, DomainID: r.DomainID, Selector: r.Selector}); err != nil {
		return fmt.Errorf("error marking a DKIM selector idle: %w", err)
	}
	since := r.FirstSeenAt
	if r.ReportLastAt != nil {
		since = *r.ReportLastAt
	}
	return emit(ctx, tx, em, Domain{ID: r.DomainID, AccountID: r.AccountID, Name: r.DomainName, Tags: r.DomainTags},
		events.TypeDKIMSelectorIdle, now, map[string]any{"domain": r.DomainName, "selector": r.Selector,
			"last_seen_in_reports": r.ReportLastAt, "idle_days": int(now.Sub(since) / (24 * time.Hour))})
}

func emit(ctx context.Context, tx pgx.Tx, em *events.Emitter, d Domain, typ string, now time.Time, payload map[string]any) error {
	if _, err := em.Emit(ctx, tx, events.Event{AccountID: d.AccountID, Type: typ, Domain: d.Name, Tags: d.Tags, At: now, Payload: payload}); err != nil {
		return fmt.Errorf("error emitting %s: %w", typ, err)
	}
	return nil
}

// Selector is one selector of the inventory, as the API lists it.
type Selector struct {
	Selector        string     `json:"selector" validate:"required"`
	Status          string     `json:"status" validate:"required" enum:"active,idle,retired" description:"active: seen signing in reports in the last 30 days, or published and not idle; idle: published but unseen in reports for 90 days; retired: no longer published and not seen in reports for 30 days."`
	FirstSeenAt     time.Time  `json:"first_seen_at" validate:"required"`
	ReportFirstAt   *time.Time `json:"report_first_at" validate:"required" description:"First report showing it sign; null: never."`
	ReportLastAt    *time.Time `json:"report_last_at" validate:"required"`
	DNSFirstAt      *time.Time `json:"dns_first_at" validate:"required" description:"First DNS check that found its key; null: never."`
	DNSLastAt       *time.Time `json:"dns_last_at" validate:"required"`
	Published       bool       `json:"published" validate:"required" description:"The last DNS check that looked it up found a key."`
	KeyType         string     `json:"key_type" validate:"required" description:"rsa or ed25519; empty before a DNS check found its key."`
	KeyBits         int        `json:"key_bits" validate:"required"`
	Weak            bool       `json:"weak" validate:"required" description:"An RSA key shorter than 2048 bits."`
	Sources         []string   `json:"sources" validate:"required" description:"Source IPs seen signing with it, the latest first (at most 10)."`
	IdleSince       *time.Time `json:"idle_since" validate:"required" description:"When dkim_selector_idle was raised; null unless idle."`
	SuggestedAction string     `json:"suggested_action" validate:"required" description:"What to do about it, empty when nothing."`
}

// List returns the domain's selectors by name, with their status at now.
func List(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, now time.Time) ([]Selector, error) {
	rows, err := q.DKIMSelectorList(ctx, db, domainID)
	if err != nil {
		return nil, fmt.Errorf("error listing DKIM selectors: %w", err)
	}
	out := make([]Selector, len(rows))
	for i, r := range rows {
		s := Selector{Selector: r.Selector, FirstSeenAt: r.FirstSeenAt.UTC(), ReportFirstAt: r.ReportFirstAt, ReportLastAt: r.ReportLastAt,
			DNSFirstAt: r.DnsFirstAt, DNSLastAt: r.DnsLastAt, Published: r.Published, KeyType: r.KeyType, KeyBits: int(r.KeyBits),
			Weak: Weak(r.KeyType, int(r.KeyBits)), Sources: r.Sources, IdleSince: r.IdleSince}
		recent := r.ReportLastAt != nil && now.Sub(*r.ReportLastAt) < ActiveWithin
		switch {
		case r.Published && r.IdleSince != nil:
			s.Status, s.SuggestedAction = StatusIdle, "unseen in reports for 90 days: if nothing signs with it any more, remove its DNS record"
		case !r.Published && !recent:
			s.Status = StatusRetired
		default:
			s.Status = StatusActive
		}
		if s.Weak && s.SuggestedAction == "" {
			s.SuggestedAction = "rotate to a 2048-bit RSA or an Ed25519 key"
		}
		out[i] = s
	}
	return out, nil
}

package providers

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/health"
)

// Spike detection rules (docs/features/providers.md).
//
// Rates are per recipient over a rolling window, per (domain, provider):
// the volume is the larger of the recipients sent to and the recipients
// with an outcome (delivered + bounced), since not every provider reports
// sends. The bounce rate counts hard bounces only (what SES and mailbox
// providers judge; soft bounces retry and provider-suppressed sends are not
// bounces); the complaint rate counts complaints.
//
// A spike starts when, with at least MinVolume recipients in the window,
// the rate reaches the warning level AND is well above the domain's own
// baseline (at least BaselineFactor times the rate of the BaselineDays
// before the window, when that period had MinVolume recipients; with no
// baseline the fixed levels decide alone). It is critical at the critical
// level. One event per episode: the episode ends (and a new one may start)
// only once the rate falls below ExitFraction of the warning level.
type SpikeRules struct {
	Window         time.Duration
	MinVolume      int64
	BaselineDays   int
	BaselineFactor float64
	ExitFraction   float64
	Bounce         Levels
	Complaint      Levels
}

// SpikeHistory is how far back the spike checks read message events under
// DefaultSpikeRules: the window and the baseline days before it. Message
// events are never kept for less (internal/partitions).
var SpikeHistory = DefaultSpikeRules.Window + time.Duration(DefaultSpikeRules.BaselineDays)*24*time.Hour

// Levels are a signal's thresholds.
type Levels struct{ Warning, Critical float64 }

// DefaultSpikeRules are the documented levels: bounces 5% (SES review) and
// 10% (SES pause; twice the threshold), complaints 0.1% (SES review) and
// 0.3% (Gmail's and Yahoo's ceiling for bulk senders).
var DefaultSpikeRules = SpikeRules{
	Window: time.Hour, MinVolume: 200, BaselineDays: 7, BaselineFactor: 2, ExitFraction: 0.8,
	Bounce:    Levels{Warning: 0.05, Critical: 0.10},
	Complaint: Levels{Warning: 0.001, Critical: 0.003},
}

// Spike kinds.
const (
	SpikeBounce    = "bounce"
	SpikeComplaint = "complaint"
)

// SpikeChange is an episode that started or ended.
type SpikeChange struct {
	ProviderID uuid.UUID
	Kind       string
	Started    bool
	Severity   events.Severity
	Rate       float64
}

func rate(n, volume int64) float64 {
	if volume <= 0 {
		return 0
	}
	return float64(n) / float64(volume)
}

// round4 keeps payload rates readable (0.1234).
func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// CheckSpikes evaluates every (provider, kind) of a domain at now and
// emits bounce_spike / complaint_spike for episodes that start, in tx. It
// returns the episodes that started or ended (the caller rescores health).
func CheckSpikes(ctx context.Context, tx pgx.Tx, em *events.Emitter, domainID uuid.UUID, now time.Time, rules SpikeRules) ([]SpikeChange, error) {
	q := dbsqlc.New()
	dom, err := q.DomainGetByID(ctx, tx, domainID)
	if dbutil.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error reading domain: %w", err)
	}
	since := now.Add(-rules.Window)
	// The providers with events since the window's start (later ones
	// included, as they were stored), the window, and the baseline before it.
	active, err := DomainCounts(ctx, tx, dom.AccountID, domainID, since, time.Time{})
	if err != nil {
		return nil, err
	}
	if len(active) == 0 {
		return nil, nil
	}
	window, err := DomainCounts(ctx, tx, dom.AccountID, domainID, since, now)
	if err != nil {
		return nil, err
	}
	baseline, err := DomainCounts(ctx, tx, dom.AccountID, domainID, since.AddDate(0, 0, -rules.BaselineDays), since)
	if err != nil {
		return nil, err
	}
	providerIDs := slices.SortedFunc(maps.Keys(active), func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	var changes []SpikeChange
	for _, pid := range providerIDs {
		prov, err := q.ProviderGetForIngress(ctx, tx, pid)
		if dbutil.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, kind := range []string{SpikeBounce, SpikeComplaint} {
			ch, err := evaluate(ctx, tx, em, &dom, &prov, kind, window[pid], baseline[pid], now, rules)
			if err != nil {
				return nil, err
			}
			if ch != nil {
				changes = append(changes, *ch)
			}
		}
	}
	return changes, nil
}

func evaluate(ctx context.Context, tx pgx.Tx, em *events.Emitter, dom *dbsqlc.Domain, prov *dbsqlc.SendingProvider,
	kind string, win, base Counts, now time.Time, rules SpikeRules) (*SpikeChange, error) {
	q := dbsqlc.New()
	levels, n, bn := rules.Bounce, win.HardBounced, base.HardBounced
	if kind == SpikeComplaint {
		levels, n, bn = rules.Complaint, win.Complained, base.Complained
	}
	vol := win.Volume()
	r := rate(n, vol)
	var baseline *float64
	if base.Volume() >= rules.MinVolume {
		b := round(rate(bn, base.Volume()))
		baseline = &b
	}
	if err := q.MessageSpikeEnsure(ctx, tx, dbsqlc.MessageSpikeEnsureParams{DomainID: dom.ID, ProviderID: prov.ID, Kind: kind}); err != nil {
		return nil, err
	}
	st, err := q.MessageSpikeGetForUpdate(ctx, tx, dbsqlc.MessageSpikeGetForUpdateParams{DomainID: dom.ID, ProviderID: prov.ID, Kind: kind})
	if err != nil {
		return nil, fmt.Errorf("error locking spike state: %w", err)
	}
	upd := dbsqlc.MessageSpikeUpdateParams{
		DomainID: dom.ID, ProviderID: prov.ID, Kind: kind, Active: st.Active, StartedAt: st.StartedAt,
		EndedAt: st.EndedAt, EventID: st.EventID, Rate: round(r), CheckedAt: now,
	}
	enough := vol >= rules.MinVolume
	wellAbove := baseline == nil || r >= *baseline*rules.BaselineFactor
	var change *SpikeChange
	switch {
	case !st.Active && enough && r >= levels.Warning && wellAbove:
		sev := events.SeverityWarning
		if r >= levels.Critical {
			sev = events.SeverityCritical
		}
		payload := map[string]any{
			"domain": dom.Name, "provider": prov.Kind, "provider_id": prov.ID.String(), "provider_label": prov.Label,
			"window_minutes": int(rules.Window / time.Minute), "rate": round(r), "threshold": levels.Warning,
			"critical_threshold": levels.Critical, "baseline": baseline, "sent": vol,
		}
		typ := events.TypeBounceSpike
		if kind == SpikeComplaint {
			typ = events.TypeComplaintSpike
			payload["complaints"] = n
		} else {
			payload["bounces"] = n
		}
		ev, err := em.Emit(ctx, tx, events.Event{
			AccountID: dom.AccountID, Type: typ, Payload: payload, Domain: dom.Name, Tags: dom.Tags, Severity: sev, At: now,
		})
		if err != nil {
			return nil, fmt.Errorf("error emitting %s: %w", typ, err)
		}
		upd.Active, upd.StartedAt, upd.EndedAt, upd.EventID = true, &now, nil, &ev.ID
		change = &SpikeChange{ProviderID: prov.ID, Kind: kind, Started: true, Severity: sev, Rate: r}
	case st.Active && enough && r < levels.Warning*rules.ExitFraction:
		upd.Active, upd.EndedAt = false, &now
		change = &SpikeChange{ProviderID: prov.ID, Kind: kind, Rate: r}
	}
	if err := q.MessageSpikeUpdate(ctx, tx, upd); err != nil {
		return nil, fmt.Errorf("error storing spike state: %w", err)
	}
	return change, nil
}

// HealthCapWindow is the period whose rates cap a domain's health score.
const HealthCapWindow = 24 * time.Hour

// HealthCaps returns the caps a domain's last-24-hour bounce and complaint
// rates (over every provider) put on its health score, by the rules of
// health.BounceRateCap and health.ComplaintRateCap.
func HealthCaps(ctx context.Context, db dbutil.Executor, accountID, domainID uuid.UUID, now time.Time) ([]health.Cap, error) {
	per, err := DomainCounts(ctx, db, accountID, domainID, now.Add(-HealthCapWindow), now.Add(time.Second))
	if err != nil {
		return nil, err
	}
	win := Total(per)
	vol := win.Volume()
	var caps []health.Cap
	if cp, ok := health.BounceRateCap(rate(win.HardBounced, vol), int(vol)); ok {
		caps = append(caps, cp)
	}
	if cp, ok := health.ComplaintRateCap(rate(win.Complained, vol), int(vol)); ok {
		caps = append(caps, cp)
	}
	return caps, nil
}

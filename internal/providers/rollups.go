package providers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/esp"
	"github.com/mailwatch/mailwatch/internal/rollups"
)

// The reading rules of message-event aggregates. Every count over
// message_events is answered here, from the rollups the database keeps: the
// daily ones (message_event_account_daily and message_event_domain_daily,
// schema/0033_message_event_daily_rollups.sql) for the whole UTC days of a
// window, the hourly ones (message_event_account_hourly and
// message_event_domain_hourly, schema/0029_message_event_rollups.sql) for
// its whole hours before the first and after the last midnight, and raw
// rows only for its partial hours at either end (rollups.SplitDays), so the
// answers are exact and a window costs its days and a few dozen hours, not
// its events. The rollups are striped (schema/0038_striped_message_rollups.sql):
// a key's count is the sum of up to eight slot rows, which the queries add
// up, leaving out keys whose slots sum to zero.

// Counts are the message events of a period that the rates read: provider-
// suppressed messages are their own type and never count as bounces.
type Counts struct {
	Sent, Delivered, Bounced, HardBounced, Complained int64
}

// Volume is the recipients of the period: the larger of those sent to and
// those with an outcome (delivered + bounced), since not every provider
// reports sends.
func (c Counts) Volume() int64 { return max(c.Sent, c.Delivered+c.Bounced) }

// Rate is n (bounces, complaints) per recipient of the period; 0 without
// traffic.
func (c Counts) Rate(n int64) float64 {
	v := c.Volume()
	if v == 0 {
		return 0
	}
	return float64(n) / float64(v)
}

func (c *Counts) add(typ string, bounce *string, n int64) {
	switch esp.Type(typ) {
	case esp.TypeSent:
		c.Sent += n
	case esp.TypeDelivered:
		c.Delivered += n
	case esp.TypeBounced:
		c.Bounced += n
		if bounce != nil && *bounce == esp.BounceHard {
			c.HardBounced += n
		}
	case esp.TypeComplained:
		c.Complained += n
	}
}

// DayCount is a number of message events of one UTC day and outcome.
type DayCount struct {
	Day       time.Time
	EventType string
	Count     int64
}

// TypeCount is a number of message events of one outcome and provider kind.
type TypeCount struct {
	EventType    string
	ProviderKind string
	Count        int64
}

// window is a rollups.DayWindow as the queries take it.
type window struct {
	headHoursFrom, headHoursTo time.Time
	tailHoursFrom, tailHoursTo time.Time
	daysFrom                   time.Time
	daysTo                     pgtype.Date // not Valid: open-ended
	headFrom, headTo           time.Time
	tailFrom, tailTo           time.Time
	// hours, days and raw: whether there are whole hours, whole days and
	// partial hours to read.
	hours, days, raw bool
}

// split divides [from, until) (a zero until: open-ended) for the queries.
func split(from, until time.Time) window {
	w := rollups.SplitDays(from, until)
	out := window{
		headHoursFrom: w.HeadHours.From, headHoursTo: w.HeadHours.To, tailHoursFrom: w.TailHours.From, tailHoursTo: w.TailHours.To,
		daysFrom: w.Days.From, headFrom: w.Head.From, headTo: w.Head.To, tailFrom: w.Tail.From, tailTo: w.Tail.To,
		hours: !w.HeadHours.Empty() || !w.TailHours.Empty(), days: !w.Days.Empty(), raw: !w.Head.Empty() || !w.Tail.Empty(),
	}
	if !w.Days.To.IsZero() {
		out.daysTo = pgtype.Date{Time: w.Days.To, Valid: true}
	}
	return out
}

type dayRow struct {
	day       time.Time
	kind, typ string
	bounce    *string
	n         int64
}

// days reads an account's events of [from, until) per UTC day, provider
// kind, outcome and bounce class, with a row per source (a day may come
// several times); with domain, only that sending domain's.
func days(ctx context.Context, db dbutil.Executor, account uuid.UUID, domain *string, from, until time.Time) ([]dayRow, error) {
	q, w := dbsqlc.New(), split(from, until)
	var out []dayRow
	if domain != nil {
		return domainDays(ctx, db, account, *domain, w)
	}
	if w.days {
		rows, err := q.MessageDailyAccountDays(ctx, db, dbsqlc.MessageDailyAccountDaysParams{AccountID: account, DaysFrom: w.daysFrom, DaysTo: w.daysTo})
		if err != nil {
			return nil, fmt.Errorf("error reading daily message event rollups: %w", err)
		}
		for _, r := range rows {
			out = append(out, dayRow{r.Day, r.ProviderKind, r.EventType, r.BounceClass, r.Count})
		}
	}
	if w.hours {
		rows, err := q.MessageRollupAccountDays(ctx, db, dbsqlc.MessageRollupAccountDaysParams{AccountID: account,
			HeadHoursFrom: w.headHoursFrom, HeadHoursTo: w.headHoursTo, TailHoursFrom: w.tailHoursFrom, TailHoursTo: w.tailHoursTo})
		if err != nil {
			return nil, fmt.Errorf("error reading message event rollups: %w", err)
		}
		for _, r := range rows {
			out = append(out, dayRow{r.Day, r.ProviderKind, r.EventType, r.BounceClass, r.Count})
		}
	}
	if w.raw {
		rows, err := q.MessageRawAccountDays(ctx, db, dbsqlc.MessageRawAccountDaysParams{
			AccountID: account, HeadFrom: w.headFrom, HeadTo: w.headTo, TailFrom: w.tailFrom, TailTo: w.tailTo,
		})
		if err != nil {
			return nil, fmt.Errorf("error counting message events: %w", err)
		}
		for _, r := range rows {
			out = append(out, dayRow{r.Day, r.ProviderKind, r.EventType, r.BounceClass, r.Count})
		}
	}
	return out, nil
}

// domainDays is days for one sending domain name.
func domainDays(ctx context.Context, db dbutil.Executor, account uuid.UUID, domain string, w window) ([]dayRow, error) {
	q := dbsqlc.New()
	var out []dayRow
	if w.days {
		rows, err := q.MessageDailyDomainNameDays(ctx, db, dbsqlc.MessageDailyDomainNameDaysParams{
			AccountID: account, Domain: domain, DaysFrom: w.daysFrom, DaysTo: w.daysTo,
		})
		if err != nil {
			return nil, fmt.Errorf("error reading daily message event rollups of %s: %w", domain, err)
		}
		for _, r := range rows {
			out = append(out, dayRow{r.Day, r.ProviderKind, r.EventType, r.BounceClass, r.Count})
		}
	}
	if w.hours {
		rows, err := q.MessageRollupDomainNameDays(ctx, db, dbsqlc.MessageRollupDomainNameDaysParams{AccountID: account, Domain: domain,
			HeadHoursFrom: w.headHoursFrom, HeadHoursTo: w.headHoursTo, TailHoursFrom: w.tailHoursFrom, TailHoursTo: w.tailHoursTo})
		if err != nil {
			return nil, fmt.Errorf("error reading message event rollups of %s: %w", domain, err)
		}
		for _, r := range rows {
			out = append(out, dayRow{r.Day, r.ProviderKind, r.EventType, r.BounceClass, r.Count})
		}
	}
	if w.raw {
		rows, err := q.MessageRawDomainNameDays(ctx, db, dbsqlc.MessageRawDomainNameDaysParams{
			AccountID: account, Domain: domain, HeadFrom: w.headFrom, HeadTo: w.headTo, TailFrom: w.tailFrom, TailTo: w.tailTo,
		})
		if err != nil {
			return nil, fmt.Errorf("error counting message events of %s: %w", domain, err)
		}
		for _, r := range rows {
			out = append(out, dayRow{r.Day, r.ProviderKind, r.EventType, r.BounceClass, r.Count})
		}
	}
	return out, nil
}

// DailyVolume counts an account's message events per UTC day and outcome in
// [from, until), oldest first; with domain, only that sending domain's (the
// domain name the events carry, linked or not).
func DailyVolume(ctx context.Context, db dbutil.Executor, account uuid.UUID, domain *string, from, until time.Time) ([]DayCount, error) {
	rows, err := days(ctx, db, account, domain, from, until)
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	var out []DayCount
	for _, r := range rows {
		k := r.day.Format(time.DateOnly) + " " + r.typ
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, DayCount{Day: r.day, EventType: r.typ})
		}
		out[i].Count += r.n
	}
	out = slices.DeleteFunc(out, func(c DayCount) bool { return c.Count == 0 })
	slices.SortFunc(out, func(a, b DayCount) int { return cmp.Or(a.Day.Compare(b.Day), cmp.Compare(a.EventType, b.EventType)) })
	return out, nil
}

// TypeBreakdown counts an account's message events that happened strictly
// after since, per outcome and provider kind, ordered by both (events dated
// in the future included).
func TypeBreakdown(ctx context.Context, db dbutil.Executor, account uuid.UUID, since time.Time) ([]TypeCount, error) {
	rows, err := days(ctx, db, account, nil, rollups.After(since), time.Time{})
	if err != nil {
		return nil, err
	}
	index := map[[2]string]int{}
	var out []TypeCount
	for _, r := range rows {
		k := [2]string{r.typ, r.kind}
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, TypeCount{EventType: r.typ, ProviderKind: r.kind})
		}
		out[i].Count += r.n
	}
	out = slices.DeleteFunc(out, func(c TypeCount) bool { return c.Count == 0 })
	slices.SortFunc(out, func(a, b TypeCount) int {
		return cmp.Or(cmp.Compare(a.EventType, b.EventType), cmp.Compare(a.ProviderKind, b.ProviderKind))
	})
	return out, nil
}

// AccountCounts counts an account's message events from since on (events
// dated in the future included).
func AccountCounts(ctx context.Context, db dbutil.Executor, account uuid.UUID, since time.Time) (Counts, error) {
	rows, err := days(ctx, db, account, nil, since, time.Time{})
	if err != nil {
		return Counts{}, err
	}
	var c Counts
	for _, r := range rows {
		c.add(r.typ, r.bounce, r.n)
	}
	return c, nil
}

// DomainCounts counts a linked domain's message events in [from, until) (a
// zero until: open-ended) per provider. A provider is listed when it has at
// least one event of any type in the window.
func DomainCounts(ctx context.Context, db dbutil.Executor, account, domain uuid.UUID, from, until time.Time) (map[uuid.UUID]Counts, error) {
	q, w := dbsqlc.New(), split(from, until)
	out := map[uuid.UUID]Counts{}
	add := func(provider uuid.UUID, typ string, bounce *string, n int64) {
		c := out[provider]
		c.add(typ, bounce, n)
		out[provider] = c
	}
	if w.days {
		rows, err := q.MessageDailyDomainProviders(ctx, db, dbsqlc.MessageDailyDomainProvidersParams{
			AccountID: account, DomainID: domain, DaysFrom: w.daysFrom, DaysTo: w.daysTo,
		})
		if err != nil {
			return nil, fmt.Errorf("error reading daily message event rollups of domain: %w", err)
		}
		for _, r := range rows {
			if r.Count != 0 {
				add(r.ProviderID, r.EventType, r.BounceClass, r.Count)
			}
		}
	}
	if w.hours {
		rows, err := q.MessageRollupDomainProviders(ctx, db, dbsqlc.MessageRollupDomainProvidersParams{AccountID: account, DomainID: domain,
			HeadHoursFrom: w.headHoursFrom, HeadHoursTo: w.headHoursTo, TailHoursFrom: w.tailHoursFrom, TailHoursTo: w.tailHoursTo})
		if err != nil {
			return nil, fmt.Errorf("error reading message event rollups of domain: %w", err)
		}
		for _, r := range rows {
			if r.Count != 0 {
				add(r.ProviderID, r.EventType, r.BounceClass, r.Count)
			}
		}
	}
	if w.raw {
		rows, err := q.MessageRawDomainProviders(ctx, db, dbsqlc.MessageRawDomainProvidersParams{
			DomainID: domain, HeadFrom: w.headFrom, HeadTo: w.headTo, TailFrom: w.tailFrom, TailTo: w.tailTo,
		})
		if err != nil {
			return nil, fmt.Errorf("error counting message events of domain: %w", err)
		}
		for _, r := range rows {
			add(r.ProviderID, r.EventType, r.BounceClass, r.Count)
		}
	}
	return out, nil
}

// Total sums counts over providers.
func Total(per map[uuid.UUID]Counts) Counts {
	var t Counts
	for _, c := range per {
		t.Sent += c.Sent
		t.Delivered += c.Delivered
		t.Bounced += c.Bounced
		t.HardBounced += c.HardBounced
		t.Complained += c.Complained
	}
	return t
}

package events

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
	"github.com/mailwatch/mailwatch/internal/rollups"
)

// Every count of events over a period is read here, from the counters the
// database keeps: the daily ones (event_counts_daily, schema/0036) for the
// window's whole UTC days, the hourly ones (event_counts_hourly,
// schema/0030) for its whole hours before the first and after the last
// midnight, and raw rows for the partial hours at its ends
// (rollups.SplitDays). The answer is the one counting raw rows gives, at
// the cost of a few counter rows per day of the window, those of at most
// 2x23 hours and at most two hours of raw rows.

// SeverityCounts counts events per severity.
type SeverityCounts struct {
	Info, Warning, Critical int64
}

// Total is the sum over the severities.
func (c SeverityCounts) Total() int64 { return c.Info + c.Warning + c.Critical }

func (c *SeverityCounts) add(s Severity, n int64) {
	switch s {
	case SeverityInfo:
		c.Info += n
	case SeverityWarning:
		c.Warning += n
	case SeverityCritical:
		c.Critical += n
	}
}

// DayCount is the number of events of one type and severity created on
// one UTC day.
type DayCount struct {
	Day      time.Time // midnight UTC
	Type     string
	Severity Severity
	Events   int64
}

// CountByDay counts the account's events created in [from, until) (a zero
// until: with no end, events stamped in the future included) per UTC day,
// type and severity, oldest day first.
func CountByDay(ctx context.Context, db dbutil.Executor, account uuid.UUID, from, until time.Time) ([]DayCount, error) {
	w := rollups.SplitDays(from, until)
	p := dbsqlc.EventCountsByDayParams{
		AccountID: account, DaysFrom: w.Days.From,
		HeadHoursFrom: w.HeadHours.From, HeadHoursTo: w.HeadHours.To,
		TailHoursFrom: w.TailHours.From, TailHoursTo: w.TailHours.To,
		HeadFrom: w.Head.From, HeadTo: w.Head.To, TailFrom: w.Tail.From, TailTo: w.Tail.To,
	}
	if !w.Days.To.IsZero() {
		p.DaysTo = pgtype.Date{Time: w.Days.To, Valid: true}
	}
	rows, err := dbsqlc.New().EventCountsByDay(ctx, db, p)
	if err != nil {
		return nil, fmt.Errorf("error counting events: %w", err)
	}
	out := make([]DayCount, len(rows))
	for i, r := range rows {
		out[i] = DayCount{Day: r.Day, Type: r.EventType, Severity: Severity(r.Severity), Events: r.Events}
	}
	return out, nil
}

// DayVolume is one UTC day's events per severity.
type DayVolume struct {
	Day time.Time // midnight UTC
	SeverityCounts
}

// DailyVolume counts the account's events per UTC day and severity over
// the days UTC days starting with first's, oldest first, days without
// events included.
func DailyVolume(ctx context.Context, db dbutil.Executor, account uuid.UUID, first time.Time, days int) ([]DayVolume, error) {
	first = first.UTC()
	first = time.Date(first.Year(), first.Month(), first.Day(), 0, 0, 0, 0, time.UTC)
	counts, err := CountByDay(ctx, db, account, first, first.AddDate(0, 0, days))
	if err != nil {
		return nil, err
	}
	out := make([]DayVolume, days)
	index := make(map[time.Time]int, days)
	for i := range out {
		out[i].Day = first.AddDate(0, 0, i)
		index[out[i].Day] = i
	}
	for _, c := range counts {
		if i, ok := index[c.Day.UTC()]; ok {
			out[i].add(c.Severity, c.Events)
		}
	}
	return out, nil
}

// TypeCount is one event type's events per severity.
type TypeCount struct {
	Type string
	SeverityCounts
}

// TypeBreakdown counts the account's events created strictly after since
// per type and severity: types with events only, the most frequent first
// (then by name).
func TypeBreakdown(ctx context.Context, db dbutil.Executor, account uuid.UUID, since time.Time) ([]TypeCount, error) {
	counts, err := CountByDay(ctx, db, account, rollups.After(since), time.Time{})
	if err != nil {
		return nil, err
	}
	index := map[string]int{}
	var out []TypeCount
	for _, c := range counts {
		i, ok := index[c.Type]
		if !ok {
			i = len(out)
			index[c.Type] = i
			out = append(out, TypeCount{Type: c.Type})
		}
		out[i].add(c.Severity, c.Events)
	}
	slices.SortFunc(out, func(a, b TypeCount) int {
		return cmp.Or(cmp.Compare(b.Total(), a.Total()), cmp.Compare(a.Type, b.Type))
	})
	return out, nil
}

// CountBySeverity counts the account's events created from from on per
// severity.
func CountBySeverity(ctx context.Context, db dbutil.Executor, account uuid.UUID, from time.Time) (SeverityCounts, error) {
	var out SeverityCounts
	counts, err := CountByDay(ctx, db, account, from, time.Time{})
	if err != nil {
		return out, err
	}
	for _, c := range counts {
		out.add(c.Severity, c.Events)
	}
	return out, nil
}

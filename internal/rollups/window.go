// Package rollups holds the rules of mailwatch's pre-aggregated counters:
// how a time window is answered from hourly rollup rows plus the raw rows of
// its partial hours, and how a rollup is rebuilt from raw rows.
//
// Rollup rows are written by the database, in the transaction that writes the
// raw rows (statement-level triggers over transition tables; see the schema
// migrations that create the *_hourly tables). A row inserted twice is
// counted once because the raw tables' own keys refuse the duplicate before
// the trigger sees it, so River retries and re-parses never double count.
package rollups

import "time"

// Span is a half-open interval of time [From, To). A zero To is open-ended.
type Span struct {
	From, To time.Time
}

// Empty reports whether the span holds no instant.
func (s Span) Empty() bool {
	return !s.To.IsZero() && !s.From.Before(s.To)
}

// Window is a period split for reading: Head and Tail are read from raw rows
// (each shorter than an hour), Hours from hourly rollups (From and To on UTC
// hour boundaries).
type Window struct {
	Head, Hours, Tail Span
}

// Split divides [from, until) into the whole UTC hours it covers and the
// partial hours at either end. A zero until means open-ended: every hour from
// the first whole one on, future ones included, comes from the rollups.
// For a window that starts strictly after a time t, pass t plus a
// microsecond (the resolution of a Postgres timestamp).
func Split(from, until time.Time) Window {
	from = from.UTC()
	first := from.Truncate(time.Hour)
	if first.Before(from) {
		first = first.Add(time.Hour)
	}
	if until.IsZero() {
		return Window{Head: Span{from, first}, Hours: Span{From: first}, Tail: Span{first, first}}
	}
	until = until.UTC()
	last := until.Truncate(time.Hour)
	if !first.Before(last) { // no whole hour: all of it is raw
		return Window{Head: Span{from, until}, Hours: Span{first, first}, Tail: Span{until, until}}
	}
	return Window{Head: Span{from, first}, Hours: Span{first, last}, Tail: Span{last, until}}
}

// LastDay is where the dashboards' "last 24 hours" start: the current UTC
// hour so far and the 24 whole hours before it (24 to 25 hours back from
// now). Starting on an hour, the window is read from hourly and daily
// counters alone, with no raw rows, so its cost does not follow how many
// rows an hour holds.
func LastDay(now time.Time) time.Time {
	return now.UTC().Truncate(time.Hour).Add(-24 * time.Hour)
}

// HoursBack is the default "since" of a window of about d before now
// whose bound is exclusive (the type breakdowns'): the last instant before
// the UTC hour d back from now, so that the window counted, strictly after
// it, starts on that hour and is read from counters alone. A since inside
// an hour makes its first partial hour a count of raw rows, which grows
// with how many rows an hour holds.
func HoursBack(now time.Time, d time.Duration) time.Time {
	return now.UTC().Add(-d).Truncate(time.Hour).Add(-time.Microsecond)
}

// After is the first instant strictly after t that a Postgres timestamp can
// hold: a window "after t" is the half-open window from After(t).
func After(t time.Time) time.Time {
	return t.Truncate(time.Microsecond).Add(time.Microsecond)
}

// DayWindow is a period split for reading with daily rollups too: Head and
// Tail from raw rows (each shorter than an hour), HeadHours and TailHours
// from hourly rollups (on UTC hour boundaries, each shorter than a day),
// Days from daily rollups (From and To on UTC midnights).
type DayWindow struct {
	Head, HeadHours, Days, TailHours, Tail Span
}

// SplitDays divides [from, until) as Split does, then the whole hours into
// those before the first UTC midnight, the whole UTC days and those after
// the last midnight. A zero until means open-ended: Days runs from the
// first midnight on (future days included) and TailHours and Tail are
// empty. A window without a whole day keeps its whole hours in HeadHours.
func SplitDays(from, until time.Time) DayWindow {
	w := Split(from, until)
	first := w.Hours.From
	day := first.Truncate(24 * time.Hour) // UTC: Truncate counts from the zero time, a UTC midnight
	if day.Before(first) {
		day = day.Add(24 * time.Hour)
	}
	if w.Hours.To.IsZero() {
		return DayWindow{Head: w.Head, HeadHours: Span{first, day}, Days: Span{From: day},
			TailHours: Span{day, day}, Tail: Span{day, day}}
	}
	last := w.Hours.To.Truncate(24 * time.Hour)
	if !day.Before(last) { // no whole day: the hours as Split has them
		end := w.Hours.To
		return DayWindow{Head: w.Head, HeadHours: w.Hours, Days: Span{end, end}, TailHours: Span{end, end}, Tail: w.Tail}
	}
	return DayWindow{Head: w.Head, HeadHours: Span{first, day}, Days: Span{day, last},
		TailHours: Span{last, w.Hours.To}, Tail: w.Tail}
}

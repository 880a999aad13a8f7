package main

import (
	"math"
	"time"
)

// historyDay is one UTC day (or the part of it inside the seeded span) and
// the rows it gets. Rows are placed in time order inside it, denser in the
// day than at night (historyWarpSQL), so every table is written in the
// order production would have written it.
type historyDay struct {
	Index int       // 0 for the oldest day
	Start time.Time // first instant of the day inside the span
	Span  float64   // seconds of the day inside the span
	Whole bool      // a whole UTC day: the daily shape applies
	N     int       // rows
}

// historyDays spreads n rows over the historySpanDays days before now:
// weekends get 55% of a weekday, and traffic grows by a third over the
// span.
func historyDays(now time.Time, n int) []historyDay {
	start := now.Add(-historySpanDays * 24 * time.Hour)
	var days []historyDay
	var weights []float64
	total := 0.0
	for d := start.Truncate(24 * time.Hour); d.Before(now); d = d.Add(24 * time.Hour) {
		from, to := maxTime(d, start), minTime(d.Add(24*time.Hour), now)
		span := to.Sub(from).Seconds()
		if span <= 0 {
			continue
		}
		w := span / 86400 * (0.85 + 0.3*float64(len(days))/historySpanDays)
		if wd := d.Weekday(); wd == time.Saturday || wd == time.Sunday {
			w *= 0.55
		}
		days = append(days, historyDay{Index: len(days), Start: from, Span: span, Whole: span == 86400})
		weights = append(weights, w)
		total += w
	}
	// Cumulative rounding: the days sum to n exactly.
	cum, given := 0.0, 0
	for i := range days {
		cum += weights[i]
		upTo := int(math.Round(float64(n) * cum / total))
		days[i].N, given = upTo-given, upTo
	}
	return days
}

// historyChunks groups consecutive days into statements of about max rows
// each (rowsPerUnit rows per unit of N).
func historyChunks(days []historyDay, max int, rowsPerUnit float64) [][]historyDay {
	var out [][]historyDay
	var cur []historyDay
	rows := 0.0
	for _, d := range days {
		if len(cur) > 0 && rows+float64(d.N)*rowsPerUnit > float64(max) {
			out = append(out, cur)
			cur, rows = nil, 0
		}
		cur = append(cur, d)
		rows += float64(d.N) * rowsPerUnit
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// historyDayArgs are a chunk's days as the arrays the seeding statements
// unnest: start, span, whole, n, index.
func historyDayArgs(days []historyDay) []any {
	starts := make([]time.Time, len(days))
	spans := make([]float64, len(days))
	whole := make([]bool, len(days))
	ns := make([]int32, len(days))
	idx := make([]int32, len(days))
	for i, d := range days {
		starts[i], spans[i], whole[i], ns[i], idx[i] = d.Start, d.Span, d.Whole, int32(d.N), int32(d.Index)
	}
	return []any{starts, spans, whole, ns, idx}
}

// historyDaysSQL is the FROM item of a chunk's days ($1..$5).
const historyDaysSQL = `unnest($1::timestamptz[], $2::float8[], $3::boolean[], $4::int[], $5::int[]) AS d(start, span, whole, n, di)`

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

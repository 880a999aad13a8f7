package reports

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// A domain's DMARC volume per UTC day and source category
// (dmarc_domain_days), kept at ingest so that its daily chart reads one row
// per day whatever the number of source IPs behind it.

// MaxDailyDays bounds the days one DailyVolume read covers.
const MaxDailyDays = 400

// DayVolume is one UTC day of a domain's aggregate reports: messages by
// source category (see the Category constants).
type DayVolume struct {
	Day           time.Time
	Compliant     int64
	Forwarded     int64
	NonCompliant  int64
	ThreatUnknown int64
}

// Messages is the day's whole volume.
func (d DayVolume) Messages() int64 {
	return d.Compliant + d.Forwarded + d.NonCompliant + d.ThreatUnknown
}

// PassRate is the share of the day's volume that passed DMARC (compliant
// or forwarded), and false for a day without mail.
func (d DayVolume) PassRate() (float64, bool) {
	n := d.Messages()
	if n == 0 {
		return 0, false
	}
	return float64(d.Compliant+d.Forwarded) / float64(n), true
}

// DailyVolume returns the domain's days from since to until (UTC days,
// both included; at most MaxDailyDays), oldest first, days without
// reports included as zero.
func DailyVolume(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, since, until time.Time) ([]DayVolume, error) {
	since, until = utcDay(since), utcDay(until)
	if until.Before(since) {
		return nil, fmt.Errorf("reports: until %s is before since %s", until.Format(time.DateOnly), since.Format(time.DateOnly))
	}
	if n := int(until.Sub(since)/(24*time.Hour)) + 1; n > MaxDailyDays {
		since = until.AddDate(0, 0, 1-MaxDailyDays)
	}
	rows, err := q.DMARCDomainDayList(ctx, db, dbsqlc.DMARCDomainDayListParams{DomainID: domainID, Since: since, Until: until})
	if err != nil {
		return nil, fmt.Errorf("error reading daily DMARC volume: %w", err)
	}
	var out []DayVolume
	i := 0
	for d := since; !d.After(until); d = d.AddDate(0, 0, 1) {
		v := DayVolume{Day: d}
		if i < len(rows) && rows[i].Day.Equal(d) {
			r := rows[i]
			v.Compliant, v.Forwarded, v.NonCompliant, v.ThreatUnknown = r.Compliant, r.Forwarded, r.NonCompliant, r.ThreatUnknown
			i++
		}
		out = append(out, v)
	}
	return out, nil
}

// failingCategory is the category of a source IP's failing volume: a
// known sender's (by its reverse DNS name) is non_compliant, any other
// threat_unknown.
func failingCategory(ptr string) string {
	if _, ok := KnownSender(ptr); ok {
		return CategoryNonCompliant
	}
	return CategoryThreatUnknown
}

// addDomainDays adds a report's groups to the domain's daily categories,
// with the shares addDays gives dmarc_source_days. The caller holds the
// domain's version lock (addDays takes it).
func addDomainDays(ctx context.Context, tx pgx.Tx, domainID uuid.UUID, days []time.Time, groups map[string]*group, ptrs map[string]string) error {
	k := len(days)
	b := dbsqlc.DMARCDomainDayAddManyParams{
		DomainID: domainID, Days: days, Compliant: make([]int64, k), Forwarded: make([]int64, k),
		NonCompliant: make([]int64, k), ThreatUnknown: make([]int64, k),
	}
	for ip, g := range groups {
		failing := b.ThreatUnknown
		if failingCategory(ptrs[ip]) == CategoryNonCompliant {
			failing = b.NonCompliant
		}
		for i := range days {
			b.Compliant[i] += share(g.compliant, i, k)
			b.Forwarded[i] += share(g.forwarded, i, k)
			failing[i] += share(g.failing, i, k)
		}
	}
	if err := q.DMARCDomainDayAddMany(ctx, tx, b); err != nil {
		return fmt.Errorf("error adding daily DMARC volume: %w", err)
	}
	return nil
}

// rebuildWindow is the days a rebuild reads per statement.
const rebuildWindow = 31

// RebuildDays recomputes the domain's daily categories from its daily
// source rows and the cached reverse DNS names of their IPs, in tx, under
// the domain's version lock (so no report of the domain is stored
// meanwhile). It reads rebuildWindow days per statement.
func RebuildDays(ctx context.Context, tx pgx.Tx, domainID uuid.UUID) error {
	if err := q.DMARCSourceVersionBump(ctx, tx, domainID); err != nil {
		return fmt.Errorf("error taking the domain's report lock: %w", err)
	}
	if err := q.DMARCDomainDayDelete(ctx, tx, domainID); err != nil {
		return fmt.Errorf("error clearing daily DMARC volume: %w", err)
	}
	span, err := q.DMARCDomainDayRange(ctx, tx, domainID)
	if err != nil {
		return fmt.Errorf("error reading the domain's report days: %w", err)
	}
	if span.FirstDay.Year() <= 1 {
		return nil
	}
	for since := span.FirstDay; !since.After(span.LastDay); since = since.AddDate(0, 0, rebuildWindow) {
		until := since.AddDate(0, 0, rebuildWindow-1)
		if err := rebuildWindowDays(ctx, tx, domainID, since, until); err != nil {
			return err
		}
	}
	return nil
}

func rebuildWindowDays(ctx context.Context, tx pgx.Tx, domainID uuid.UUID, since, until time.Time) error {
	totals, err := q.DMARCDomainDayTotals(ctx, tx, dbsqlc.DMARCDomainDayTotalsParams{DomainID: domainID, Since: since, Until: until})
	if err != nil {
		return fmt.Errorf("error summing daily source rows: %w", err)
	}
	if len(totals) == 0 {
		return nil
	}
	named, err := q.DMARCDomainDayFailingNamed(ctx, tx, dbsqlc.DMARCDomainDayFailingNamedParams{DomainID: domainID, Since: since, Until: until})
	if err != nil {
		return fmt.Errorf("error summing failing sources: %w", err)
	}
	known := map[time.Time]int64{}
	for _, r := range named {
		if failingCategory(r.Ptr) == CategoryNonCompliant {
			known[r.Day] += r.Failing
		}
	}
	b := dbsqlc.DMARCDomainDayAddManyParams{DomainID: domainID}
	for _, t := range totals {
		b.Days = append(b.Days, t.Day)
		b.Compliant = append(b.Compliant, t.Compliant)
		b.Forwarded = append(b.Forwarded, t.Forwarded)
		b.NonCompliant = append(b.NonCompliant, known[t.Day])
		b.ThreatUnknown = append(b.ThreatUnknown, t.Failing-known[t.Day])
	}
	if err := q.DMARCDomainDayAddMany(ctx, tx, b); err != nil {
		return fmt.Errorf("error writing daily DMARC volume: %w", err)
	}
	return nil
}

// BackfillDays rebuilds the daily categories of up to limit domains whose
// reports were stored before they were kept (dmarc_domain_days_backfill),
// each in its own transaction, and returns how many it rebuilt; fewer than
// limit means none is left.
func BackfillDays(ctx context.Context, db dbutil.Executor, limit int) (int, error) {
	done := 0
	for done < limit {
		more, err := dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (bool, error) {
			next, err := q.DMARCDomainBackfillNext(ctx, tx, 1)
			if err != nil || len(next) == 0 {
				return false, err
			}
			if err := RebuildDays(ctx, tx, next[0]); err != nil {
				return false, err
			}
			return true, q.DMARCDomainBackfillDone(ctx, tx, next[0])
		})
		if err != nil {
			return done, fmt.Errorf("error backfilling daily DMARC volume: %w", err)
		}
		if !more {
			break
		}
		done++
	}
	return done, nil
}

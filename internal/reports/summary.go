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

// Window kinds of a stored summary (dmarc_source_summaries): one row per
// domain and kind, so what is stored stays bounded.
const (
	// summaryReadiness is the readiness window ending at until: what the
	// guidance and the default sources listing read.
	summaryReadiness int16 = 0
	// summaryOther is the latest other window a listing asked for.
	summaryOther int16 = 1
)

// ipSums is one source IP's volumes over a window, and the DKIM selectors
// seen with it (sorted).
type ipSums struct {
	ip                                                               string
	messages, dkimAligned, spfAligned, compliant, forwarded, failing int64
	selectors                                                        []string
}

// windowSums are a domain's per-source-IP sums over the part of a window a
// bounded read covers, most volume first (MaxSourceGroups at most).
type windowSums struct {
	period Period
	ips    []ipSums
}

// sums returns a domain's per-source-IP sums over [since, until]: the
// stored summary while the domain's daily rows are unchanged since it was
// computed, else the live sums, which are stored for the next read. Every
// statement writing dmarc_source_days gives the domain a fresh version in
// its transaction (schema 0032), so a summary carrying the version a read
// sees was computed from exactly the rows that read would sum.
func (s *Service) sums(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, since, until time.Time) (windowSums, error) {
	kind := summaryOther
	if until.Sub(since) == ReadinessWindow {
		kind = summaryReadiness
	}
	row, err := q.DMARCSourceSummaryGet(ctx, db, dbsqlc.DMARCSourceSummaryGetParams{
		DomainID: domainID, Kind: kind, Since: since, Until: until,
	})
	if err == nil {
		return fromSummary(row, since, until)
	}
	if !dbutil.IsNotFound(err) {
		return windowSums{}, fmt.Errorf("error reading the sources summary: %w", err)
	}
	// The version is read before the rows: rows read later are at least
	// as new, and rows newer than the version read carry a newer version,
	// so the summary stored below is never taken for rows it did not sum.
	version, err := q.DMARCSourceVersion(ctx, db, domainID)
	if err != nil {
		return windowSums{}, fmt.Errorf("error reading the sources version: %w", err)
	}
	w, err := liveSums(ctx, db, domainID, since, until)
	if err != nil {
		return windowSums{}, err
	}
	s.storeSums(ctx, domainID, kind, since, until, version, w)
	return w, nil
}

// liveSums sums a domain's daily rows over [since, until], at most
// MaxSourceRowsRead of them, newest day first.
func liveSums(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, since, until time.Time) (windowSums, error) {
	period, err := boundedPeriod(ctx, db, domainID, since, until)
	if err != nil {
		return windowSums{}, err
	}
	rows, err := q.DMARCSourceDaySum(ctx, db, dbsqlc.DMARCSourceDaySumParams{
		DomainID: domainID, Since: period.Since, Until: until, MaxRows: MaxSourceRowsRead, MaxGroups: MaxSourceGroups,
	})
	if err != nil {
		return windowSums{}, fmt.Errorf("error summing sources: %w", err)
	}
	ips := make([]string, len(rows))
	for i, r := range rows {
		ips[i] = r.SourceIp
	}
	selRows, err := q.DMARCSourceSelectors(ctx, db, dbsqlc.DMARCSourceSelectorsParams{
		DomainID: domainID, Since: period.Since, Until: until, MaxRows: MaxSourceRowsRead, SourceIps: ips,
	})
	if err != nil {
		return windowSums{}, fmt.Errorf("error reading selectors: %w", err)
	}
	selectors := make(map[string][]string, len(selRows))
	for _, r := range selRows {
		selectors[r.SourceIp] = r.DkimSelectors
	}
	w := windowSums{period: period, ips: make([]ipSums, len(rows))}
	for i, r := range rows {
		w.ips[i] = ipSums{ip: r.SourceIp, messages: r.Messages, dkimAligned: r.DkimAligned, spfAligned: r.SpfAligned,
			compliant: r.Compliant, forwarded: r.Forwarded, failing: r.Failing, selectors: selectors[r.SourceIp]}
	}
	return w, nil
}

// storeSums stores a domain's sums as of version, on the primary (a read
// may run on the replica) in a transaction of its own, so that a failure
// (the domain deleted meanwhile) leaves the read and its caller unharmed:
// the next read computes them again.
func (s *Service) storeSums(ctx context.Context, domainID uuid.UUID, kind int16, since, until time.Time, version int64, w windowSums) {
	if s.DB == nil {
		return
	}
	n := len(w.ips)
	p := dbsqlc.DMARCSourceSummaryPutParams{
		DomainID: domainID, Kind: kind, Since: since, Until: until, Version: version,
		Truncated: w.period.Truncated, PeriodSince: w.period.Since,
		SourceIps: make([]string, n), Messages: make([]int64, n), DkimAligned: make([]int64, n), SpfAligned: make([]int64, n),
		Compliant: make([]int64, n), Forwarded: make([]int64, n), Failing: make([]int64, n),
		SelectorCounts: make([]int32, n), Selectors: []string{},
	}
	for i, r := range w.ips {
		p.SourceIps[i], p.Messages[i], p.DkimAligned[i], p.SpfAligned[i] = r.ip, r.messages, r.dkimAligned, r.spfAligned
		p.Compliant[i], p.Forwarded[i], p.Failing[i] = r.compliant, r.forwarded, r.failing
		p.SelectorCounts[i] = int32(len(r.selectors))
		p.Selectors = append(p.Selectors, r.selectors...)
	}
	err := pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error { return q.DMARCSourceSummaryPut(ctx, tx, p) })
	if err != nil {
		s.logger().WarnContext(ctx, "error storing the sources summary", "domain_id", domainID, "error", err)
	}
}

// fromSummary reads a stored summary back.
func fromSummary(row dbsqlc.DMARCSourceSummaryGetRow, since, until time.Time) (windowSums, error) {
	n := len(row.SourceIps)
	if len(row.Messages) != n || len(row.DkimAligned) != n || len(row.SpfAligned) != n || len(row.Compliant) != n ||
		len(row.Forwarded) != n || len(row.Failing) != n || len(row.SelectorCounts) != n {
		return windowSums{}, fmt.Errorf("the sources summary's arrays differ in length")
	}
	w := windowSums{period: Period{Since: since, Until: until, Truncated: row.Truncated}, ips: make([]ipSums, n)}
	if row.Truncated {
		w.period.Since = row.PeriodSince
	}
	next := 0
	for i := range n {
		c := int(row.SelectorCounts[i])
		if c < 0 || next+c > len(row.Selectors) {
			return windowSums{}, fmt.Errorf("the sources summary's selectors do not match their counts")
		}
		w.ips[i] = ipSums{ip: row.SourceIps[i], messages: row.Messages[i], dkimAligned: row.DkimAligned[i],
			spfAligned: row.SpfAligned[i], compliant: row.Compliant[i], forwarded: row.Forwarded[i], failing: row.Failing[i]}
		if c > 0 {
			w.ips[i].selectors = row.Selectors[next : next+c : next+c]
		}
		next += c
	}
	return w, nil
}

package reports

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
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

// SummaryMaxAge is how long a stored summary answers while the domain's
// daily rows are unchanged. Names are applied when a summary is computed;
// the parse storing a report resolves its IPs first, so a domain's own
// reports rename their sources at once, and a PTR learned later through
// another domain's report shows within this age.
const SummaryMaxAge = time.Hour

func kindOf(since, until time.Time) int16 {
	if until.Sub(since) == ReadinessWindow {
		return summaryReadiness
	}
	return summaryOther
}

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

// totals are the volumes enforcement readiness weighs, over every source.
type totals struct {
	messages, legitimate, passing int64
}

// totalsOf sums a window's sources. An unknown source's passing mail is
// legitimate (the domain's own servers are rarely in the sender map); its
// failing mail is not. A known sender's mail is all legitimate.
func totalsOf(sources []Source) totals {
	var t totals
	for _, src := range sources {
		t.messages += src.Messages
		t.passing += src.Compliant + src.Forwarded
		if src.Known {
			t.legitimate += src.Messages
		} else {
			t.legitimate += src.Compliant + src.Forwarded
		}
	}
	return t
}

// summary is a domain's sources over a window: the stored summary's head,
// with the sources a read asked for, or every source when just computed.
type summary struct {
	period  Period
	count   int
	totals  totals
	sources []Source
	// stored is false when the sources were computed by this read: they
	// are then all of them, in rank order.
	stored bool
}

// stored returns the domain's current summary of [since, until] without
// its sources: ok is false when none is current (the domain's daily rows
// changed since, or it is older than SummaryMaxAge).
func (s *Service) stored(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, since, until time.Time) (summary, bool, error) {
	row, err := q.DMARCSourceSummaryGet(ctx, db, dbsqlc.DMARCSourceSummaryGetParams{
		DomainID: domainID, Kind: kindOf(since, until), Since: since, Until: until, FreshSince: s.now().Add(-SummaryMaxAge),
	})
	if dbutil.IsNotFound(err) {
		return summary{}, false, nil
	}
	if err != nil {
		return summary{}, false, fmt.Errorf("error reading the sources summary: %w", err)
	}
	sum := summary{
		period: Period{Since: since, Until: until, Truncated: row.Truncated}, count: int(row.SourceCount), stored: true,
		totals: totals{messages: row.TotalMessages, legitimate: row.LegitimateMessages, passing: row.PassingMessages},
	}
	if row.Truncated {
		sum.period.Since = row.PeriodSince
	}
	return sum, true, nil
}

// storedSources reads a stored summary's first max sources, or, with
// failingKnown, its known senders failing DMARC, most failing first.
func storedSources(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, kind int16, failingKnown bool, max int) ([]Source, error) {
	var rows []dbsqlc.DMARCSourceSummaryGroupsRow
	var err error
	if failingKnown {
		var known []dbsqlc.DMARCSourceSummaryFailingKnownRow
		known, err = q.DMARCSourceSummaryFailingKnown(ctx, db, dbsqlc.DMARCSourceSummaryFailingKnownParams{DomainID: domainID, Kind: kind, MaxRows: int32(max)})
		for _, r := range known {
			rows = append(rows, dbsqlc.DMARCSourceSummaryGroupsRow(r))
		}
	} else {
		rows, err = q.DMARCSourceSummaryGroups(ctx, db, dbsqlc.DMARCSourceSummaryGroupsParams{DomainID: domainID, Kind: kind, MaxRows: int32(max)})
	}
	if err != nil {
		return nil, fmt.Errorf("error reading the summary's sources: %w", err)
	}
	out := make([]Source, len(rows))
	for i, r := range rows {
		src := Source{Name: r.Name, Type: r.Type, Known: r.Known, BaseDomain: r.BaseDomain, Category: r.Category,
			Messages: r.Messages, Compliant: r.Compliant, Forwarded: r.Forwarded, Failing: r.Failing,
			IPCount: int(r.IpCount), DKIMSelectors: r.DkimSelectors, dkimAligned: r.DkimAligned, spfAligned: r.SpfAligned}
		if err := json.Unmarshal(r.Ips, &src.IPs); err != nil {
			return nil, fmt.Errorf("error reading a source's IPs: %w", err)
		}
		if src.IPs == nil {
			src.IPs = []SourceIP{}
		}
		if src.DKIMSelectors == nil {
			src.DKIMSelectors = []string{}
		}
		src.rates()
		out[i] = src
	}
	return out, nil
}

// compute sums a domain's daily rows over [since, until], names and
// groups the sources, and stores the outcome for the next reads. The
// version is read before the rows: rows read later are at least as new,
// and rows newer than the version read carry a newer version, so the
// summary stored is never taken for rows it did not sum.
func (s *Service) compute(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, since, until time.Time) (summary, error) {
	version, err := q.DMARCSourceVersion(ctx, db, domainID)
	if err != nil {
		return summary{}, fmt.Errorf("error reading the sources version: %w", err)
	}
	w, err := liveSums(ctx, db, domainID, since, until)
	if err != nil {
		return summary{}, err
	}
	ptrs, err := cachedPTRs(ctx, db, w.ips)
	if err != nil {
		return summary{}, err
	}
	sources := groupSources(w.ips, ptrs)
	sum := summary{period: w.period, count: len(sources), totals: totalsOf(sources), sources: sources}
	s.storeSummary(ctx, domainID, kindOf(since, until), since, until, version, sum)
	return sum, nil
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

// cachedPTRs returns the reverse DNS names the parse job cached for ips.
func cachedPTRs(ctx context.Context, db dbsqlc.DBTX, ips []ipSums) (map[string]string, error) {
	ptrs := map[string]string{}
	if len(ips) == 0 {
		return ptrs, nil
	}
	list := make([]string, len(ips))
	for i, r := range ips {
		list[i] = r.ip
	}
	cached, err := q.SourcePTRGetMany(ctx, db, list)
	if err != nil {
		return nil, fmt.Errorf("error reading PTRs: %w", err)
	}
	for _, c := range cached {
		ptrs[c.Ip] = c.Ptr
	}
	return ptrs, nil
}

// groupSources names each IP (sender map by reverse DNS, else the PTR's base
// domain, else the IP itself) and sums IPs of one name into a source,
// most volume first; a source lists its MaxSourceIPsListed busiest IPs.
func groupSources(ips []ipSums, ptrs map[string]string) []Source {
	byName := map[string]*Source{}
	var order []string
	for _, r := range ips {
		id := identify(r.ip, ptrs)
		name, typ := r.ip, ""
		switch {
		case id.Sender != nil:
			name, typ = id.Sender.Name, id.Sender.Type
		case id.BaseDomain != "":
			name = id.BaseDomain
		}
		src := byName[name]
		if src == nil {
			src = &Source{Name: name, Type: typ, Known: id.Sender != nil, BaseDomain: id.BaseDomain, IPs: []SourceIP{}, DKIMSelectors: []string{}}
			byName[name] = src
			order = append(order, name)
		}
		src.Messages += r.messages
		src.Compliant += r.compliant
		src.Forwarded += r.forwarded
		src.Failing += r.failing
		src.dkimAligned += r.dkimAligned
		src.spfAligned += r.spfAligned
		src.IPCount++
		if len(src.IPs) < MaxSourceIPsListed { // ips come most volume first
			src.IPs = append(src.IPs, SourceIP{IP: r.ip, PTR: ptrs[r.ip], Messages: r.messages})
		}
		src.DKIMSelectors = mergeSorted(src.DKIMSelectors, r.selectors)
	}
	out := make([]Source, 0, len(order))
	for _, name := range order {
		src := byName[name]
		src.rates()
		src.Category = category(src)
		out = append(out, *src)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Messages > out[j].Messages })
	return out
}

// storedGroup is how a source is handed to DMARCSourceSummaryGroupsPut.
type storedGroup struct {
	Name          string     `json:"name"`
	Type          string     `json:"type"`
	Known         bool       `json:"known"`
	BaseDomain    string     `json:"base_domain"`
	Category      string     `json:"category"`
	Messages      int64      `json:"messages"`
	Compliant     int64      `json:"compliant"`
	Forwarded     int64      `json:"forwarded"`
	Failing       int64      `json:"failing"`
	DKIMAligned   int64      `json:"dkim_aligned"`
	SPFAligned    int64      `json:"spf_aligned"`
	IPCount       int        `json:"ip_count"`
	IPs           []SourceIP `json:"ips"`
	DKIMSelectors []string   `json:"dkim_selectors"`
}

// storeSummary stores a domain's summary as of version, on the primary (a read
// may run on the replica) in a transaction of its own, so that a failure
// (the domain deleted meanwhile) leaves the read and its caller unharmed:
// the next read computes it again. The head's upsert orders concurrent
// stores of one summary, so each replaces the other's sources whole.
func (s *Service) storeSummary(ctx context.Context, domainID uuid.UUID, kind int16, since, until time.Time, version int64, sum summary) {
	if s.DB == nil {
		return
	}
	groups := make([]storedGroup, len(sum.sources))
	for i, src := range sum.sources {
		groups[i] = storedGroup{Name: src.Name, Type: src.Type, Known: src.Known, BaseDomain: src.BaseDomain, Category: src.Category,
			Messages: src.Messages, Compliant: src.Compliant, Forwarded: src.Forwarded, Failing: src.Failing,
			DKIMAligned: src.dkimAligned, SPFAligned: src.spfAligned, IPCount: src.IPCount, IPs: src.IPs, DKIMSelectors: src.DKIMSelectors}
	}
	body, err := json.Marshal(groups)
	if err == nil {
		err = pgx.BeginFunc(ctx, s.DB, func(tx pgx.Tx) error {
			if err := q.DMARCSourceSummaryPut(ctx, tx, dbsqlc.DMARCSourceSummaryPutParams{
				DomainID: domainID, Kind: kind, Since: since, Until: until, Version: version,
				Truncated: sum.period.Truncated, PeriodSince: sum.period.Since, SourceCount: int32(sum.count),
				TotalMessages: sum.totals.messages, LegitimateMessages: sum.totals.legitimate, PassingMessages: sum.totals.passing,
				ComputedAt: s.now(),
			}); err != nil {
				return err
			}
			if err := q.DMARCSourceSummaryGroupsClear(ctx, tx, dbsqlc.DMARCSourceSummaryGroupsClearParams{DomainID: domainID, Kind: kind}); err != nil {
				return err
			}
			return q.DMARCSourceSummaryGroupsPut(ctx, tx, dbsqlc.DMARCSourceSummaryGroupsPutParams{DomainID: domainID, Kind: kind, Groups: body})
		})
	}
	if err != nil {
		s.logger().WarnContext(ctx, "error storing the sources summary", "domain_id", domainID, "error", err)
	}
}

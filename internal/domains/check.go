package domains

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/health"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/reputation"
	"github.com/mailwatch/mailwatch/internal/selectors"
	"github.com/mailwatch/mailwatch/internal/transport"
)

// CheckOffset is where in each check interval a domain's periodic check
// falls: a stable hash of its id, so checks are spread evenly over the
// interval and each domain is checked at the same phase every period.
func CheckOffset(domainID uuid.UUID, interval time.Duration) time.Duration {
	h := fnv.New64a()
	_, _ = h.Write(domainID[:])
	return time.Duration(h.Sum64() % uint64(interval))
}

// NextCheckAt is the first time at or after now that is the domain's
// offset into an interval: period k's check runs at k*interval + offset,
// which is also the period River's ByPeriod uniqueness puts it in.
func NextCheckAt(domainID uuid.UUID, interval time.Duration, now time.Time) time.Time {
	at := now.Truncate(interval).Add(CheckOffset(domainID, interval))
	if at.Before(now) {
		at = at.Add(interval)
	}
	return at
}

// CheckDomain runs every DNS check of a domain, bounded by
// CheckBudget, exactly as the periodic check and the live lookup both
// do: with the DKIM selectors of CheckSelectors and, once POST .../sign was
// called, the domain's signed DMARC reporting address (signer may be nil).
// It reads those from db first, then holds no transaction while DNS
// answers.
func CheckDomain(ctx context.Context, resolver dnscheck.Resolver, mtasts *http.Client, db dbsqlc.DBTX, signer *reports.Signer, d dbsqlc.Domain, now time.Time) *dnscheck.Results {
	checked := d
	checked.DkimSelectors = CheckSelectors(ctx, db, d, now)
	return checkDomain(ctx, resolver, mtasts, checked, reportAddress(ctx, db, signer, d.ID))
}

// CheckSelectors is the one list of DKIM selectors a domain's check looks
// up: the configured ones, then those seen passing with d= the domain in
// its DMARC reports of the last 30 days. A failed read of the reports falls
// back to the configured ones.
func CheckSelectors(ctx context.Context, db dbsqlc.DBTX, d dbsqlc.Domain, now time.Time) []string {
	seen, err := reports.SelectorsSeen(ctx, db, d.ID, now)
	if err != nil {
		return d.DkimSelectors
	}
	return mergeSelectors(d.DkimSelectors, seen)
}

// checkDomain is CheckDomain with the domain's signed DMARC reporting
// address, which its DMARC record's rua should name (empty: none signed).
func checkDomain(ctx context.Context, resolver dnscheck.Resolver, mtasts *http.Client, d dbsqlc.Domain, reportAddress string) *dnscheck.Results {
	return dnscheck.CheckAll(ctx, d.Name, dnscheck.Options{
		Resolver:      resolver,
		HTTPClient:    mtasts,
		CheckTimeout:  CheckBudget,
		DKIMSelectors: d.DkimSelectors,
		ReportAddress: reportAddress,
	})
}

// Outcome is what applying one check did.
type Outcome struct {
	// Applied is false when a check that started later was already stored;
	// this one was then discarded.
	Applied bool
	// Domain is the row after the check.
	Domain dbsqlc.Domain
	// Changes are the differences with the last known results, each
	// emitted as dns_record_changed.
	Changes []dnscheck.Change
	// Health is the new score, nil when it could not be computed (every
	// check unknown so far).
	Health *health.Report
	// HealthChange compares it with the previous score.
	HealthChange health.Change
}

// Apply is the one place a DNS check becomes state: in tx, with
// the domain's row locked, it compares rs with the domain's last known
// results (dnscheck.Compare; a temperror is never a change), emits
// dns_record_changed for each change, stores rs as the latest snapshot,
// then scores the domain (see Score). startedAt is when the check
// began; a check older than the stored one is discarded. Both the live
// lookup of the API and the check job call it.
//
// usedSelectors are the DKIM selectors the check used: when the domain's
// selectors changed while it ran, its DKIM answer describes selectors the
// domain no longer has and is treated as unknown (temperror) rather than
// compared or learned; the change itself queued a fresh check. What the
// check found of each selector goes to the selector inventory
// (selectors.SeenInDNS).
func Apply(ctx context.Context, tx pgx.Tx, em *events.Emitter, domainID uuid.UUID, usedSelectors []string, startedAt time.Time, rs *dnscheck.Results, now time.Time) (*Outcome, error) {
	row, err := dbsqlc.New().DomainGetByIDForUpdate(ctx, tx, domainID)
	if dbutil.IsNotFound(err) {
		return nil, ErrDomainGone
	}
	if err != nil {
		return nil, fmt.Errorf("error locking domain: %w", err)
	}
	out := &Outcome{Domain: row}
	if row.CheckedAt != nil && row.CheckedAt.After(startedAt) {
		return out, nil
	}
	out.Applied = true
	if rs.DKIM != nil && !slices.Equal(usedSelectors, row.DkimSelectors) {
		rs.DKIM.Status = dnscheck.StatusTemperror
		rs.DKIM.Errors = append(rs.DKIM.Errors, "the domain's DKIM selectors changed while this check ran; a new check is queued")
	}

	known := &dnscheck.Results{Domain: row.Name}
	if len(row.Known) > 0 {
		if err := json.Unmarshal(row.Known, known); err != nil {
			return nil, fmt.Errorf("error decoding known results of %s: %w", row.Name, err)
		}
	}
	if out.Changes, err = emitChanges(ctx, tx, em, &row, known, rs, now); err != nil {
		return nil, err
	}
	mergeKnown(known, rs)
	if err := storeCheck(ctx, tx, &row, known, rs, startedAt); err != nil {
		return nil, err
	}
	if err := selectors.SeenInDNS(ctx, tx, em, selectors.Domain{ID: row.ID, AccountID: row.AccountID, Name: row.Name, Tags: row.Tags},
		rs.DKIM, now); err != nil {
		return nil, err
	}
	rep, change, err := scoreLocked(ctx, tx, em, &row, known, rs, now)
	if err != nil {
		return nil, err
	}
	out.Domain, out.Health, out.HealthChange = row, rep, change
	return out, nil
}

// emitChanges compares rs with the known results and emits
// dns_record_changed for each change. Only checks with a known answer are
// compared: a check seen for the first time (the domain's first check, or
// its first non-temperror answer) is learned, not changed.
func emitChanges(ctx context.Context, tx pgx.Tx, em *events.Emitter, row *dbsqlc.Domain, known, rs *dnscheck.Results, now time.Time) ([]dnscheck.Change, error) {
	before := known.Map()
	after := map[string]dnscheck.Result{}
	for name, r := range rs.Map() {
		if _, ok := before[name]; ok {
			after[name] = r
		}
	}
	changes := dnscheck.Compare(before, after)
	for _, ch := range changes {
		sev := events.Severity("")
		if ch.Critical {
			sev = events.SeverityCritical
		}
		if _, err := em.Emit(ctx, tx, events.Event{
			AccountID: row.AccountID,
			Type:      events.TypeDNSRecordChanged,
			Domain:    row.Name,
			Tags:      row.Tags,
			Severity:  sev,
			At:        now,
			Payload: DNSRecordChangedPayload{
				Domain: row.Name,
				Check:  ch.Check,
				Before: recordState(ch.Before),
				After:  recordState(ch.After),
			},
		}); err != nil {
			return nil, fmt.Errorf("emitting dns_record_changed of %s: %w", row.Name, err)
		}
	}
	return changes, nil
}

// storeCheck stores rs as the domain's latest snapshot, with known, and
// updates row to match.
func storeCheck(ctx context.Context, tx pgx.Tx, row *dbsqlc.Domain, known, rs *dnscheck.Results, startedAt time.Time) error {
	resultsJSON, err := json.Marshal(rs)
	if err != nil {
		return fmt.Errorf("error encoding results: %w", err)
	}
	knownJSON, err := json.Marshal(known)
	if err != nil {
		return fmt.Errorf("error encoding known results: %w", err)
	}
	status := map[string]string{}
	for name, r := range rs.Map() {
		status[name] = r.Status
	}
	statusJSON, _ := json.Marshal(status)
	t := startedAt.UTC()
	if err := dbsqlc.New().DomainStoreCheck(ctx, tx, dbsqlc.DomainStoreCheckParams{
		ID: row.ID, CheckedAt: t, Results: resultsJSON, CheckStatus: statusJSON, Known: knownJSON,
	}); err != nil {
		return fmt.Errorf("error storing check of %s: %w", row.Name, err)
	}
	row.CheckedAt, row.Results, row.CheckStatus, row.Known = &t, resultsJSON, statusJSON, knownJSON
	return nil
}

// Score recomputes a domain's health from its stored results, in tx
// with the row locked: it appends to the health history and emits
// health_score_changed when the score moved by health.ChangeThreshold
// points or more. A domain never checked has nothing to score (nil).
func Score(ctx context.Context, tx pgx.Tx, em *events.Emitter, domainID uuid.UUID, now time.Time) (*health.Report, error) {
	row, err := dbsqlc.New().DomainGetByIDForUpdate(ctx, tx, domainID)
	if dbutil.IsNotFound(err) {
		return nil, ErrDomainGone
	}
	if err != nil {
		return nil, fmt.Errorf("error locking domain: %w", err)
	}
	if len(row.Known) == 0 {
		return nil, nil
	}
	known, latest := &dnscheck.Results{}, &dnscheck.Results{}
	if err := json.Unmarshal(row.Known, known); err != nil {
		return nil, fmt.Errorf("error decoding known results of %s: %w", row.Name, err)
	}
	if len(row.Results) > 0 {
		if err := json.Unmarshal(row.Results, latest); err != nil {
			return nil, fmt.Errorf("error decoding results of %s: %w", row.Name, err)
		}
	}
	rep, _, err := scoreLocked(ctx, tx, em, &row, known, latest, now)
	return rep, err
}

// scoreLocked scores the known results (so a check that is temporarily
// unknown counts with its last known answer and never moves the score),
// stores the report and its history row and emits health_score_changed.
func scoreLocked(ctx context.Context, tx pgx.Tx, em *events.Emitter, row *dbsqlc.Domain, known, latest *dnscheck.Results, now time.Time) (*health.Report, health.Change, error) {
	caps, err := healthCaps(ctx, tx, row, now)
	if err != nil {
		return nil, health.Change{}, err
	}
	rep := health.Score(known, caps...)
	if !rep.Complete {
		// Nothing is known yet: no score rather than a misleading 0.
		return nil, health.Change{}, nil
	}
	latestMap := latest.Map()
	for i, c := range rep.Components {
		if r, ok := latestMap[c.Name]; ok && r.Status == dnscheck.StatusTemperror && !slices.Contains(rep.Unknown, c.Name) {
			rep.Components[i].Reason += " (last known answer: the latest check had a temporary DNS failure)"
		}
	}
	var prev *health.Report
	if len(row.Health) > 0 {
		prev = &health.Report{}
		if err := json.Unmarshal(row.Health, prev); err != nil {
			prev = nil
		}
	}
	prevScore := 0
	if row.Score != nil {
		prevScore = int(*row.Score)
	}
	change := health.Compare(prevScore, rep.Score, row.Score != nil)

	q := dbsqlc.New()
	repJSON, err := json.Marshal(rep)
	if err != nil {
		return nil, change, fmt.Errorf("error encoding health report: %w", err)
	}
	at := now.UTC()
	if err := q.DomainHealthInsert(ctx, tx, dbsqlc.DomainHealthInsertParams{
		ID: uuid.Must(uuid.NewV7()), DomainID: row.ID, Score: int32(rep.Score), Report: repJSON, ComputedAt: at,
	}); err != nil {
		return nil, change, fmt.Errorf("error appending health history: %w", err)
	}
	if err := q.DomainStoreScore(ctx, tx, dbsqlc.DomainStoreScoreParams{
		ID: row.ID, Score: int32(rep.Score), Health: repJSON, ScoredAt: at,
	}); err != nil {
		return nil, change, fmt.Errorf("error storing health score: %w", err)
	}
	score := int32(rep.Score)
	row.Score, row.Health, row.ScoredAt = &score, repJSON, &at

	if change.Emit {
		if err := emitHealthChange(ctx, tx, em, row, change, prev, &rep, now); err != nil {
			return nil, change, err
		}
	}
	return &rep, change, nil
}

// emitHealthChange emits health_score_changed for change, with the
// reasons that moved the score from prev to cur.
func emitHealthChange(ctx context.Context, tx pgx.Tx, em *events.Emitter, row *dbsqlc.Domain, change health.Change, prev, cur *health.Report, now time.Time) error {
	sev := events.Severity("")
	switch {
	case change.Critical:
		sev = events.SeverityCritical
	case change.Delta > 0:
		sev = events.SeverityInfo
	}
	if _, err := em.Emit(ctx, tx, events.Event{
		AccountID: row.AccountID,
		Type:      events.TypeHealthScoreChanged,
		Domain:    row.Name,
		Tags:      row.Tags,
		Severity:  sev,
		At:        now,
		Payload: HealthScoreChangedPayload{
			Domain:        row.Name,
			PreviousScore: change.Previous,
			Score:         change.Current,
			Delta:         change.Delta,
			Reasons:       healthReasons(prev, cur),
		},
	}); err != nil {
		return fmt.Errorf("emitting health_score_changed of %s: %w", row.Name, err)
	}
	return nil
}

// healthCaps are the live-signal caps of a domain's score: the DMARC pass
// rate of its aggregate reports over the last 30 days (health.DMARCPassRateCap,
// from 100 messages), and the bounce and complaint rates of its sending
// providers' last 24 hours of events (providers.HealthCaps documents the rule),
// failing MX hosts that senders verify (transport.HealthCap), and the share
// of its mail carried by blocklisted IPs (health.BlocklistCap).
func healthCaps(ctx context.Context, tx pgx.Tx, row *dbsqlc.Domain, now time.Time) ([]health.Cap, error) {
	caps, err := providers.HealthCaps(ctx, tx, row.AccountID, row.ID, now)
	if err != nil {
		return nil, err
	}
	rate, messages, err := reports.PassRate(ctx, tx, row.ID, now)
	if err != nil {
		return nil, err
	}
	if c, ok := health.DMARCPassRateCap(rate, int(messages)); ok {
		caps = append(caps, c)
	}
	if c, ok, err := transport.HealthCap(ctx, tx, row); err != nil {
		return nil, err
	} else if ok {
		caps = append(caps, c)
	}
	listed, err := reputation.ListedShare(ctx, tx, row.AccountID, row.ID)
	if err != nil {
		return nil, err
	}
	if c, ok := health.BlocklistCap(listed); ok {
		caps = append(caps, c)
	}
	return caps, nil
}

// reportAddress is the domain's signed DMARC reporting address when the
// account asked for one (POST .../sign: the DMARC check then asks that rua
// names it), else "". Addresses only minted, as every domain's are, ask
// nothing of its DNS.
func reportAddress(ctx context.Context, db dbsqlc.DBTX, signer *reports.Signer, domainID uuid.UUID) string {
	if signer == nil || signer.Keyring == nil || signer.Domain == "" {
		return ""
	}
	dmarc, _, err := (&reports.Service{Signer: signer}).SignedAddresses(ctx, db, domainID)
	if err != nil {
		return ""
	}
	return dmarc
}

// mergeSelectors appends the selectors of seen missing from configured.
func mergeSelectors(configured, seen []string) []string {
	out := append([]string(nil), configured...)
	for _, s := range seen {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// healthReasons explains a score change: each component whose points
// moved, and a cap that started or stopped applying.
func healthReasons(prev, cur *health.Report) []string {
	reasons := []string{}
	prevPoints := map[string]health.Component{}
	if prev != nil {
		for _, c := range prev.Components {
			prevPoints[c.Name] = c
		}
	}
	for _, c := range cur.Components {
		p, ok := prevPoints[c.Name]
		if !ok || p.Points == c.Points {
			continue
		}
		reasons = append(reasons, fmt.Sprintf("%s: %s (%g -> %g of %d points)", c.Name, c.Reason, p.Points, c.Points, c.Weight))
	}
	prevCap, curCap := "", ""
	if prev != nil && prev.Applied != nil {
		prevCap = prev.Applied.Name
	}
	if cur.Applied != nil {
		curCap = cur.Applied.Name
	}
	if curCap != prevCap && cur.Applied != nil {
		reasons = append(reasons, fmt.Sprintf("capped at %d: %s", cur.Applied.Max, cur.Applied.Reason))
	}
	if curCap != prevCap && prev != nil && prev.Applied != nil && cur.Applied == nil {
		reasons = append(reasons, "no longer capped: "+prev.Applied.Reason)
	}
	return reasons
}

// RecordState is one side of a dns_record_changed payload.
type RecordState struct {
	Status  string   `json:"status"`
	Records []string `json:"records"`
}

func recordState(r dnscheck.Result) RecordState {
	recs := r.Records
	if recs == nil {
		recs = []string{}
	}
	return RecordState{Status: r.Status, Records: recs}
}

// DNSRecordChangedPayload is the payload of dns_record_changed.
type DNSRecordChangedPayload struct {
	Domain string      `json:"domain"`
	Check  string      `json:"check"`
	Before RecordState `json:"before"`
	After  RecordState `json:"after"`
}

// HealthScoreChangedPayload is the payload of health_score_changed.
type HealthScoreChangedPayload struct {
	Domain        string   `json:"domain"`
	PreviousScore int      `json:"previous_score"`
	Score         int      `json:"score"`
	Delta         int      `json:"delta"`
	Reasons       []string `json:"reasons"`
}

// mergeKnown replaces each check of known with its result in rs unless
// that is a temperror (or missing).
func mergeKnown(known, rs *dnscheck.Results) {
	known.Domain = rs.Domain
	ok := func(r *dnscheck.Result) bool { return r.Status != dnscheck.StatusTemperror }
	// Whether the domain exists is known when any check got an answer.
	for _, r := range rs.Map() {
		if ok(&r) {
			known.NXDomain = rs.NXDomain
			break
		}
	}
	if rs.SPF != nil && ok(&rs.SPF.Result) {
		known.SPF = rs.SPF
	}
	if rs.DMARC != nil && ok(&rs.DMARC.Result) {
		known.DMARC = rs.DMARC
	}
	if rs.DKIM != nil && ok(&rs.DKIM.Result) {
		known.DKIM = rs.DKIM
	}
	if rs.MX != nil && ok(&rs.MX.Result) {
		known.MX = rs.MX
	}
	if rs.MTASTS != nil && ok(&rs.MTASTS.Result) {
		known.MTASTS = rs.MTASTS
	}
	if rs.TLSRPT != nil && ok(&rs.TLSRPT.Result) {
		known.TLSRPT = rs.TLSRPT
	}
	if rs.BIMI != nil && ok(&rs.BIMI.Result) {
		known.BIMI = rs.BIMI
	}
	if rs.DNSSEC != nil && ok(&rs.DNSSEC.Result) {
		known.DNSSEC = rs.DNSSEC
	}
}

package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/health"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// Domain checking defaults.
const (
	// DefaultDNSCheckInterval is how often every domain is re-checked when
	// the configuration does not say (DNS_CHECK_INTERVAL).
	DefaultDNSCheckInterval = 15 * time.Minute
	// DomainCheckBudget bounds one domain's checks. They run concurrently,
	// so it bounds the whole CheckAll too.
	DomainCheckBudget = 10 * time.Second
	// defaultHealthHistoryDays is HEALTH_HISTORY_DAYS's default.
	defaultHealthHistoryDays = 90
	// scheduleBatch is how many check jobs the scheduler inserts at once.
	scheduleBatch = 1000
)

// ErrDomainGone is returned by ApplyDomainCheck and ScoreDomain when the
// domain was deleted.
var ErrDomainGone = errors.New("domain no longer exists")

// DomainCheckArgs checks one domain's DNS now and applies the result:
// change detection, the stored snapshot and the health score.
type DomainCheckArgs struct {
	DomainID uuid.UUID `json:"domain_id"`
}

// Kind implements river.JobArgs.
func (DomainCheckArgs) Kind() string { return "domain_check" }

// InsertOpts implements river.JobArgsWithInsertOpts. A failed check is
// retried a couple of times; the next period checks again anyway.
func (DomainCheckArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDNS, MaxAttempts: 3}
}

// DomainHealthArgs recomputes one domain's health score from its stored
// DNS results.
type DomainHealthArgs struct {
	DomainID uuid.UUID `json:"domain_id"`
}

// Kind implements river.JobArgs.
func (DomainHealthArgs) Kind() string { return "domain_health" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DomainHealthArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueDNS, MaxAttempts: 5}
}

// DomainScheduleArgs enqueues one DomainCheckArgs per domain for the next
// period, each at a stable offset within it.
type DomainScheduleArgs struct{}

// Kind implements river.JobArgs.
func (DomainScheduleArgs) Kind() string { return "domain_check_schedule" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DomainScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: 30 * time.Second}}
}

// DomainHealthPruneArgs deletes health history older than
// HEALTH_HISTORY_DAYS.
type DomainHealthPruneArgs struct{}

// Kind implements river.JobArgs.
func (DomainHealthPruneArgs) Kind() string { return "domain_health_prune" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DomainHealthPruneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// addDomainWorkers registers this feature's workers.
func addDomainWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &DomainCheckWorker{deps: deps, metrics: newDomainMetrics(deps)})
	river.AddWorker(w, &DomainHealthWorker{deps: deps})
	river.AddWorker(w, &DomainScheduleWorker{deps: deps})
	river.AddWorker(w, &DomainHealthPruneWorker{deps: deps})
}

// domainPeriodicJobs returns this feature's schedules.
func domainPeriodicJobs(deps Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(deps.dnsCheckInterval()), func() (river.JobArgs, *river.InsertOpts) {
			return DomainScheduleArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "domain_check_schedule"}),
		river.NewPeriodicJob(river.PeriodicInterval(6*time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return DomainHealthPruneArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "domain_health_prune"}),
	}
}

func (d Deps) dnsCheckInterval() time.Duration {
	if d.Config != nil && d.Config.DNSCheckInterval > 0 {
		return d.Config.DNSCheckInterval
	}
	return DefaultDNSCheckInterval
}

func (d Deps) domainNow() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d Deps) domainLogger() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.Default()
}

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
// DomainCheckBudget, exactly as the periodic check and the live lookup both
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
		CheckTimeout:  DomainCheckBudget,
		DKIMSelectors: d.DkimSelectors,
		ReportAddress: reportAddress,
	})
}

// CheckOutcome is what applying one check did.
type CheckOutcome struct {
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

// ApplyDomainCheck is the one place a DNS check becomes state: in tx, with
// the domain's row locked, it compares rs with the domain's last known
// results (dnscheck.Compare; a temperror is never a change), emits
// dns_record_changed for each change, stores rs as the latest snapshot,
// then scores the domain (see ScoreDomain). startedAt is when the check
// began; a check older than the stored one is discarded. Both the live
// lookup of the API and the check job call it.
//
// selectors are the DKIM selectors the check used: when the domain's
// selectors changed while it ran, its DKIM answer describes selectors the
// domain no longer has and is treated as unknown (temperror) rather than
// compared or learned; the change itself queued a fresh check.
func ApplyDomainCheck(ctx context.Context, tx pgx.Tx, em *events.Emitter, domainID uuid.UUID, selectors []string, startedAt time.Time, rs *dnscheck.Results, now time.Time) (*CheckOutcome, error) {
	q := dbsqlc.New()
	row, err := q.DomainGetByIDForUpdate(ctx, tx, domainID)
	if dbutil.IsNotFound(err) {
		return nil, ErrDomainGone
	}
	if err != nil {
		return nil, fmt.Errorf("error locking domain: %w", err)
	}
	out := &CheckOutcome{Domain: row}
	if row.CheckedAt != nil && row.CheckedAt.After(startedAt) {
		return out, nil
	}
	out.Applied = true
	if rs.DKIM != nil && !slices.Equal(selectors, row.DkimSelectors) {
		rs.DKIM.Status = dnscheck.StatusTemperror
		rs.DKIM.Errors = append(rs.DKIM.Errors, "the domain's DKIM selectors changed while this check ran; a new check is queued")
	}

	known := &dnscheck.Results{Domain: row.Name}
	first := len(row.Known) == 0
	if !first {
		if err := json.Unmarshal(row.Known, known); err != nil {
			return nil, fmt.Errorf("error decoding known results of %s: %w", row.Name, err)
		}
	}
	// Compare only checks with a known answer: a check seen for the first
	// time (the domain's first check, or its first non-temperror answer) is
	// learned, not changed.
	before := known.Map()
	after := map[string]dnscheck.Result{}
	for name, r := range rs.Map() {
		if _, ok := before[name]; ok {
			after[name] = r
		}
	}
	out.Changes = dnscheck.Compare(before, after)
	for _, ch := range out.Changes {
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
			return nil, err
		}
	}

	mergeKnown(known, rs)
	resultsJSON, err := json.Marshal(rs)
	if err != nil {
		return nil, fmt.Errorf("error encoding results: %w", err)
	}
	knownJSON, err := json.Marshal(known)
	if err != nil {
		return nil, fmt.Errorf("error encoding known results: %w", err)
	}
	status := map[string]string{}
	for name, r := range rs.Map() {
		status[name] = r.Status
	}
	statusJSON, _ := json.Marshal(status)
	if err := q.DomainStoreCheck(ctx, tx, dbsqlc.DomainStoreCheckParams{
		ID: row.ID, CheckedAt: startedAt.UTC(), Results: resultsJSON, CheckStatus: statusJSON, Known: knownJSON,
	}); err != nil {
		return nil, fmt.Errorf("error storing check of %s: %w", row.Name, err)
	}
	t := startedAt.UTC()
	row.CheckedAt, row.Results, row.CheckStatus, row.Known = &t, resultsJSON, statusJSON, knownJSON

	rep, change, err := scoreLocked(ctx, tx, em, &row, known, rs, now)
	if err != nil {
		return nil, err
	}
	out.Domain, out.Health, out.HealthChange = row, rep, change
	return out, nil
}

// ScoreDomain recomputes a domain's health from its stored results, in tx
// with the row locked: it appends to the health history and emits
// health_score_changed when the score moved by health.ChangeThreshold
// points or more. A domain never checked has nothing to score (nil).
func ScoreDomain(ctx context.Context, tx pgx.Tx, em *events.Emitter, domainID uuid.UUID, now time.Time) (*health.Report, error) {
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
				Reasons:       healthReasons(prev, &rep),
			},
		}); err != nil {
			return nil, change, err
		}
	}
	return &rep, change, nil
}

// healthCaps are the live-signal caps of a domain's score: the DMARC pass
// rate of its aggregate reports over the last 30 days (health.DMARCPassRateCap,
// from 100 messages), and the bounce and complaint rates of its sending
// providers' last 24 hours of events (providers.HealthCaps documents the rule).
func healthCaps(ctx context.Context, tx pgx.Tx, row *dbsqlc.Domain, now time.Time) ([]health.Cap, error) {
	caps, err := providers.HealthCaps(ctx, tx, row.ID, now)
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

// DomainCheckWorker works DomainCheckArgs.
type DomainCheckWorker struct {
	river.WorkerDefaults[DomainCheckArgs]
	deps    Deps
	metrics *domainMetrics
}

// Timeout implements river.Worker: the checks have their own budget; this
// leaves room for the transaction.
func (w *DomainCheckWorker) Timeout(*river.Job[DomainCheckArgs]) time.Duration {
	return DomainCheckBudget + 50*time.Second
}

// Work checks the domain's DNS (no transaction held) and applies the
// result in one transaction that also completes the job.
func (w *DomainCheckWorker) Work(ctx context.Context, job *river.Job[DomainCheckArgs]) error {
	if w.deps.Resolver == nil {
		return errors.New("no DNS resolver configured")
	}
	q := dbsqlc.New()
	row, err := q.DomainGetByID(ctx, w.deps.Pool, job.Args.DomainID)
	if dbutil.IsNotFound(err) {
		return nil // deleted since: nothing to converge
	}
	if err != nil {
		return fmt.Errorf("error reading domain: %w", err)
	}
	started := w.deps.domainNow()
	t0 := time.Now()
	rs := CheckDomain(ctx, w.deps.Resolver, w.deps.MTASTSClient, w.deps.Pool, ReportService(w.deps).Signer, row, started)
	if err := ctx.Err(); err != nil {
		return err
	}
	elapsed := time.Since(t0)
	var out *CheckOutcome
	err = dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		out, err = ApplyDomainCheck(ctx, tx, &events.Emitter{}, row.ID, row.DkimSelectors, started, rs, w.deps.domainNow())
		if err != nil {
			return err
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if errors.Is(err, ErrDomainGone) {
		return nil
	}
	if err != nil {
		return err
	}
	if out.Applied {
		w.recomputeAfterCheck(ctx, out.Domain) // dnsfix.go
	}
	if w.metrics != nil {
		w.metrics.observe(rs, elapsed, len(out.Changes))
	}
	attrs := []any{slog.String("domain", row.Name), slog.Duration("elapsed", elapsed), slog.Bool("applied", out.Applied), slog.Int("changes", len(out.Changes))}
	if out.Health != nil {
		attrs = append(attrs, slog.Int("score", out.Health.Score))
	}
	w.deps.domainLogger().InfoContext(ctx, "checked domain", attrs...)
	return nil
}

// DomainHealthWorker works DomainHealthArgs.
type DomainHealthWorker struct {
	river.WorkerDefaults[DomainHealthArgs]
	deps Deps
}

// Work recomputes the score in one transaction that also completes the
// job.
func (w *DomainHealthWorker) Work(ctx context.Context, job *river.Job[DomainHealthArgs]) error {
	err := dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := ScoreDomain(ctx, tx, &events.Emitter{}, job.Args.DomainID, w.deps.domainNow()); err != nil {
			return err
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if errors.Is(err, ErrDomainGone) {
		return nil
	}
	return err
}

// DomainScheduleWorker works DomainScheduleArgs.
type DomainScheduleWorker struct {
	river.WorkerDefaults[DomainScheduleArgs]
	deps Deps
}

// Work enqueues every domain's next periodic check. Each job is unique per
// (domain, period), so a scheduler run twice in one period (a new leader,
// a restart, an operator) adds nothing.
func (w *DomainScheduleWorker) Work(ctx context.Context, job *river.Job[DomainScheduleArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	n, err := ScheduleDomainChecks(ctx, w.deps.Pool, client, w.deps.dnsCheckInterval(), w.deps.domainNow())
	if err != nil {
		return err
	}
	w.deps.domainLogger().InfoContext(ctx, "scheduled domain checks", slog.Int("inserted", n), slog.Duration("interval", w.deps.dnsCheckInterval()))
	return nil
}

// ScheduleDomainChecks inserts, for every domain, its check of the period
// that starts at or after now (see NextCheckAt), and returns how many were
// new.
func ScheduleDomainChecks(ctx context.Context, db dbutil.Executor, client *river.Client[pgx.Tx], interval time.Duration, now time.Time) (int, error) {
	q := dbsqlc.New()
	inserted := 0
	after := uuid.Nil
	for {
		ids, err := q.DomainIDsAfter(ctx, db, dbsqlc.DomainIDsAfterParams{After: after, MaxRows: scheduleBatch})
		if err != nil {
			return inserted, fmt.Errorf("error listing domains: %w", err)
		}
		if len(ids) == 0 {
			return inserted, nil
		}
		params := make([]river.InsertManyParams, len(ids))
		for i, id := range ids {
			params[i] = river.InsertManyParams{Args: DomainCheckArgs{DomainID: id}, InsertOpts: &river.InsertOpts{
				Queue:       QueueDNS,
				MaxAttempts: 3,
				ScheduledAt: NextCheckAt(id, interval, now),
				UniqueOpts:  river.UniqueOpts{ByArgs: true, ByPeriod: interval},
			}}
		}
		res, err := client.InsertMany(ctx, params)
		if err != nil {
			return inserted, fmt.Errorf("error inserting domain checks: %w", err)
		}
		for _, r := range res {
			if !r.UniqueSkippedAsDuplicate {
				inserted++
			}
		}
		after = ids[len(ids)-1]
	}
}

// DomainHealthPruneWorker works DomainHealthPruneArgs.
type DomainHealthPruneWorker struct {
	river.WorkerDefaults[DomainHealthPruneArgs]
	deps Deps
}

// Work deletes health history older than the retention.
func (w *DomainHealthPruneWorker) Work(ctx context.Context, job *river.Job[DomainHealthPruneArgs]) error {
	days := defaultHealthHistoryDays
	if w.deps.Config != nil && w.deps.Config.HealthHistoryDays > 0 {
		days = w.deps.Config.HealthHistoryDays
	}
	before := w.deps.domainNow().UTC().Add(-time.Duration(days) * 24 * time.Hour)
	n, err := dbsqlc.New().DomainHealthPrune(ctx, w.deps.Pool, before)
	if err != nil {
		return fmt.Errorf("error pruning health history: %w", err)
	}
	w.deps.domainLogger().InfoContext(ctx, "pruned health history", slog.Int64("rows", n), slog.Time("before", before))
	return nil
}

package reports

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/arf"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

// The report heartbeat: who sends a domain's aggregate reports
// (dmarc_reporters, written at ingest) and the watch that notices when a
// reporter that sent daily falls silent. And the rate limit of the events
// failure reports raise.
const (
	// MaxReporters bounds the reporters kept per domain; reports of others
	// are stored but not watched.
	MaxReporters = 50
	// ReporterSilence is how long a daily reporter may be silent before
	// dmarc_reports_stopped.
	ReporterSilence = 72 * time.Hour
	// DailyMinDays: a reporter is daily when it reported on at least this
	// many of the 7 UTC days up to its last report.
	DailyMinDays = 5
	// reporterWatchSpan: reporters silent for longer than this are no
	// longer watched (the watch runs hourly; a daily one is caught within
	// hours of ReporterSilence), so a watch reads the last month's
	// reporters only.
	reporterWatchSpan = 30 * 24 * time.Hour
	// maxReporterName bounds a reporter's name, in characters.
	maxReporterName = 100
	// FailureNoticeEvery is the rate limit of dmarc_failure_report: one
	// per domain per period.
	FailureNoticeEvery = time.Hour
)

// ReporterName is a report's org_name as a reporter's key: control
// characters and invalid UTF-8 dropped, trimmed, inner white space
// collapsed, lower-cased, at most 100 characters; "unknown" when empty.
func ReporterName(org string) string {
	org = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && !unicode.IsSpace(r) {
			return -1 // dropped: NUL and the like cannot be stored
		}
		return r
	}, strings.ToValidUTF8(org, ""))
	name := strings.ToLower(strings.Join(strings.Fields(org), " "))
	if utf8.RuneCountInString(name) > maxReporterName {
		name = strings.TrimSpace(string([]rune(name)[:maxReporterName]))
	}
	if name == "" {
		return "unknown"
	}
	return name
}

// noteReporter records an aggregate report of org for the domain, at the
// time it is stored (the parse runs as soon as the report arrives), and
// raises dmarc_reports_resumed when the reporter had been declared
// stopped.
func (s *Service) noteReporter(ctx context.Context, tx pgx.Tx, emitter *events.Emitter, msg *dbsqlc.ReportMessageGetForUpdateRow, org string) error {
	name := ReporterName(org)
	at := s.now().UTC()
	stopped, err := q.DMARCReporterSeen(ctx, tx, dbsqlc.DMARCReporterSeenParams{
		DomainID: msg.DomainID, Reporter: name, SeenAt: at, SeenDay: utcDay(at), MaxReporters: MaxReporters,
	})
	if dbutil.IsNotFound(err) {
		return nil // a new reporter past MaxReporters
	}
	if err != nil {
		return fmt.Errorf("error recording the reporter: %w", err)
	}
	if stopped == nil {
		return nil
	}
	_, err = emitter.Emit(ctx, tx, events.Event{
		AccountID: msg.AccountID, Type: events.TypeDMARCReportsResumed, Domain: msg.DomainName, Tags: msg.DomainTags,
		Payload: map[string]any{"domain": msg.DomainName, "reporter": name, "stopped_at": stopped.UTC()}, At: at,
	})
	return err
}

// WatchReporters raises dmarc_reports_stopped for every daily reporter
// silent for ReporterSilence at now, batch reporters per transaction, and
// returns how many it raised. Each is raised once per silence: the
// reporter is marked stopped in the same transaction.
func WatchReporters(ctx context.Context, db dbutil.Executor, emitter *events.Emitter, now time.Time, batch int) (int, error) {
	total := 0
	for {
		n, err := dbutil.WithTxV(ctx, db, func(ctx context.Context, tx pgx.Tx) (int, error) {
			rows, err := q.DMARCReportersSilent(ctx, tx, dbsqlc.DMARCReportersSilentParams{
				Before: now.Add(-ReporterSilence), Since: now.Add(-reporterWatchSpan), MinDays: DailyMinDays, MaxRows: int32(batch),
			})
			if err != nil {
				return 0, fmt.Errorf("error reading silent reporters: %w", err)
			}
			for _, r := range rows {
				if err := stopReporter(ctx, tx, emitter, r, now); err != nil {
					return 0, err
				}
			}
			return len(rows), nil
		})
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
}

func stopReporter(ctx context.Context, tx pgx.Tx, emitter *events.Emitter, r dbsqlc.DMARCReportersSilentRow, now time.Time) error {
	if err := q.DMARCReporterStop(ctx, tx, dbsqlc.DMARCReporterStopParams{DomainID: r.DomainID, Reporter: r.Reporter, SeenAt: now}); err != nil {
		return fmt.Errorf("error marking a reporter stopped: %w", err)
	}
	_, err := emitter.Emit(ctx, tx, events.Event{
		AccountID: r.AccountID, Type: events.TypeDMARCReportsStopped, Domain: r.DomainName, Tags: r.DomainTags, At: now,
		Payload: map[string]any{"domain": r.DomainName, "reporter": r.Reporter, "last_report_at": r.LastSeenAt.UTC(),
			"silent_hours": int(now.Sub(r.LastSeenAt) / time.Hour), "days_reported": daysReported(r.RecentDays)},
	})
	return err
}

// daysReported counts the days of recent (ascending) within the 7 UTC days
// up to its last.
func daysReported(recent []time.Time) int {
	if len(recent) == 0 {
		return 0
	}
	last, n := recent[len(recent)-1], 0
	for _, d := range recent {
		if d.After(last.AddDate(0, 0, -7)) {
			n++
		}
	}
	return n
}

// noteFailure raises dmarc_failure_report for a failure report stored
// now, unless one was raised for the domain in the FailureNoticeEvery
// before; then the report is counted into the next event's suppressed.
func (s *Service) noteFailure(ctx context.Context, tx pgx.Tx, emitter *events.Emitter, msg *dbsqlc.ReportMessageGetForUpdateRow, r *arf.Report) error {
	at := s.now().UTC().Truncate(time.Microsecond)
	n, err := q.DMARCFailureNotice(ctx, tx, dbsqlc.DMARCFailureNoticeParams{DomainID: msg.DomainID, SeenAt: at, Cutoff: at.Add(-FailureNoticeEvery)})
	if err != nil {
		return fmt.Errorf("error taking the failure report rate limit: %w", err)
	}
	if !n.EmittedAt.Equal(at) {
		return nil
	}
	p := map[string]any{"domain": msg.DomainName, "suppressed": n.PreviousSuppressed}
	for k, v := range map[string]string{"reporter": r.UserAgent, "source_ip": r.SourceIP, "from": r.From,
		"auth_failure": r.AuthFailure, "dkim_domain": r.DKIMDomain} {
		if v != "" {
			p[k] = clip(v, 200)
		}
	}
	if !r.ArrivalDate.IsZero() {
		p["arrival_date"] = r.ArrivalDate.UTC()
	}
	_, err = emitter.Emit(ctx, tx, events.Event{
		AccountID: msg.AccountID, Type: events.TypeDMARCFailureReport, Domain: msg.DomainName, Tags: msg.DomainTags, Payload: p, At: at,
	})
	return err
}

// clip cuts s to at most n characters.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Reporter statuses.
const (
	ReporterDaily      = "daily"
	ReporterOccasional = "occasional"
	ReporterStopped    = "stopped"
)

// Reporter is one sender of a domain's aggregate reports.
type Reporter struct {
	Name          string     `json:"reporter" validate:"required" description:"The reports' org_name, trimmed and lower-cased."`
	FirstSeen     time.Time  `json:"first_seen_at" validate:"required"`
	LastSeen      time.Time  `json:"last_seen_at" validate:"required" description:"When its latest report was stored."`
	Reports       int64      `json:"reports" validate:"required"`
	DaysReported7 int        `json:"days_reported_7" validate:"required" description:"UTC days with a report of it among the 7 ending today."`
	Status        string     `json:"status" validate:"required" enum:"daily,occasional,stopped" description:"daily: reports on at least 5 of the 7 days up to its last; stopped: a daily reporter silent for 3 days (dmarc_reports_stopped), until its next report."`
	StoppedAt     *time.Time `json:"stopped_at" validate:"required" description:"When dmarc_reports_stopped was raised; null unless stopped."`
}

// Reporters lists the domain's reporters (at most MaxReporters), most
// recently seen first, as of now.
func Reporters(ctx context.Context, db dbsqlc.DBTX, domainID uuid.UUID, now time.Time) ([]Reporter, error) {
	rows, err := q.DMARCReporterList(ctx, db, domainID)
	if err != nil {
		return nil, fmt.Errorf("error listing reporters: %w", err)
	}
	today := utcDay(now)
	out := make([]Reporter, len(rows))
	for i, r := range rows {
		rep := Reporter{Name: r.Reporter, FirstSeen: r.FirstSeenAt.UTC(), LastSeen: r.LastSeenAt.UTC(), Reports: r.Reports, StoppedAt: r.StoppedAt}
		for _, d := range r.RecentDays {
			if d.After(today.AddDate(0, 0, -7)) && !d.After(today) {
				rep.DaysReported7++
			}
		}
		switch {
		case r.StoppedAt != nil:
			rep.Status = ReporterStopped
		case daysReported(r.RecentDays) >= DailyMinDays:
			rep.Status = ReporterDaily
		default:
			rep.Status = ReporterOccasional
		}
		out[i] = rep
	}
	return out, nil
}

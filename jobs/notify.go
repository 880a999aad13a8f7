package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/weekly"
)

// Notification mail (internal/notify): alerts at once, a daily digest of
// the rest, and address verification. Every send goes through the SMTP
// relay (SMTP_RELAY_URL) from a River job, so a relay that is down delays
// mail (River's backoff, 25 attempts over about three weeks) and never
// loses it; a 5xx reply cancels the job, since retrying cannot change it.
// With SMTP_RELAY_URL unset the jobs log that they skipped and complete.

// digestEventsMax caps the events one digest reads; digestListed caps
// those it lists.
const (
	digestEventsMax = 1000
	digestListed    = 100
)

func addNotifyWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &AlertEmailWorker{deps: deps})
	river.AddWorker(w, &VerifyEmailWorker{deps: deps})
	river.AddWorker(w, &DigestScheduleWorker{deps: deps})
	river.AddWorker(w, &DigestWorker{deps: deps})
}

// notifyPeriodicJobs schedules the digest run every day at 00:05 UTC (and
// on start, so a worker that was down at midnight catches up; days already
// mailed are skipped).
func notifyPeriodicJobs(Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(dailyAt{minute: 5}, func() (river.JobArgs, *river.InsertOpts) {
			return DigestScheduleArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "notify_digest_schedule"}),
	}
}

// dailyAt is a River schedule firing once a day at hour:minute UTC.
type dailyAt struct{ hour, minute int }

// Next implements river.PeriodicSchedule.
func (d dailyAt) Next(current time.Time) time.Time {
	c := current.UTC()
	next := time.Date(c.Year(), c.Month(), c.Day(), d.hour, d.minute, 0, 0, time.UTC)
	if !next.After(c) {
		next = next.AddDate(0, 0, 1)
	}
	return next
}

// sendOutcome maps a send error to the job's result.
func sendOutcome(ctx context.Context, deps Deps, what string, err error, attrs ...any) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, notify.ErrNoRelay):
		deps.Logger.InfoContext(ctx, "email skipped: SMTP_RELAY_URL is not set", append(attrs, slog.String("mail", what))...)
		return nil
	case notify.Permanent(err):
		return river.JobCancel(fmt.Errorf("relay refused the %s mail: %w", what, err))
	default:
		return fmt.Errorf("error sending %s mail: %w", what, err)
	}
}

// AlertEmailWorker mails one alert (events.AlertEmailArgs).
type AlertEmailWorker struct {
	river.WorkerDefaults[events.AlertEmailArgs]
	deps Deps
}

// Work sends the alert to the account's verified addresses as they are now.
func (w *AlertEmailWorker) Work(ctx context.Context, job *river.Job[events.AlertEmailArgs]) error {
	q := dbsqlc.New()
	ev, err := q.EventGetForNotification(ctx, w.deps.Pool, job.Args.EventID)
	if dbutil.IsNotFound(err) {
		return nil // pruned or the account deleted
	}
	if err != nil {
		return fmt.Errorf("error reading alert: %w", err)
	}
	if ok, err := mailAllowed(ctx, w.deps, ev.AccountID); !ok || err != nil {
		return err
	}
	to, err := q.NotificationAddressListVerified(ctx, w.deps.Pool, ev.AccountID)
	if err != nil {
		return fmt.Errorf("error reading notification addresses: %w", err)
	}
	if len(to) == 0 {
		return nil
	}
	if w.deps.Mail == nil || w.deps.Mail.Relay == nil {
		return sendOutcome(ctx, w.deps, "alert", notify.ErrNoRelay, slog.String("event_id", ev.ID.String()))
	}
	msg, err := w.deps.Mail.AlertMessage(ev, to)
	if err != nil {
		return err
	}
	return sendOutcome(ctx, w.deps, "alert", w.deps.Mail.Send(ctx, msg, w.deps.Now()), slog.String("event_id", ev.ID.String()))
}

// VerifyEmailWorker mails a verification token (notify.VerifyEmailArgs).
type VerifyEmailWorker struct {
	river.WorkerDefaults[notify.VerifyEmailArgs]
	deps Deps
}

// Work stores a new token for the address and mails it; an address that
// is gone or already verified needs nothing.
func (w *VerifyEmailWorker) Work(ctx context.Context, job *river.Job[notify.VerifyEmailArgs]) error {
	if job.Args.AccountID != uuid.Nil {
		if ok, err := mailAllowed(ctx, w.deps, job.Args.AccountID); !ok || err != nil {
			return err
		}
	}
	if w.deps.Mail == nil || w.deps.Mail.Relay == nil {
		return sendOutcome(ctx, w.deps, "verification", notify.ErrNoRelay, slog.String("address_id", job.Args.AddressID.String()))
	}
	token, row, ok, err := notify.NewToken(ctx, w.deps.Pool, job.Args.AddressID, w.deps.Now())
	if err != nil || !ok {
		return err
	}
	msg, err := w.deps.Mail.VerifyMessage(row.Email, token)
	if err != nil {
		return err
	}
	return sendOutcome(ctx, w.deps, "verification", w.deps.Mail.Send(ctx, msg, w.deps.Now()), slog.String("address_id", row.ID.String()))
}

// DigestScheduleArgs starts the daily digest: one DigestArgs per account
// with something to report for the previous UTC day.
type DigestScheduleArgs struct{}

// Kind implements river.JobArgs.
func (DigestScheduleArgs) Kind() string { return "notify_digest_schedule" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (DigestScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// DigestScheduleWorker works DigestScheduleArgs.
type DigestScheduleWorker struct {
	river.WorkerDefaults[DigestScheduleArgs]
	deps Deps
}

// digestDay is the UTC day a digest run at now reports: the previous one.
func digestDay(now time.Time) time.Time {
	n := now.UTC()
	return time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -1)
}

// Work enqueues one digest job per account (unique by account and day).
func (w *DigestScheduleWorker) Work(ctx context.Context, job *river.Job[DigestScheduleArgs]) error {
	day := digestDay(w.deps.Now())
	accounts, err := dbsqlc.New().NotificationDigestAccounts(ctx, w.deps.Pool, dbsqlc.NotificationDigestAccountsParams{
		FromAt: day, ToAt: day.AddDate(0, 0, 1), Day: day,
	})
	if err != nil {
		return fmt.Errorf("error listing digest accounts: %w", err)
	}
	if len(accounts) == 0 {
		return nil
	}
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	params := make([]river.InsertManyParams, len(accounts))
	for i, a := range accounts {
		params[i] = river.InsertManyParams{Args: DigestArgs{AccountID: a, Day: day.Format(time.DateOnly)}}
	}
	if _, err := client.InsertMany(ctx, params); err != nil {
		return fmt.Errorf("error enqueueing digests: %w", err)
	}
	return nil
}

// DigestArgs mail one account's digest of one UTC day (YYYY-MM-DD).
type DigestArgs struct {
	AccountID uuid.UUID `json:"account_id"`
	Day       string    `json:"day"`
}

// Kind implements river.JobArgs.
func (DigestArgs) Kind() string { return "notify_digest" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (a DigestArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: river.QueueDefault, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true},
		Tags: []string{accounts.JobTag(a.AccountID)}}
}

// DigestWorker works DigestArgs.
type DigestWorker struct {
	river.WorkerDefaults[DigestArgs]
	deps Deps
}

// Work mails the day's non-critical events whose email channel resolves to
// on (events.Resolve through notify.Set), only when there are some, then
// records the day so it is never mailed twice. An account that chose the
// weekly digest instead (weekly.Settings.ReplaceDaily) gets none.
func (w *DigestWorker) Work(ctx context.Context, job *river.Job[DigestArgs]) error {
	day, err := time.Parse(time.DateOnly, job.Args.Day)
	if err != nil {
		return river.JobCancel(fmt.Errorf("bad digest day %q: %w", job.Args.Day, err))
	}
	q := dbsqlc.New()
	account := job.Args.AccountID
	if ok, err := mailAllowed(ctx, w.deps, account); !ok || err != nil {
		return err
	}
	if _, err := q.NotificationDigestGet(ctx, w.deps.Pool, dbsqlc.NotificationDigestGetParams{AccountID: account, Day: day}); err == nil {
		return nil
	} else if !dbutil.IsNotFound(err) {
		return fmt.Errorf("error reading digest record: %w", err)
	}
	if weeklySet, err := weekly.Load(ctx, w.deps.Pool, account); err != nil {
		return err
	} else if weeklySet.Enabled && weeklySet.ReplaceDaily {
		return river.RecordOutput(ctx, map[string]string{"skipped": "the account chose the weekly digest instead"})
	}
	set, err := notify.Load(ctx, w.deps.Pool, account)
	if err != nil {
		return err
	}
	evs, err := q.NotificationDigestEvents(ctx, w.deps.Pool, dbsqlc.NotificationDigestEventsParams{
		AccountID: account, FromAt: day, ToAt: day.AddDate(0, 0, 1), Max: digestEventsMax,
	})
	if err != nil {
		return fmt.Errorf("error reading digest events: %w", err)
	}
	kept := evs[:0]
	for _, ev := range evs {
		if set.Decide(ev.EventType, events.ChannelEmail).Send {
			kept = append(kept, ev)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	to, err := q.NotificationAddressListVerified(ctx, w.deps.Pool, account)
	if err != nil {
		return fmt.Errorf("error reading notification addresses: %w", err)
	}
	if len(to) == 0 {
		return nil
	}
	if w.deps.Mail == nil || w.deps.Mail.Relay == nil {
		return sendOutcome(ctx, w.deps, "digest", notify.ErrNoRelay, slog.String("account_id", account.String()))
	}
	msg, err := w.deps.Mail.DigestMessage(day, kept[:min(len(kept), digestListed)], len(kept), to)
	if err != nil {
		return err
	}
	if err := sendOutcome(ctx, w.deps, "digest", w.deps.Mail.Send(ctx, msg, w.deps.Now()), slog.String("account_id", account.String())); err != nil {
		return err
	}
	if err := q.NotificationDigestInsert(ctx, w.deps.Pool, dbsqlc.NotificationDigestInsertParams{AccountID: account, Day: day, Events: int32(len(kept))}); err != nil {
		return fmt.Errorf("error recording digest: %w", err)
	}
	return nil
}

// mailAllowed reports whether the account may be mailed now: not when it
// is gone, being deleted or suspended (an operator's suspension pauses
// everything that goes out for it, as it pauses webhook pushes). The job
// then completes with the reason in its output, sending nothing.
func mailAllowed(ctx context.Context, deps Deps, account uuid.UUID) (bool, error) {
	st, err := accounts.Get(ctx, deps.Pool, account)
	reason := ""
	switch {
	case errors.Is(err, accounts.ErrNotFound):
		reason = "the account no longer exists"
	case err != nil:
		return false, err
	case st.Deleting():
		reason = "the account is being deleted"
	case st.Suspended():
		reason = "the account is suspended"
	default:
		return true, nil
	}
	if err := river.RecordOutput(ctx, map[string]string{"skipped": reason}); err != nil {
		return false, err
	}
	return false, nil
}

package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/weekly"
)

// The weekly digest (internal/weekly): every hour a schedule queues one
// job per account with a verified address whose last whole week is not
// mailed yet, so a worker down on Monday catches up later in the week; the
// job mails it and records the week, so a week is mailed once.

// weeklyScheduleBatch is the accounts one schedule statement reads.
const weeklyScheduleBatch = 1000

func addWeeklyWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &WeeklyScheduleWorker{deps: deps})
	river.AddWorker(w, &WeeklyDigestWorker{deps: deps})
}

func weeklyPeriodicJobs(Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return WeeklyScheduleArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "weekly_digest_schedule"}),
	}
}

// WeeklyScheduleArgs queues the week's digests.
type WeeklyScheduleArgs struct{}

// Kind implements river.JobArgs.
func (WeeklyScheduleArgs) Kind() string { return "weekly_digest_schedule" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (WeeklyScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// WeeklyScheduleWorker works WeeklyScheduleArgs.
type WeeklyScheduleWorker struct {
	river.WorkerDefaults[WeeklyScheduleArgs]
	deps Deps
}

// Work queues one WeeklyDigestArgs per account due (unique by account and
// week), weeklyScheduleBatch accounts per statement.
func (w *WeeklyScheduleWorker) Work(ctx context.Context, _ *river.Job[WeeklyScheduleArgs]) error {
	week := weekly.WeekOf(w.deps.Now())
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	queued := 0
	for after := uuid.Nil; ; {
		ids, err := dbsqlc.New().WeeklyAccounts(ctx, w.deps.Pool, dbsqlc.WeeklyAccountsParams{After: after, Week: week, MaxRows: weeklyScheduleBatch})
		if err != nil {
			return fmt.Errorf("error listing weekly digest accounts: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		params := make([]river.InsertManyParams, len(ids))
		for i, id := range ids {
			params[i] = river.InsertManyParams{Args: WeeklyDigestArgs{AccountID: id, Week: week.Format(time.DateOnly)}}
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("error enqueueing weekly digests: %w", err)
		}
		queued += len(ids)
		after = ids[len(ids)-1]
	}
	return river.RecordOutput(ctx, map[string]any{"week": week.Format(time.DateOnly), "queued": queued})
}

// WeeklyDigestArgs mails one account's digest of the week starting on the
// Monday Week (YYYY-MM-DD).
type WeeklyDigestArgs struct {
	AccountID uuid.UUID `json:"account_id"`
	Week      string    `json:"week"`
}

// Kind implements river.JobArgs.
func (WeeklyDigestArgs) Kind() string { return "weekly_digest" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (a WeeklyDigestArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: river.QueueDefault, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true},
		Tags: []string{accounts.JobTag(a.AccountID)}}
}

// WeeklyDigestWorker works WeeklyDigestArgs.
type WeeklyDigestWorker struct {
	river.WorkerDefaults[WeeklyDigestArgs]
	deps Deps
}

// Work builds and mails the week's digest to the verified addresses,
// unless the account turned it off or the week was mailed, then records
// the week.
func (w *WeeklyDigestWorker) Work(ctx context.Context, job *river.Job[WeeklyDigestArgs]) error {
	week, err := time.Parse(time.DateOnly, job.Args.Week)
	if err != nil || week.Weekday() != time.Monday {
		return river.JobCancel(fmt.Errorf("bad digest week %q: not a Monday", job.Args.Week))
	}
	account := job.Args.AccountID
	if ok, err := mailAllowed(ctx, w.deps, account); !ok || err != nil {
		return err
	}
	q := dbsqlc.New()
	if sent, err := q.WeeklySent(ctx, w.deps.Pool, dbsqlc.WeeklySentParams{AccountID: account, Week: week}); err != nil || sent {
		return err
	}
	set, err := weekly.Load(ctx, w.deps.Pool, account)
	if err != nil || !set.Enabled {
		return err
	}
	to, err := q.NotificationAddressListVerified(ctx, w.deps.Pool, account)
	if err != nil || len(to) == 0 {
		return err
	}
	if w.deps.Mail == nil || w.deps.Mail.Relay == nil {
		return sendOutcome(ctx, w.deps, "weekly digest", notify.ErrNoRelay, slog.String("account_id", account.String()))
	}
	b := &weekly.Builder{DB: w.deps.Pool, Reports: reportService(w.deps), Link: w.deps.Mail.BaseURL}
	report, err := b.Build(ctx, account, week, set, w.deps.Now())
	if err != nil {
		return err
	}
	m, err := weekly.Render(report)
	if err != nil {
		return err
	}
	msg := notify.Message{To: to, Subject: m.Subject, Text: m.Text, HTML: m.HTML}
	if err := sendOutcome(ctx, w.deps, "weekly digest", w.deps.Mail.Send(ctx, msg, w.deps.Now()), slog.String("account_id", account.String())); err != nil {
		return err
	}
	return q.WeeklyRecord(ctx, w.deps.Pool, dbsqlc.WeeklyRecordParams{AccountID: account, Week: week, Domains: int32(len(report.Domains))})
}

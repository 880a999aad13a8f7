package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/esp"
	"github.com/mailwatch/mailwatch/internal/partitions"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// providerPayloadRetention is how long normalised payloads are kept for
// re-runs; their replay keys refuse repeats for as long, which
// PROVIDER_WEBHOOK_MAX_AGE is bounded by (esp.MaxAgeLimit).
const providerPayloadRetention = esp.ReplayRetention

// MessageSpikeScheduleArgs enqueues the spike checks of recently active
// domains.
type MessageSpikeScheduleArgs struct{}

// Kind implements river.JobArgs.
func (MessageSpikeScheduleArgs) Kind() string { return "message_spike_schedule" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (MessageSpikeScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: providers.SpikeCheckInterval / 2}}
}

// ProviderPayloadPruneArgs deletes normalised payloads after a week.
type ProviderPayloadPruneArgs struct{}

// Kind implements river.JobArgs.
func (ProviderPayloadPruneArgs) Kind() string { return "provider_payload_prune" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ProviderPayloadPruneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

func addProviderWorkers(w *river.Workers, deps Deps) {
	gate := providers.NewGate(deps.Settings.ProviderAccountConcurrency)
	gate.Observe(deps.observeProviderGate)
	waits := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mailwatch_provider_payload_waits_total",
		Help: "provider_payload jobs put back (snoozed, no attempt used) because their account had PROVIDER_ACCOUNT_CONCURRENCY jobs running in the process.",
	})
	if deps.Registry != nil {
		waits = register(deps.Registry, waits)
	}
	river.AddWorker(w, &ProviderPayloadWorker{deps: deps, gate: gate, waits: waits})
	river.AddWorker(w, &SNSConfirmWorker{deps: deps})
	river.AddWorker(w, &MessageSpikeCheckWorker{deps: deps})
	river.AddWorker(w, &MessageSpikeScheduleWorker{deps: deps})
	river.AddWorker(w, &ProviderPayloadPruneWorker{deps: deps})
	river.AddWorker(w, &MessageRollupRebuildWorker{deps: deps})
}

func providerPeriodicJobs(Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(providers.SpikeCheckInterval), func() (river.JobArgs, *river.InsertOpts) {
			return MessageSpikeScheduleArgs{}, nil
		}, &river.PeriodicJobOpts{ID: "message_spike_schedule"}),
		river.NewPeriodicJob(river.PeriodicInterval(6*time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return ProviderPayloadPruneArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "provider_payload_prune"}),
	}
}

// ProviderPayloadWorker works providers.PayloadArgs.
type ProviderPayloadWorker struct {
	river.WorkerDefaults[providers.PayloadArgs]
	deps Deps
	// gate bounds the jobs of one account running at once in this process
	// (PROVIDER_ACCOUNT_CONCURRENCY): a job over it waits, snoozed, and
	// counts in waits.
	gate  *providers.Gate
	waits prometheus.Counter
}

// Work normalises the payloads in one transaction with the job's
// completion. The payloads are one account's (jobs queued before the
// ingress split them by account may hold several accounts'); each one's
// failure is isolated (providers.ProcessPayloads): the others are
// normalised and committed, and the failed ones are queued again in a job
// of their own, later, until they are given up. Only a failure of the
// transaction itself fails the job, and a retry of the whole job changes
// nothing twice (normalising is idempotent).
//
// A job of an account (AccountID) is admitted only while fewer than the
// account's bound of its jobs run in this process (providers.Gate); one
// over it waits for its turn (wait) before doing any work. A job without
// an account (queued before jobs were split by account) is not bounded.
func (w *ProviderPayloadWorker) Work(ctx context.Context, job *river.Job[providers.PayloadArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	if account := job.Args.AccountID; account != uuid.Nil && w.gate != nil {
		release, busy := w.gate.Admit(account)
		if busy != nil {
			return w.wait(ctx, job, busy)
		}
		defer release()
	}
	return completeInTx(ctx, w.deps.Pool, job, func(ctx context.Context, tx pgx.Tx) error {
		res, err := providers.ProcessPayloads(ctx, tx, job.Args.IDs(), w.deps.Now())
		if err != nil {
			return err
		}
		for _, f := range res.Failures {
			w.deps.Logger.WarnContext(ctx, "provider payload failed to normalise", slog.String("payload_id", f.PayloadID.String()),
				slog.Int("attempts", f.Attempts), slog.Bool("given_up", f.GivenUp), slog.Any("error", f.Err))
		}
		if retry := res.Retry(); len(retry) > 0 {
			// ScheduledAt is compared with the database's clock, not Deps.Now.
			opts := &river.InsertOpts{ScheduledAt: time.Now().Add(res.RetryDelay())}
			again := providers.PayloadArgs{AccountID: job.Args.AccountID, PayloadIDs: retry}
			if _, err := client.InsertTx(ctx, tx, again, opts); err != nil {
				return fmt.Errorf("error queueing failed payloads again: %w", err)
			}
		}
		return nil
	})
}

// wait puts back a job over its account's bound: it is snoozed (River
// runs it again after providers.FairWait, without using an attempt) and
// the worker is free at once for another job, often another account's.
func (w *ProviderPayloadWorker) wait(ctx context.Context, job *river.Job[providers.PayloadArgs], busy error) error {
	waits := providers.FairWaits(job.Metadata)
	d := providers.FairWait(waits, nil)
	if err := river.MetadataSet(ctx, providers.MetadataFairWaits, waits+1); err != nil {
		return fmt.Errorf("error counting a wait: %w", err)
	}
	if w.waits != nil {
		w.waits.Inc()
	}
	w.deps.Logger.DebugContext(ctx, "provider payload job waits for its account's turn", slog.String("account_id", job.Args.AccountID.String()),
		slog.Duration("wait", d), slog.Any("reason", busy))
	return river.JobSnooze(d)
}

// MessageSpikeScheduleWorker works MessageSpikeScheduleArgs.
type MessageSpikeScheduleWorker struct {
	river.WorkerDefaults[MessageSpikeScheduleArgs]
	deps Deps
}

// Work enqueues a spike check for every domain with events stored in the
// last two intervals (so a missed run loses nothing; checking a domain
// twice is harmless).
func (w *MessageSpikeScheduleWorker) Work(ctx context.Context, _ *river.Job[MessageSpikeScheduleArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	return dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx pgx.Tx) error {
		_, err := providers.ScheduleSpikeChecks(ctx, tx, client, w.deps.Now().Add(-2*providers.SpikeCheckInterval))
		return err
	})
}

// SNSConfirmWorker works providers.SNSConfirmArgs.
type SNSConfirmWorker struct {
	river.WorkerDefaults[providers.SNSConfirmArgs]
	deps Deps
}

// Timeout implements river.Worker.
func (w *SNSConfirmWorker) Timeout(*river.Job[providers.SNSConfirmArgs]) time.Duration {
	return 30 * time.Second
}

// Work visits the SubscribeURL through the AWS-only, SSRF-guarded client
// and marks the payload processed. A payload or provider deleted since is
// nothing to do.
func (w *SNSConfirmWorker) Work(ctx context.Context, job *river.Job[providers.SNSConfirmArgs]) error {
	if w.deps.SNSClient == nil {
		return river.JobCancel(errors.New("no SNS client configured"))
	}
	err := providers.ConfirmSNSPayload(ctx, w.deps.Pool, w.deps.SNSClient, job.Args.PayloadID, w.deps.Now())
	if errors.Is(err, providers.ErrUnreadablePayload) {
		return river.JobCancel(err)
	}
	return err
}

// MessageSpikeCheckWorker works providers.SpikeCheckArgs.
type MessageSpikeCheckWorker struct {
	river.WorkerDefaults[providers.SpikeCheckArgs]
	deps Deps
}

// Work evaluates the domain's rates; when an episode starts or ends the
// domain's health is rescored (the rates cap it).
func (w *MessageSpikeCheckWorker) Work(ctx context.Context, job *river.Job[providers.SpikeCheckArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	return completeInTx(ctx, w.deps.Pool, job, func(ctx context.Context, tx pgx.Tx) error {
		rescore := domains.HealthArgs{DomainID: job.Args.DomainID}
		_, err := providers.CheckMessageSpikes(ctx, tx, client, job.Args.DomainID, w.deps.Now(), rescore)
		return err
	})
}

// ProviderPayloadPruneWorker works ProviderPayloadPruneArgs.
type ProviderPayloadPruneWorker struct {
	river.WorkerDefaults[ProviderPayloadPruneArgs]
	deps Deps
}

// NewProviderPayloadPruneWorker returns the worker (the history benchmark
// runs its Work directly).
func NewProviderPayloadPruneWorker(deps Deps) *ProviderPayloadPruneWorker {
	return &ProviderPayloadPruneWorker{deps: deps.withDefaults()}
}

// Work forgets the replay keys of payloads older than a week, and deletes
// the processed payloads older than a week that no partition drop will
// remove (those in the DEFAULT partition: partitions.PruneBefore), in
// batches. The partitions themselves are dropped by
// PartitionMaintainWorker.
func (w *ProviderPayloadPruneWorker) Work(ctx context.Context, _ *river.Job[ProviderPayloadPruneArgs]) error {
	q := dbsqlc.New()
	before := w.deps.Now().Add(-providerPayloadRetention)
	err := deleteInBatches(5000, func(limit int32) (int64, error) {
		return q.ProviderPayloadKeyDeleteBefore(ctx, w.deps.Pool, dbsqlc.ProviderPayloadKeyDeleteBeforeParams{BeforeID: dbutil.UUIDv7Floor(before), Max: limit})
	})
	if err != nil {
		return fmt.Errorf("error pruning replay keys: %w", err)
	}
	rows, err := partitions.PruneBefore(ctx, w.deps.Pool, "provider_payloads", before)
	if err != nil {
		return err
	}
	return deleteInBatches(5000, func(limit int32) (int64, error) {
		return q.ProviderPayloadDeleteProcessedBefore(ctx, w.deps.Pool, dbsqlc.ProviderPayloadDeleteProcessedBeforeParams{BeforeID: dbutil.UUIDv7Floor(rows), Max: limit})
	})
}

// MessageRollupRebuildWorker works providers.RollupRebuildArgs.
type MessageRollupRebuildWorker struct {
	river.WorkerDefaults[providers.RollupRebuildArgs]
	deps Deps
}

// NewMessageRollupRebuildWorker returns the worker (tests run its Work
// directly).
func NewMessageRollupRebuildWorker(deps Deps) *MessageRollupRebuildWorker {
	return &MessageRollupRebuildWorker{deps: deps.withDefaults()}
}

// Timeout implements river.Worker: every account's recount of a large
// installation takes a while; a run cut short is run again whole (each
// account's rebuild is its own transaction, and a rebuild of right rollups
// writes nothing).
func (w *MessageRollupRebuildWorker) Timeout(*river.Job[providers.RollupRebuildArgs]) time.Duration {
	return time.Hour
}

// Work recounts the rollups of the job's account, or of every account, and
// logs what was corrected.
func (w *MessageRollupRebuildWorker) Work(ctx context.Context, job *river.Job[providers.RollupRebuildArgs]) error {
	var (
		r   providers.Rebuilt
		err error
	)
	if job.Args.AccountID == uuid.Nil {
		r, err = providers.RebuildAllMessageRollups(ctx, w.deps.Pool)
	} else {
		r, err = providers.RebuildMessageRollups(ctx, w.deps.Pool, job.Args.AccountID)
	}
	level := slog.LevelInfo
	if r.Corrected() {
		level = slog.LevelWarn
	}
	w.deps.Logger.Log(ctx, level, "rebuilt message event rollups", slog.Int("accounts", r.Accounts),
		slog.Int64("domain_rows_written", r.DomainWritten), slog.Int64("domain_rows_deleted", r.DomainDeleted),
		slog.Int64("account_rows_written", r.AccountWritten), slog.Int64("account_rows_deleted", r.AccountDeleted),
		slog.Int64("daily_rows_written", r.DailyWritten), slog.Int64("daily_rows_deleted", r.DailyDeleted))
	return err
}

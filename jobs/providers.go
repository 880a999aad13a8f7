package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/domains"
	"github.com/mailwatch/mailwatch/internal/esp"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// SpikeCheckInterval is how often the spike scheduler enqueues a check of
// every domain that got message events since its previous runs. Checking
// from a schedule rather than from each normalisation job keeps the hot
// path free of a per-domain unique insert that concurrent jobs would queue
// on.
const SpikeCheckInterval = 30 * time.Second

// spikeScheduleBatch bounds the domains one scheduler run enqueues.
const spikeScheduleBatch = 10000

// providerPayloadRetention is how long normalised payloads are kept for
// re-runs; their replay keys refuse repeats for as long, which
// PROVIDER_WEBHOOK_MAX_AGE is bounded by (esp.MaxAgeLimit).
const providerPayloadRetention = esp.ReplayRetention

// MessageSpikeCheckArgs evaluates a domain's bounce and complaint rates.
type MessageSpikeCheckArgs struct {
	DomainID uuid.UUID `json:"domain_id"`
}

// Kind implements river.JobArgs.
func (MessageSpikeCheckArgs) Kind() string { return "message_spike_check" }

// InsertOpts implements river.JobArgsWithInsertOpts: at most one check
// per domain per SpikeCheckInterval.
func (MessageSpikeCheckArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 5, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: SpikeCheckInterval}}
}

// MessageSpikeScheduleArgs enqueues the spike checks of recently active
// domains.
type MessageSpikeScheduleArgs struct{}

// Kind implements river.JobArgs.
func (MessageSpikeScheduleArgs) Kind() string { return "message_spike_schedule" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (MessageSpikeScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: SpikeCheckInterval / 2}}
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
	river.AddWorker(w, &ProviderPayloadWorker{deps: deps})
	river.AddWorker(w, &SNSConfirmWorker{deps: deps})
	river.AddWorker(w, &MessageSpikeCheckWorker{deps: deps})
	river.AddWorker(w, &MessageSpikeScheduleWorker{deps: deps})
	river.AddWorker(w, &ProviderPayloadPruneWorker{deps: deps})
}

func providerPeriodicJobs(Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(SpikeCheckInterval), func() (river.JobArgs, *river.InsertOpts) {
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
}

// Work normalises the payloads in one transaction with the job's
// completion. The payloads may belong to several accounts, so each one's
// failure is isolated (providers.ProcessPayloads): the others are
// normalised and committed, and the failed ones are queued again in a job
// of their own, later, until they are given up. Only a failure of the
// transaction itself fails the job, and a retry of the whole job changes
// nothing twice (normalising is idempotent).
func (w *ProviderPayloadWorker) Work(ctx context.Context, job *river.Job[providers.PayloadArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	return dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx pgx.Tx) error {
		res, err := providers.ProcessPayloads(ctx, tx, job.Args.IDs(), w.deps.domainNow())
		if err != nil {
			return err
		}
		for _, f := range res.Failures {
			w.deps.domainLogger().WarnContext(ctx, "provider payload failed to normalise", slog.String("payload_id", f.PayloadID.String()),
				slog.Int("attempts", f.Attempts), slog.Bool("given_up", f.GivenUp), slog.Any("error", f.Err))
		}
		if retry := res.Retry(); len(retry) > 0 {
			// ScheduledAt is compared with the database's clock, not Deps.Now.
			opts := &river.InsertOpts{ScheduledAt: time.Now().Add(res.RetryDelay())}
			if _, err := client.InsertTx(ctx, tx, providers.PayloadArgs{PayloadIDs: retry}, opts); err != nil {
				return fmt.Errorf("error queueing failed payloads again: %w", err)
			}
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
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
		_, err := ScheduleSpikeChecks(ctx, tx, client, w.deps.domainNow().Add(-2*SpikeCheckInterval))
		return err
	})
}

// ScheduleSpikeChecks enqueues, in tx, a spike check for every linked
// domain with message events stored since a time; it returns how many.
func ScheduleSpikeChecks(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], since time.Time) (int, error) {
	ids, err := dbsqlc.New().MessageEventDomainsReceivedSince(ctx, tx, dbsqlc.MessageEventDomainsReceivedSinceParams{Since: since, Max: spikeScheduleBatch})
	if err != nil {
		return 0, fmt.Errorf("error listing active domains: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: MessageSpikeCheckArgs{DomainID: id}}
	}
	if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
		return 0, fmt.Errorf("error enqueueing spike checks: %w", err)
	}
	return len(ids), nil
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
	err := ConfirmSNSPayload(ctx, w.deps.Pool, w.deps.SNSClient, job.Args.PayloadID, w.deps.domainNow())
	if errors.Is(err, errUnreadablePayload) {
		return river.JobCancel(err)
	}
	return err
}

var errUnreadablePayload = errors.New("stored SNS payload is unreadable")

// ConfirmSNSPayload visits the SubscribeURL of a stored, verified
// SubscriptionConfirmation with client (ses.AWSOnlyClient over the guarded
// client) and marks the payload processed. A payload deleted since, or
// already confirmed, is nothing to do.
func ConfirmSNSPayload(ctx context.Context, db dbutil.Executor, client *http.Client, payloadID uuid.UUID, now time.Time) error {
	q := dbsqlc.New()
	pl, err := q.ProviderPayloadGetByID(ctx, db, payloadID)
	if dbutil.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if pl.ProcessedAt != nil {
		return nil
	}
	env, err := ses.ParseEnvelope(pl.Body)
	if err != nil {
		return fmt.Errorf("%w: %w", errUnreadablePayload, err)
	}
	if err := ses.Confirm(ctx, client, env); err != nil {
		return err
	}
	return q.ProviderPayloadMarkProcessed(ctx, db, dbsqlc.ProviderPayloadMarkProcessedParams{ID: pl.ID, Now: now, Events: 0})
}

// MessageSpikeCheckWorker works MessageSpikeCheckArgs.
type MessageSpikeCheckWorker struct {
	river.WorkerDefaults[MessageSpikeCheckArgs]
	deps Deps
}

// Work evaluates the domain's rates; when an episode starts or ends the
// domain's health is rescored (the rates cap it).
func (w *MessageSpikeCheckWorker) Work(ctx context.Context, job *river.Job[MessageSpikeCheckArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	return dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := CheckMessageSpikes(ctx, tx, client, job.Args.DomainID, w.deps.domainNow()); err != nil {
			return err
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// CheckMessageSpikes evaluates a domain with the default rules in tx and
// enqueues a health rescore when an episode started or ended.
func CheckMessageSpikes(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], domainID uuid.UUID, now time.Time) ([]providers.SpikeChange, error) {
	changes, err := providers.CheckSpikes(ctx, tx, &events.Emitter{River: client}, domainID, now, providers.DefaultSpikeRules)
	if err != nil {
		return nil, err
	}
	if len(changes) > 0 {
		if _, err := client.InsertTx(ctx, tx, domains.HealthArgs{DomainID: domainID}, nil); err != nil {
			return nil, fmt.Errorf("error enqueueing health rescore: %w", err)
		}
	}
	return changes, nil
}

// ProviderPayloadPruneWorker works ProviderPayloadPruneArgs.
type ProviderPayloadPruneWorker struct {
	river.WorkerDefaults[ProviderPayloadPruneArgs]
	deps Deps
}

// Work deletes processed payloads older than a week, in batches.
func (w *ProviderPayloadPruneWorker) Work(ctx context.Context, _ *river.Job[ProviderPayloadPruneArgs]) error {
	before := w.deps.domainNow().Add(-providerPayloadRetention)
	return deleteInBatches(5000, func(limit int32) (int64, error) {
		return dbsqlc.New().ProviderPayloadDeleteProcessedBefore(ctx, w.deps.Pool, dbsqlc.ProviderPayloadDeleteProcessedBeforeParams{BeforeID: dbutil.UUIDv7Floor(before), Max: limit})
	})
}

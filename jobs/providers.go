package jobs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/providers"
)

// SpikeCheckDelay debounces spike checks: a burst of payloads for a domain
// is evaluated once, shortly after it, rather than once per payload.
const SpikeCheckDelay = 5 * time.Second

// providerPayloadRetention is how long normalised payloads are kept for
// re-runs.
const providerPayloadRetention = 7 * 24 * time.Hour

// ProviderPayloadArgs normalises one stored provider webhook payload.
type ProviderPayloadArgs struct {
	PayloadID uuid.UUID `json:"payload_id"`
}

// Kind implements river.JobArgs.
func (ProviderPayloadArgs) Kind() string { return "provider_payload" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ProviderPayloadArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 10} }

// SNSConfirmArgs confirms an SNS subscription (the SubscribeURL of a
// stored, verified SubscriptionConfirmation).
type SNSConfirmArgs struct {
	PayloadID uuid.UUID `json:"payload_id"`
}

// Kind implements river.JobArgs.
func (SNSConfirmArgs) Kind() string { return "sns_subscription_confirm" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (SNSConfirmArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 8} }

// MessageSpikeCheckArgs evaluates a domain's bounce and complaint rates.
type MessageSpikeCheckArgs struct {
	DomainID uuid.UUID `json:"domain_id"`
}

// Kind implements river.JobArgs.
func (MessageSpikeCheckArgs) Kind() string { return "message_spike_check" }

// InsertOpts implements river.JobArgsWithInsertOpts: one check per domain
// per SpikeCheckDelay bucket of its scheduled time. Every insert is
// scheduled SpikeCheckDelay after its payload committed, so a check that
// absorbs later inserts of its bucket still runs after their events.
func (MessageSpikeCheckArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 5, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: SpikeCheckDelay}}
}

// ProviderPayloadPruneArgs deletes normalised payloads after a week.
type ProviderPayloadPruneArgs struct{}

// Kind implements river.JobArgs.
func (ProviderPayloadPruneArgs) Kind() string { return "provider_payload_prune" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ProviderPayloadPruneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

func addProviderWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &ProviderPayloadWorker{deps: deps})
	river.AddWorker(w, &SNSConfirmWorker{deps: deps})
	river.AddWorker(w, &MessageSpikeCheckWorker{deps: deps})
	river.AddWorker(w, &ProviderPayloadPruneWorker{deps: deps})
}

func providerPeriodicJobs(Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(6*time.Hour), func() (river.JobArgs, *river.InsertOpts) {
			return ProviderPayloadPruneArgs{}, nil
		}, &river.PeriodicJobOpts{RunOnStart: true, ID: "provider_payload_prune"}),
	}
}

// ProviderPayloadWorker works ProviderPayloadArgs.
type ProviderPayloadWorker struct {
	river.WorkerDefaults[ProviderPayloadArgs]
	deps Deps
}

// Work normalises the payload and enqueues a spike check for every linked
// domain that got events, in one transaction with the job's completion.
func (w *ProviderPayloadWorker) Work(ctx context.Context, job *river.Job[ProviderPayloadArgs]) error {
	client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
	if err != nil {
		return err
	}
	return dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := NormalisePayload(ctx, tx, client, job.Args.PayloadID, w.deps.domainNow()); err != nil {
			return err
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
}

// NormalisePayload runs providers.ProcessPayload and enqueues the spike
// checks of the domains it touched, in tx.
func NormalisePayload(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], payloadID uuid.UUID, now time.Time) (providers.Processed, error) {
	out, err := providers.ProcessPayload(ctx, tx, payloadID, now)
	if err != nil {
		return out, err
	}
	if len(out.Domains) == 0 {
		return out, nil
	}
	params := make([]river.InsertManyParams, len(out.Domains))
	for i, d := range out.Domains {
		params[i] = river.InsertManyParams{Args: MessageSpikeCheckArgs{DomainID: d}, InsertOpts: &river.InsertOpts{ScheduledAt: now.Add(SpikeCheckDelay)}}
	}
	if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
		return out, fmt.Errorf("error enqueueing spike checks: %w", err)
	}
	return out, nil
}

// SNSConfirmWorker works SNSConfirmArgs.
type SNSConfirmWorker struct {
	river.WorkerDefaults[SNSConfirmArgs]
	deps Deps
}

// Timeout implements river.Worker.
func (w *SNSConfirmWorker) Timeout(*river.Job[SNSConfirmArgs]) time.Duration { return 30 * time.Second }

// Work visits the SubscribeURL through the AWS-only, SSRF-guarded client
// and marks the payload processed. A payload or provider deleted since is
// nothing to do.
func (w *SNSConfirmWorker) Work(ctx context.Context, job *river.Job[SNSConfirmArgs]) error {
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
		if _, err := client.InsertTx(ctx, tx, DomainHealthArgs{DomainID: domainID}, nil); err != nil {
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
	for {
		n, err := dbsqlc.New().ProviderPayloadDeleteProcessedBefore(ctx, w.deps.Pool, dbsqlc.ProviderPayloadDeleteProcessedBeforeParams{Before: before, Max: 5000})
		if err != nil || n < 5000 {
			return err
		}
	}
}

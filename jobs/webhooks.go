package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// Webhook delivery rules (README: "Event subscriptions and webhook delivery").
const (
	// MaxSnooze caps how long a 429/503 Retry-After may hold a delivery
	// back without using an attempt.
	MaxSnooze = time.Hour
	// MaxSnoozes bounds how often a job may be delayed by 429/503 with
	// Retry-After without using an attempt; past it such an answer is an
	// ordinary failed attempt, so an endpoint that always asks to wait
	// still ends failed instead of being pushed forever.
	MaxSnoozes = 50
	// FailingDisableAfter disables a subscription whose pushes have failed,
	// without one success, for this long.
	FailingDisableAfter = 5 * 24 * time.Hour
	// ReconcileInterval is how often the reconciler repairs delivery rows
	// whose job was cancelled, deleted or rescheduled outside the API.
	ReconcileInterval = time.Minute
	// reconcileGrace leaves rows alone that changed this recently, so the
	// reconciler never races a transition in progress.
	reconcileGrace = 30 * time.Second
	// finishTimeout bounds the transaction recording an outcome after the
	// job's context ended (shutdown, remote cancel).
	finishTimeout = 10 * time.Second
)

// Delivery statuses.
const (
	DeliveryPending   = "pending"
	DeliveryRetrying  = "retrying"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
)

// Error classes recorded without a push.
const (
	errorClassSecret               = "secret_unavailable"
	errorClassSubscriptionDisabled = "subscription_disabled"
	errorClassJobCancelled         = "job_cancelled"
	errorClassJobGone              = "job_gone"
)

// addWebhookWorkers registers the push worker and the reconciler.
func addWebhookWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, NewDeliveryWorker(deps))
	river.AddWorker(w, &DeliveryReconcileWorker{deps: deps})
}

// webhookPeriodicJobs schedules the reconciler.
func webhookPeriodicJobs(deps Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(ReconcileInterval), func() (river.JobArgs, *river.InsertOpts) {
			return DeliveryReconcileArgs{}, nil
		}, &river.PeriodicJobOpts{ID: "webhook_reconcile"}),
	}
}

// DeliveryWorker pushes one delivery per run (queue webhooks). It reads the
// delivery and its subscription when it runs, so that the row converges
// whoever runs the job: the fan-out, River's scheduler after a failure,
// the API's manual retry, River UI or `mailwatch jobs retry`, the rescuer.
//
// One run is one attempt. The attempt row is written and committed before
// the request is sent, and the outcome (attempt and delivery rows) is
// committed before Work returns. The common statements of concurrent runs
// (starting an attempt on an owned delivery, recording an accepted push)
// are coalesced into one statement per batch; see coalescer.
type DeliveryWorker struct {
	river.WorkerDefaults[events.DeliveryArgs]
	deps    Deps
	metrics *webhookMetrics
	// retryAt hands the instant stored in next_retry_at to NextRetry, which
	// River calls right after Work returns an error.
	retryAt sync.Map // retryKey -> time.Time
	// starts and deliveries coalesce the common case of many concurrent
	// runs (a run starting on a delivery it owns; a push accepted) into
	// one statement per batch.
	starts     *coalescer[startIn, startOut]
	deliveries *coalescer[deliveredIn, struct{}]
	// gate bounds the pushes in flight per account and per destination
	// host (webhook.Gate): a push over a bound waits, snoozed, and the
	// worker takes another account's push.
	gate *webhook.Gate
}

// Coalescing limits. One batch in flight per kind of statement holds one
// pool connection each and lets the next batch grow while it runs; on the
// webhooks bench two in flight made smaller batches and fewer pushes/s.
const (
	coalesceMaxBatch    = 100
	coalesceMaxFlushers = 1
)

type retryKey struct {
	jobID   int64
	attempt int
}

// NewDeliveryWorker returns the push worker.
func NewDeliveryWorker(deps Deps) *DeliveryWorker {
	var limits webhook.Limits
	if deps.Config != nil {
		limits = deps.Config.WebhookLimits
	}
	w := &DeliveryWorker{deps: deps, metrics: newWebhookMetrics(deps), gate: webhook.NewGate(limits)}
	w.starts = &coalescer[startIn, startOut]{
		maxBatch: coalesceMaxBatch, maxFlushers: coalesceMaxFlushers, timeout: finishTimeout, run: w.startMany,
	}
	w.deliveries = &coalescer[deliveredIn, struct{}]{
		maxBatch: coalesceMaxBatch, maxFlushers: coalesceMaxFlushers, timeout: finishTimeout, run: w.deliveredMany,
	}
	return w
}

func (w *DeliveryWorker) now() time.Time {
	if w.deps.Now != nil {
		return w.deps.Now()
	}
	return time.Now()
}

func (w *DeliveryWorker) logger() *slog.Logger {
	if w.deps.Logger != nil {
		return w.deps.Logger
	}
	return slog.Default()
}

// NextRetry implements river.Worker: the documented schedule
// (webhook.NextDelay), at exactly the instant Work stored in the delivery's
// next_retry_at. A job that did not come through Work's failure path (the
// rescuer re-running a job whose process died) gets a fresh delay; the
// reconciler then copies River's scheduled_at into the row.
func (w *DeliveryWorker) NextRetry(job *river.Job[events.DeliveryArgs]) time.Time {
	if v, ok := w.retryAt.LoadAndDelete(retryKey{job.ID, job.Attempt}); ok {
		return v.(time.Time)
	}
	return time.Now().Add(webhook.NextDelay(job.Attempt, nil))
}

// started is what the first transaction of a run hands to the push.
type started struct {
	delivery  dbsqlc.WebhookDelivery
	sub       dbsqlc.EventSubscription
	attemptID uuid.UUID
}

// Work performs one attempt of the delivery, unless the push is over its
// account's or its host's bound (webhook.Gate): then it waits.
func (w *DeliveryWorker) Work(ctx context.Context, job *river.Job[events.DeliveryArgs]) error {
	// An account whose pushes already fill its bound, with as many more
	// waiting for a slot (slow endpoints), is put back before any work is
	// done for it, so that its queue costs the others a fetch and a snooze
	// per job, not a transaction.
	if account, ok := events.DeliveryTagAccount(job.Tags); ok {
		if busy := w.gate.AccountBusy(account); busy != nil {
			return w.wait(ctx, job, nil, busy)
		}
	}
	st, err := w.start(ctx, job)
	if err != nil || st == nil {
		return err
	}
	var a webhook.Attempt
	secret, err := w.deps.Keyring.Open(st.sub.SecretKeyID, st.sub.SecretCiphertext, st.sub.ID[:])
	if err != nil {
		// The key ring lost the key (MAILWATCH_SECRET_KEY changed without
		// MAILWATCH_SECRET_KEY_PREVIOUS): an operator can fix it, so retry.
		a = webhook.Attempt{ErrorClass: errorClassSecret, Error: "the signing secret cannot be decrypted with the configured keys"}
	} else {
		client := w.deps.WebhookClient
		if client == nil {
			// Never fall back to http.DefaultClient: it has no SSRF guard and
			// follows redirects.
			return errors.New("webhook worker has no WebhookClient configured")
		}
		// Admitted only now, so that the bounds count requests in flight,
		// not the bookkeeping around them. A push over a bound waits a
		// moment for a slot, then is put back.
		release, busy := w.gate.Acquire(ctx, st.delivery.AccountID, st.sub.URL, webhook.AdmitWait)
		if busy != nil {
			return w.wait(ctx, job, st, busy)
		}
		defer release() // should Send panic; releasing twice is harmless
		a = webhook.Send(ctx, client, webhook.Request{
			URL: st.sub.URL, MsgID: st.delivery.ID.String(), Body: st.delivery.Body, Secret: string(secret),
		})
		release()
	}
	return w.finish(ctx, job, st, a)
}

// metadataFairWaits is the job metadata key counting the times a job
// waited for its turn (wait). River's own "snoozes" counts those too.
const metadataFairWaits = "fair_waits"

// wait puts back a push that is over its account's or host's bound: its
// job is snoozed (River runs it again after webhook.FairWait, without using
// an attempt) and the worker is free for another push at once. An attempt
// already started (st) is retracted, so that waiting leaves no attempt.
func (w *DeliveryWorker) wait(ctx context.Context, job *river.Job[events.DeliveryArgs], st *started, busy error) error {
	waits := fairWaits(job.Metadata)
	d := webhook.FairWait(waits, nil)
	if st != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
		if _, err := dbsqlc.New().DeliveryRetractAttempt(ctx, w.deps.Pool, dbsqlc.DeliveryRetractAttemptParams{
			ID: st.delivery.ID, AttemptID: st.attemptID, NextRetryAt: w.now().UTC().Add(d),
		}); err != nil {
			return fmt.Errorf("error retracting an attempt over a concurrency bound: %w", err)
		}
	}
	reason := SkipAccountBusy
	var be *webhook.BusyError
	if errors.As(busy, &be) && be.Scope == webhook.ScopeHost {
		reason = SkipHostBusy
	}
	if err := river.MetadataSet(ctx, metadataFairWaits, waits+1); err != nil {
		return fmt.Errorf("error counting a wait: %w", err)
	}
	if err := river.RecordOutput(ctx, &SkipOutput{Reason: reason, Detail: fmt.Sprintf(
		"%s; this push waits %s for its turn, without using an attempt", busy, d)}); err != nil {
		return fmt.Errorf("error recording job output: %w", err)
	}
	w.metrics.observe("waiting", 0)
	return river.JobSnooze(d)
}

// fairWaits reads how often a job waited for its turn (wait).
func fairWaits(metadata []byte) int {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(metadata, &m) // absent or malformed: none
	var n int
	_ = json.Unmarshal(m[metadataFairWaits], &n)
	return n
}

// start locks the delivery, decides whether this run owns it, and records
// the attempt before the request is made. A nil result means there is
// nothing to push; the run's River output (and, for a disabled
// subscription, its cancellation) says why, so that River UI shows it.
func (w *DeliveryWorker) start(ctx context.Context, job *river.Job[events.DeliveryArgs]) (*started, error) {
	q := dbsqlc.New()
	// The common case, coalesced with other runs starting meanwhile: this
	// job owns a pending or retrying delivery of an enabled subscription.
	fast, err := w.starts.do(startIn{
		deliveryID: job.Args.DeliveryID, jobID: job.ID, attemptID: uuid.Must(uuid.NewV7()), jobAttempt: int32(job.Attempt),
		attemptsLeft: int32(max(job.MaxAttempts-job.Attempt, 0)), startedAt: w.now().UTC(),
	})
	if err != nil {
		return nil, fmt.Errorf("error starting attempt: %w", err)
	}
	if fast.started != nil {
		return fast.started, nil
	}
	var (
		out  *started
		skip *SkipOutput
	)
	err = dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx pgx.Tx) error {
		out, skip = nil, nil
		row, err := q.DeliveryGetForWork(ctx, tx, job.Args.DeliveryID)
		if dbutil.IsNotFound(err) {
			skip = &SkipOutput{Reason: SkipDeliveryGone, Detail: "the delivery no longer exists (its subscription or account was deleted)"}
			return nil
		}
		if err != nil {
			return fmt.Errorf("error reading delivery: %w", err)
		}
		d, sub := row.WebhookDelivery, row.EventSubscription
		if d.JobID == nil || *d.JobID != job.ID {
			// Another job owns the delivery (a manual retry made a new
			// one). This run only takes over when that job is finished or
			// gone, e.g. an operator retrying an older job in River UI.
			state, err := jobStateOf(ctx, tx, d.JobID)
			if err != nil {
				return err
			}
			if jobStateActive(state) {
				skip = &SkipOutput{Reason: SkipOwnedByOtherJob, OwnerJobID: d.JobID, Detail: fmt.Sprintf(
					"job %d (%s) owns this delivery and will push it; retry that job (or the delivery through the API) instead", *d.JobID, state)}
				return nil
			}
		}
		if d.Status == DeliveryDelivered && !operatorRetry(job.JobRow) {
			// This run follows an attempt of this job that never finished in
			// River (the worker died after the push was recorded and before
			// River completed the job, and the rescuer queued it again):
			// delivery is at least once, but a rescue never pushes again.
			skip = &SkipOutput{Reason: SkipAlreadyDelivered, Detail: "the delivery was already delivered; a run after a " +
				"crash or a rescue never pushes again (retry a completed job, or the delivery through the API, to re-send)"}
			return nil
		}
		if acct, err := accounts.Get(ctx, tx, d.AccountID); err == nil && acct.Suspended() {
			// Pushes of a suspended account wait, without using an attempt,
			// until an admin unsuspends it (which wakes them).
			skip = &SkipOutput{Reason: SkipAccountSuspended, Snooze: SuspendedSnooze, Detail: "the account is suspended; " +
				"the push waits until an admin unsuspends it"}
			return nil
		} else if err != nil && !errors.Is(err, accounts.ErrNotFound) {
			return err
		}
		if !sub.Enabled {
			skip = &SkipOutput{Reason: SkipSubscriptionDisabled, Cancelled: true, Detail: "the subscription is disabled; " +
				"enable it (PATCH .../event-subscriptions/{id} {\"enabled\": true}) and retry"}
			if sub.DisabledReason != nil {
				skip.Detail = "the subscription is disabled (" + *sub.DisabledReason + "); enable it " +
					"(PATCH .../event-subscriptions/{id} {\"enabled\": true}) and retry"
			}
			if d.Status == DeliveryDelivered {
				return nil // an operator's re-send of a delivered delivery: it stays delivered
			}
			failed, err := q.DeliveryMarkFailed(ctx, tx, dbsqlc.DeliveryMarkFailedParams{
				ID: d.ID, LastError: "the subscription is disabled", LastErrorClass: errorClassSubscriptionDisabled,
			})
			if dbutil.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("error failing delivery: %w", err)
			}
			// The operator's retry ended failed: like every delivery that
			// ends failed, it emits webhook_delivery_failed.
			return emitDeliveryFailed(ctx, tx, &events.Emitter{}, failed, sub)
		}
		if _, err := q.DeliveryAttemptCloseInterrupted(ctx, tx, d.ID); err != nil {
			return fmt.Errorf("error closing interrupted attempts: %w", err)
		}
		d, err = q.DeliveryStartAttempt(ctx, tx, dbsqlc.DeliveryStartAttemptParams{
			ID: d.ID, JobID: job.ID, JobAttemptsLeft: int32(max(job.MaxAttempts-job.Attempt, 0)),
		})
		if err != nil {
			return fmt.Errorf("error starting attempt: %w", err)
		}
		att, err := q.DeliveryAttemptInsert(ctx, tx, dbsqlc.DeliveryAttemptInsertParams{
			ID: uuid.Must(uuid.NewV7()), DeliveryID: d.ID, JobID: job.ID, JobAttempt: int32(job.Attempt), StartedAt: w.now().UTC(),
		})
		if err != nil {
			return fmt.Errorf("error recording attempt: %w", err)
		}
		out = &started{delivery: d, sub: sub, attemptID: att.ID}
		return nil
	})
	if err != nil || skip == nil {
		return out, err
	}
	// River stores the output on the job row when the run ends, and River
	// UI shows it on the job's page.
	if err := river.RecordOutput(ctx, skip); err != nil {
		return nil, fmt.Errorf("error recording job output: %w", err)
	}
	if skip.Cancelled {
		return nil, river.JobCancel(errors.New("nothing sent: " + skip.Detail))
	}
	if skip.Snooze > 0 {
		return nil, river.JobSnooze(skip.Snooze)
	}
	return nil, nil
}

// Reasons a delivery run sends nothing (SkipOutput.Reason).
const (
	SkipDeliveryGone         = "delivery_gone"
	SkipOwnedByOtherJob      = "owned_by_other_job"
	SkipAlreadyDelivered     = "already_delivered"
	SkipSubscriptionDisabled = "subscription_disabled"
	SkipAccountSuspended     = "account_suspended"
	// SkipAccountBusy and SkipHostBusy: the push waits for its turn, its
	// account's or its host's pushes in flight being at their bound.
	SkipAccountBusy = "account_busy"
	SkipHostBusy    = "host_busy"
)

// SuspendedSnooze is how long a push of a suspended account waits before
// its job looks again. Unsuspending wakes the account's pushes at once
// (WakeAccountDeliveries); this bounds the wait of a run that was deciding
// to snooze just as the account was unsuspended.
const SuspendedSnooze = 2 * time.Minute

// SkipOutput is the River job output of a delivery run that sent nothing:
// why, in words an operator reads in River UI.
type SkipOutput struct {
	Sent       bool   `json:"sent"`
	Reason     string `json:"reason"`
	Detail     string `json:"detail"`
	OwnerJobID *int64 `json:"owner_job_id,omitempty"`
	// Cancelled: the run is cancelled (with Detail as its error) rather
	// than completed, because what the operator asked for cannot happen.
	Cancelled bool `json:"-"`
	// Snooze: the run is snoozed (River runs it again after this long
	// without using an attempt) rather than completed.
	Snooze time.Duration `json:"-"`
}

// operatorRetry reports whether this run of a job follows an attempt that
// finished without an error, which River never runs again by itself: an
// operator retried a completed job (River UI, `mailwatch jobs retry`). A
// run that follows a failed attempt, or an attempt the rescuer gave up on
// after its worker died (River records "Stuck job rescued by JobRescuer"
// as that attempt's error), is River's own retry.
func operatorRetry(job *rivertype.JobRow) bool {
	if job.Attempt <= 1 {
		return false
	}
	for _, e := range job.Errors {
		if e.Attempt == job.Attempt-1 {
			return false
		}
	}
	return true
}

// startIn is one run asking to start an attempt on the fast path.
type startIn struct {
	deliveryID   uuid.UUID
	jobID        int64
	attemptID    uuid.UUID
	jobAttempt   int32
	attemptsLeft int32
	startedAt    time.Time
}

// startOut is the fast path's answer: nil when the run must take the
// slow path (the job does not own the delivery, the delivery is no longer
// pending or retrying, or its subscription is disabled).
type startOut struct {
	started *started
}

// startMany starts the attempts of many runs in one statement. If the
// statement fails, each run is tried alone, so that one run's error is not
// every run's.
func (w *DeliveryWorker) startMany(ctx context.Context, ins []startIn, outs []startOut, errs []error) {
	if len(ins) > 1 {
		if err := w.startBatch(ctx, ins, outs); err == nil {
			return
		}
		clear(outs)
	}
	for i := range ins {
		errs[i] = w.startBatch(ctx, ins[i:i+1], outs[i:i+1])
	}
}

func (w *DeliveryWorker) startBatch(ctx context.Context, ins []startIn, outs []startOut) error {
	p := dbsqlc.DeliveryStartOwnedManyParams{
		Ids: make([]uuid.UUID, len(ins)), JobIds: make([]int64, len(ins)), AttemptIds: make([]uuid.UUID, len(ins)),
		JobAttempts: make([]int32, len(ins)), JobAttemptsLeft: make([]int32, len(ins)), StartedAt: make([]time.Time, len(ins)),
	}
	// A run is known by its delivery and its job: two jobs of one delivery
	// (an operator re-running an old one) may start in one batch, and only
	// the owner's run is started.
	type run struct {
		delivery uuid.UUID
		job      int64
	}
	index := make(map[run]int, len(ins))
	for i, in := range ins {
		p.Ids[i], p.JobIds[i], p.AttemptIds[i] = in.deliveryID, in.jobID, in.attemptID
		p.JobAttempts[i], p.JobAttemptsLeft[i], p.StartedAt[i] = in.jobAttempt, in.attemptsLeft, in.startedAt
		index[run{in.deliveryID, in.jobID}] = i
	}
	rows, err := dbsqlc.New().DeliveryStartOwnedMany(ctx, w.deps.Pool, p)
	if err != nil {
		return err
	}
	for _, r := range rows {
		i, ok := index[run{r.ID, r.JobID}]
		if !ok {
			continue
		}
		outs[i].started = &started{
			delivery: dbsqlc.WebhookDelivery{
				ID: r.ID, AccountID: r.AccountID, SubscriptionID: r.SubscriptionID, EventID: r.EventID,
				EventType: r.EventType, Body: r.Body, Status: r.Status, Attempts: r.Attempts,
			},
			sub: dbsqlc.EventSubscription{
				ID: r.SubscriptionID, AccountID: r.AccountID, URL: r.URL, Enabled: true,
				SecretCiphertext: r.SecretCiphertext, SecretKeyID: r.SecretKeyID,
			},
			attemptID: ins[i].attemptID,
		}
	}
	return nil
}

// deliveredIn is one accepted push to record.
type deliveredIn struct {
	deliveryID, attemptID, subscriptionID uuid.UUID
	finishedAt                            time.Time
	attempt                               webhook.Attempt
}

// deliveredMany records many accepted pushes in one statement; if it
// fails, each is recorded alone. There is no result: a delivery deleted
// meanwhile (with its subscription) has nothing left to record.
func (w *DeliveryWorker) deliveredMany(ctx context.Context, ins []deliveredIn, _ []struct{}, errs []error) {
	if len(ins) > 1 {
		if err := w.deliveredBatch(ctx, ins); err == nil {
			return
		}
	}
	for i := range ins {
		errs[i] = w.deliveredBatch(ctx, ins[i:i+1])
	}
}

func (w *DeliveryWorker) deliveredBatch(ctx context.Context, ins []deliveredIn) error {
	n := len(ins)
	p := dbsqlc.DeliveryFinishDeliveredManyParams{
		Ids: make([]uuid.UUID, n), AttemptIds: make([]uuid.UUID, n), SubscriptionIds: make([]uuid.UUID, n),
		FinishedAt: make([]time.Time, n), StatusCodes: make([]int32, n), DurationsMs: make([]int32, n),
		ResponseBodies: make([]string, n), ResponseTruncated: make([]bool, n),
		StaleBefore: w.now().UTC().Add(-time.Minute),
	}
	for i, in := range ins {
		p.Ids[i], p.AttemptIds[i], p.SubscriptionIds[i], p.FinishedAt[i] = in.deliveryID, in.attemptID, in.subscriptionID, in.finishedAt
		p.StatusCodes[i], p.DurationsMs[i] = int32(in.attempt.StatusCode), int32(in.attempt.Duration.Milliseconds())
		p.ResponseBodies[i], p.ResponseTruncated[i] = in.attempt.ResponseBody, in.attempt.ResponseTruncated
	}
	if _, err := dbsqlc.New().DeliveryFinishDeliveredMany(ctx, w.deps.Pool, p); err != nil {
		return fmt.Errorf("error recording delivery: %w", err)
	}
	return nil
}

// jobStateOf returns the state of a job ("" when there is none).
func jobStateOf(ctx context.Context, tx pgx.Tx, jobID *int64) (string, error) {
	if jobID == nil {
		return "", nil
	}
	state, _, err := JobState(ctx, tx, *jobID)
	return state, err
}

// jobStateActive reports whether a job in this state may still run.
func jobStateActive(state string) bool {
	switch state {
	case "available", "running", "retryable", "scheduled", "pending":
		return true
	}
	return false
}

// JobState returns the state and scheduled_at of a River job; the state is
// "" when the job does not exist (deleted, or pruned after completion).
func JobState(ctx context.Context, db dbutil.Executor, jobID int64) (string, time.Time, error) {
	var (
		state string
		at    time.Time
	)
	err := db.QueryRow(ctx, "SELECT state::text, scheduled_at FROM river_job WHERE id = $1", jobID).Scan(&state, &at)
	if dbutil.IsNotFound(err) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("error reading job state: %w", err)
	}
	return state, at, nil
}

// DeliveryAwaitsReconcile reports whether a delivery row still says it is
// queued (pending or retrying) although its job, in state jobState ("" for
// a deleted job), will never run it again: an operator cancelled or deleted
// the job outside mailwatch, and the reconciler has yet to mark the row
// failed. Such a row's next_retry_at will not happen.
func DeliveryAwaitsReconcile(status, jobState string) bool {
	return (status == DeliveryPending || status == DeliveryRetrying) && !jobStateActive(jobState)
}

// JobStates returns the state of each of these River jobs that exists.
func JobStates(ctx context.Context, db dbutil.Executor, jobIDs []int64) (map[int64]string, error) {
	out := make(map[int64]string, len(jobIDs))
	if len(jobIDs) == 0 {
		return out, nil
	}
	rows, err := db.Query(ctx, "SELECT id, state::text FROM river_job WHERE id = ANY($1::bigint[])", jobIDs)
	if err != nil {
		return nil, fmt.Errorf("error reading job states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id    int64
			state string
		)
		if err := rows.Scan(&id, &state); err != nil {
			return nil, fmt.Errorf("error reading job states: %w", err)
		}
		out[id] = state
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading job states: %w", err)
	}
	return out, nil
}

// outcome is what one attempt does to the delivery and its job.
type outcome struct {
	status    string
	nextRetry *time.Time
	snooze    time.Duration
	uncount   bool
	cancelJob bool   // fail now, whatever the attempts left
	disable   string // disable the subscription with this reason
	label     string // metrics
}

func (w *DeliveryWorker) decide(ctx context.Context, job *river.Job[events.DeliveryArgs], st *started, a webhook.Attempt, now time.Time) outcome {
	switch {
	case a.Delivered:
		return outcome{status: DeliveryDelivered, label: "delivered"}
	case a.ErrorClass == webhook.ErrorClassCanceled:
		if errors.Is(context.Cause(ctx), river.ErrJobCancelledRemotely) {
			// An operator cancelled the running job: River cancels it
			// whatever we return, so the delivery ends failed.
			return outcome{status: DeliveryFailed, cancelJob: true, label: "cancelled"}
		}
		// Shutdown: the attempt says nothing about the endpoint. Snoozing
		// for 0 hands the job straight back to the queue without using an
		// attempt.
		return outcome{status: statusWhileQueued(st.delivery, true), uncount: true, nextRetry: &now, label: "interrupted"}
	case (a.StatusCode == http.StatusTooManyRequests || a.StatusCode == http.StatusServiceUnavailable) && a.RetryAfter > 0 &&
		jobSnoozes(job.Metadata)-fairWaits(job.Metadata) < MaxSnoozes:
		// Waits for a turn (fairness) are snoozes too, but say nothing of
		// the endpoint: they do not count against MaxSnoozes.
		d := min(a.RetryAfter, MaxSnooze)
		at := now.Add(d)
		return outcome{status: statusWhileQueued(st.delivery, true), uncount: true, snooze: d, nextRetry: &at, label: "snoozed"}
	case a.ErrorClass == webhook.ErrorClassBlockedDestination || a.ErrorClass == webhook.ErrorClassInvalidRequest:
		return outcome{status: DeliveryFailed, cancelJob: true, label: "failed"}
	case a.StatusCode == http.StatusGone:
		return outcome{status: DeliveryFailed, cancelJob: true, disable: "the endpoint answered 410 Gone", label: "failed"}
	}
	if job.Attempt >= job.MaxAttempts {
		return outcome{status: DeliveryFailed, label: "failed"}
	}
	at := now.Add(webhook.NextDelay(job.Attempt, nil))
	return outcome{status: DeliveryRetrying, nextRetry: &at, label: "retrying"}
}

// redactURL drops what may carry credentials (userinfo, query, fragment)
// from a subscription URL before it goes into an event payload: those
// events are pushed to the account's other endpoints.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.Fragment, u.RawFragment = nil, "", "", ""
	u.ForceQuery = false
	return u.String()
}

// jobSnoozes reads the snooze count River keeps in a job's metadata.
func jobSnoozes(metadata []byte) int {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(metadata, &m) // absent or malformed: no snoozes
	return m.Snoozes
}

// statusWhileQueued is the status of a delivery waiting for its next run.
func statusWhileQueued(d dbsqlc.WebhookDelivery, uncount bool) string {
	n := d.Attempts
	if uncount {
		n--
	}
	if n <= 0 {
		return DeliveryPending
	}
	return DeliveryRetrying
}

// finish records the attempt's outcome and tells River what to do next.
func (w *DeliveryWorker) finish(ctx context.Context, job *river.Job[events.DeliveryArgs], st *started, a webhook.Attempt) error {
	now := w.now().UTC()
	oc := w.decide(ctx, job, st, a, now)
	// The outcome is recorded even if the job's context ends meanwhile
	// (shutdown): losing a 2xx here would push the same event again.
	if oc.status == DeliveryDelivered {
		// The common case, coalesced with the other pushes accepted
		// meanwhile (on the coalescer's own context). The job is left to
		// River's own batched completion: should the process die before
		// that, the job runs again, finds its delivery delivered and
		// completes without a push.
		if _, err := w.deliveries.do(deliveredIn{
			deliveryID: st.delivery.ID, attemptID: st.attemptID, subscriptionID: st.sub.ID, finishedAt: now, attempt: a,
		}); err != nil {
			return err
		}
		w.metrics.observe(oc.label, a.Duration)
		return nil
	}
	// The values (River client, job) stay available on the detached
	// context.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	q := dbsqlc.New()
	d := st.delivery
	err := dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		d, err = q.DeliveryFinishAttempt(ctx, tx, dbsqlc.DeliveryFinishAttemptParams{
			ID: d.ID, AttemptID: st.attemptID, SubscriptionID: st.sub.ID, FinishedAt: now, StaleBefore: now.Add(-time.Minute),
			Status: oc.status, Uncount: oc.uncount, StatusCode: nonZero(int32(a.StatusCode)), ErrorClass: nonEmpty(a.ErrorClass),
			Error: nonEmpty(a.Error), DurationMs: int32(a.Duration.Milliseconds()), ResponseBody: nonEmpty(a.ResponseBody),
			ResponseTruncated: a.ResponseTruncated, NextRetryAt: oc.nextRetry,
		})
		if err != nil {
			return fmt.Errorf("error recording outcome: %w", err)
		}
		if oc.uncount {
			if oc.snooze > 0 {
				// An endpoint that only ever asks to wait is failing too: it
				// must still reach the 5-day disable.
				if err := q.SubscriptionMarkFailing(ctx, tx, dbsqlc.SubscriptionMarkFailingParams{ID: st.sub.ID, Now: now}); err != nil {
					return fmt.Errorf("error recording failure: %w", err)
				}
			}
			return nil
		}
		if oc.disable != "" {
			if err := w.disableSubscription(ctx, tx, st.sub, oc.disable, now, nil); err != nil {
				return err
			}
		} else if a.ErrorClass != "" {
			if err := q.SubscriptionMarkFailing(ctx, tx, dbsqlc.SubscriptionMarkFailingParams{ID: st.sub.ID, Now: now}); err != nil {
				return fmt.Errorf("error recording failure: %w", err)
			}
			cutoff := now.Add(-FailingDisableAfter)
			if err := w.disableSubscription(ctx, tx, st.sub, "every delivery failed for 5 days", now, &cutoff); err != nil {
				return err
			}
		}
		if oc.cancelJob {
			// Marks the running job for cancellation in this transaction,
			// so that if the process dies before River records the
			// cancellation, the rescuer cancels it instead of running it
			// again.
			client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
			if err != nil {
				return fmt.Errorf("error finding River client: %w", err)
			}
			if _, err := client.JobCancelTx(ctx, tx, job.ID); err != nil {
				return fmt.Errorf("error cancelling job: %w", err)
			}
		}
		if oc.status == DeliveryFailed {
			return emitDeliveryFailed(ctx, tx, &events.Emitter{}, d, st.sub)
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.metrics.observe(oc.label, a.Duration)
	if oc.nextRetry != nil && oc.status == DeliveryRetrying && !oc.uncount {
		w.retryAt.Store(retryKey{job.ID, job.Attempt}, *oc.nextRetry)
	}
	switch {
	case oc.uncount:
		return river.JobSnooze(oc.snooze)
	case oc.cancelJob:
		return river.JobCancel(attemptError(a))
	}
	return attemptError(a)
}

func attemptError(a webhook.Attempt) error {
	if a.StatusCode != 0 {
		return fmt.Errorf("webhook push failed (%s, status %d): %s", a.ErrorClass, a.StatusCode, a.Error)
	}
	return fmt.Errorf("webhook push failed (%s): %s", a.ErrorClass, a.Error)
}

// disableSubscription disables sub (when still enabled and, with a cutoff,
// failing since before it) and emits subscription_disabled.
func (w *DeliveryWorker) disableSubscription(ctx context.Context, tx pgx.Tx, sub dbsqlc.EventSubscription, reason string, now time.Time, failingBefore *time.Time) error {
	_, err := dbsqlc.New().SubscriptionDisable(ctx, tx, dbsqlc.SubscriptionDisableParams{
		ID: sub.ID, Reason: reason, Now: now, FailingBefore: failingBefore,
	})
	if dbutil.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("error disabling subscription: %w", err)
	}
	w.logger().InfoContext(ctx, "subscription disabled", slog.String("subscription_id", sub.ID.String()), slog.String("reason", reason))
	_, err = (&events.Emitter{}).Emit(ctx, tx, events.Event{
		AccountID: sub.AccountID, Type: events.TypeSubscriptionDisabled,
		Payload: map[string]any{"subscription_id": sub.ID, "url": redactURL(sub.URL), "reason": reason},
	})
	return err
}

// emitDeliveryFailed emits webhook_delivery_failed for a delivery that
// ended failed, carrying the original event's domain and tags so that
// filtered subscriptions see it. A failed delivery of a
// webhook_delivery_failed event emits nothing: no cascades.
func emitDeliveryFailed(ctx context.Context, tx pgx.Tx, em *events.Emitter, d dbsqlc.WebhookDelivery, sub dbsqlc.EventSubscription) error {
	if d.EventType == events.TypeWebhookDeliveryFailed {
		return nil
	}
	ev := events.Event{AccountID: d.AccountID, Type: events.TypeWebhookDeliveryFailed}
	if orig, err := dbsqlc.New().EventGetByID(ctx, tx, dbsqlc.EventGetByIDParams{ID: d.EventID, AccountID: d.AccountID}); err == nil {
		if orig.Domain != nil {
			ev.Domain = *orig.Domain
		}
		ev.Tags = orig.Tags
	} else if !dbutil.IsNotFound(err) {
		return fmt.Errorf("error reading delivered event: %w", err)
	}
	var code any
	if d.LastStatusCode != nil {
		code = *d.LastStatusCode
	}
	ev.Payload = map[string]any{
		"delivery_id": d.ID, "subscription_id": d.SubscriptionID, "event_id": d.EventID, "event_type": d.EventType,
		"url": redactURL(sub.URL), "attempts": d.Attempts, "last_status_code": code, "last_error": d.LastError,
	}
	if _, err := em.Emit(ctx, tx, ev); err != nil {
		return fmt.Errorf("error emitting webhook_delivery_failed: %w", err)
	}
	return nil
}

func nonZero(v int32) *int32 {
	if v == 0 {
		return nil
	}
	return &v
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

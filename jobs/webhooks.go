package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/subscriptions"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// finishTimeout bounds the transaction recording an outcome after the
// job's context ended (shutdown, remote cancel).
const finishTimeout = 10 * time.Second

// addWebhookWorkers registers the push worker, the reconciler and the
// retirement of rotated secrets.
func addWebhookWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, NewDeliveryWorker(deps))
	river.AddWorker(w, &DeliveryReconcileWorker{deps: deps})
	river.AddWorker(w, &RetireSecretWorker{deps: deps})
}

// webhookPeriodicJobs schedules the reconciler.
func webhookPeriodicJobs(deps Deps) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(deliveries.ReconcileInterval), func() (river.JobArgs, *river.InsertOpts) {
			return deliveries.ReconcileArgs{}, nil
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
	// starts and delivered coalesce the common case of many concurrent
	// runs (a run starting on a delivery it owns; a push accepted) into
	// one statement per batch.
	starts    *coalescer[deliveries.StartIn, *deliveries.Started]
	delivered *coalescer[deliveries.Delivered, bool]
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
	deps = deps.withDefaults()
	w := &DeliveryWorker{deps: deps, metrics: newWebhookMetrics(deps), gate: webhook.NewGate(deps.Settings.WebhookLimits)}
	w.starts = &coalescer[deliveries.StartIn, *deliveries.Started]{
		maxBatch: coalesceMaxBatch, maxFlushers: coalesceMaxFlushers, timeout: finishTimeout, run: w.startMany,
	}
	w.delivered = &coalescer[deliveries.Delivered, bool]{
		maxBatch: coalesceMaxBatch, maxFlushers: coalesceMaxFlushers, timeout: finishTimeout, run: w.deliveredMany,
	}
	return w
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
	secret, previous, err := subscriptions.OpenSecrets(w.deps.Keyring, st.Sub, w.deps.Now())
	if err != nil {
		// The key ring lost the key (MAILWATCH_SECRET_KEY changed without
		// MAILWATCH_SECRET_KEY_PREVIOUS): an operator can fix it, so retry.
		a = webhook.Attempt{ErrorClass: deliveries.ErrorClassSecret, Error: "the signing secret cannot be decrypted with the configured keys"}
	} else {
		var busy error
		if a, busy, err = w.push(ctx, st, secret, previous); err != nil {
			return err
		} else if busy != nil {
			return w.wait(ctx, job, st, busy)
		}
	}
	return w.finish(ctx, job, st, a)
}

// push sends the delivery under its subscription's own bounds
// (subscriptions.Admit, shared by the fleet), then its account's and its
// host's (webhook.Gate, in this process). A push over a bound is not sent:
// the bound is returned as busy, for wait.
func (w *DeliveryWorker) push(ctx context.Context, st *deliveries.Started, secret, previous string) (a webhook.Attempt, busy, err error) {
	client := w.deps.WebhookClient
	if client == nil {
		// Never fall back to http.DefaultClient: it has no SSRF guard and
		// follows redirects.
		return a, nil, errors.New("webhook worker has no WebhookClient configured")
	}
	if subscriptions.Bounded(st.Sub) {
		lease, over, err := subscriptions.Admit(ctx, w.deps.Pool, st.Sub, st.Delivery.ID, w.deps.Now())
		if err != nil {
			return a, nil, err
		}
		if over != nil {
			return a, over, nil
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
			defer cancel()
			if err := lease.Release(ctx, w.deps.Pool); err != nil {
				w.deps.Logger.WarnContext(ctx, "push slot not freed; it frees itself when its lease expires", "error", err)
			}
		}()
	}
	// Admitted only now, so that the bounds count requests in flight,
	// not the bookkeeping around them. A push over a bound waits a
	// moment for a slot, then is put back.
	release, gateBusy := w.gate.Acquire(ctx, st.Delivery.AccountID, st.Sub.URL, webhook.AdmitWait)
	if gateBusy != nil {
		return a, gateBusy, nil
	}
	defer release()
	return webhook.Send(ctx, client, webhook.Request{
		URL: st.Sub.URL, MsgID: st.Delivery.ID.String(), Body: st.Delivery.Body, Secret: secret, PreviousSecret: previous,
	}), nil, nil
}

// wait puts back a push that is over its account's or host's bound: its
// job is snoozed (River runs it again after webhook.FairWait, without using
// an attempt) and the worker is free for another push at once. An attempt
// already started (st) is retracted, so that waiting leaves no attempt.
func (w *DeliveryWorker) wait(ctx context.Context, job *river.Job[events.DeliveryArgs], st *deliveries.Started, busy error) error {
	waits := deliveries.FairWaits(job.Metadata)
	d := webhook.FairWait(waits, nil)
	var sb *subscriptions.Busy
	if errors.As(busy, &sb) && sb.Wait > 0 {
		d = sb.Wait // the rate's next share, exactly
	}
	if st != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
		if err := deliveries.RetractAttempt(ctx, w.deps.Pool, st, w.deps.Now().UTC().Add(d)); err != nil {
			return err
		}
	}
	reason := deliveries.SkipAccountBusy
	var be *webhook.BusyError
	switch {
	case sb != nil:
		reason = deliveries.SkipSubscriptionBusy
	case errors.As(busy, &be) && be.Scope == webhook.ScopeHost:
		reason = deliveries.SkipHostBusy
	}
	if err := river.MetadataSet(ctx, deliveries.MetadataFairWaits, waits+1); err != nil {
		return fmt.Errorf("error counting a wait: %w", err)
	}
	if err := river.RecordOutput(ctx, &deliveries.SkipOutput{Reason: reason, Detail: fmt.Sprintf(
		"%s; this push waits %s for its turn, without using an attempt", busy, d)}); err != nil {
		return fmt.Errorf("error recording job output: %w", err)
	}
	w.metrics.observe("waiting", 0)
	return river.JobSnooze(d)
}

// start records the attempt before the request is made: on the coalesced
// fast path when the job owns a pending or retrying delivery of an enabled
// subscription, else in a transaction of its own (deliveries.Start). A nil
// result means there is nothing to push; the run's River output (and its
// cancellation or snooze) says why, so that River UI shows it.
func (w *DeliveryWorker) start(ctx context.Context, job *river.Job[events.DeliveryArgs]) (*deliveries.Started, error) {
	p := deliveries.StartParams{
		DeliveryID: job.Args.DeliveryID, JobID: job.ID, Attempt: job.Attempt, MaxAttempts: job.MaxAttempts,
		OperatorRetry: deliveries.OperatorRetry(job.JobRow), Now: w.deps.Now().UTC(),
	}
	fast, err := w.starts.do(deliveries.StartIn{
		DeliveryID: p.DeliveryID, JobID: p.JobID, AttemptID: uuid.Must(uuid.NewV7()), JobAttempt: int32(job.Attempt),
		AttemptsLeft: int32(max(job.MaxAttempts-job.Attempt, 0)), StartedAt: p.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("error starting attempt: %w", err)
	}
	if fast != nil {
		return fast, nil
	}
	var (
		out  *deliveries.Started
		skip *deliveries.SkipOutput
	)
	err = dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		out, skip, err = deliveries.Start(ctx, tx, p)
		return err
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

// startMany starts the attempts of many runs in one statement. If the
// statement fails, each run is tried alone, so that one run's error is not
// every run's.
func (w *DeliveryWorker) startMany(ctx context.Context, ins []deliveries.StartIn, outs []*deliveries.Started, errs []error) {
	if len(ins) > 1 {
		if res, err := deliveries.StartOwned(ctx, w.deps.Pool, ins); err == nil {
			copy(outs, res)
			return
		}
	}
	for i := range ins {
		res, err := deliveries.StartOwned(ctx, w.deps.Pool, ins[i:i+1])
		if err != nil {
			errs[i] = err
			continue
		}
		outs[i] = res[0]
	}
}

// deliveredMany records many accepted pushes in one statement; if it
// fails, each is recorded alone. outs[i] says that the push's subscription
// had raised subscription_failing (finish raises subscription_recovered).
func (w *DeliveryWorker) deliveredMany(ctx context.Context, ins []deliveries.Delivered, outs []bool, errs []error) {
	now := w.deps.Now().UTC()
	if len(ins) > 1 {
		if recovering, err := deliveries.RecordDelivered(ctx, w.deps.Pool, ins, now); err == nil {
			for i := range ins {
				outs[i] = slices.Contains(recovering, ins[i].SubscriptionID)
			}
			return
		}
	}
	for i := range ins {
		recovering, err := deliveries.RecordDelivered(ctx, w.deps.Pool, ins[i:i+1], now)
		outs[i], errs[i] = len(recovering) > 0, err
	}
}

// finish records the attempt's outcome (deliveries.Decide) and tells River
// what to do next.
func (w *DeliveryWorker) finish(ctx context.Context, job *river.Job[events.DeliveryArgs], st *deliveries.Started, a webhook.Attempt) error {
	now := w.deps.Now().UTC()
	oc := deliveries.Decide(deliveries.Run{
		Attempt: job.Attempt, MaxAttempts: job.MaxAttempts, Metadata: job.Metadata,
		CancelledRemotely: errors.Is(context.Cause(ctx), river.ErrJobCancelledRemotely),
	}, st.Delivery, a, now)
	// The outcome is recorded even if the job's context ends meanwhile
	// (shutdown): losing a 2xx here would push the same event again.
	if oc.Status == deliveries.StatusDelivered {
		// The common case, coalesced with the other pushes accepted
		// meanwhile (on the coalescer's own context). The job is left to
		// River's own batched completion: should the process die before
		// that, the job runs again, finds its delivery delivered and
		// completes without a push.
		recovering, err := w.delivered.do(deliveries.Delivered{
			DeliveryID: st.Delivery.ID, AttemptID: st.AttemptID, SubscriptionID: st.Sub.ID, FinishedAt: now, Attempt: a,
		})
		if err != nil {
			return err
		}
		if recovering {
			// Rare (the end of a notified failing period): in a transaction
			// of its own, with the job's River client to fan the event out.
			// The push stands whatever happens here; left undone, the next
			// accepted push ends the period.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
			err := deliveries.NotifyRecovered(rctx, w.deps.Pool, &events.Emitter{}, st.Sub.ID, now)
			cancel()
			if err != nil {
				w.deps.Logger.WarnContext(ctx, "subscription recovery not recorded", "subscription_id", st.Sub.ID, "error", err)
			}
		}
		w.metrics.observe(oc.Label, a.Duration)
		return nil
	}
	// The values (River client, job) stay available on the detached
	// context.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	p := deliveries.FinishParams{Started: st, Attempt: a, Outcome: oc, JobID: job.ID, Now: now, Logger: w.deps.Logger,
		Recovered: deliveries.Recovered(job.Tags)}
	if oc.CancelJob {
		client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
		if err != nil {
			return fmt.Errorf("error finding River client: %w", err)
		}
		p.Cancel = client
	}
	if err := dbutil.WithTx(ctx, w.deps.Pool, func(ctx context.Context, tx pgx.Tx) error {
		return deliveries.Finish(ctx, tx, p)
	}); err != nil {
		return err
	}
	w.metrics.observe(oc.Label, a.Duration)
	if oc.NextRetry != nil && oc.Status == deliveries.StatusRetrying && !oc.Uncount {
		w.retryAt.Store(retryKey{job.ID, job.Attempt}, *oc.NextRetry)
	}
	switch {
	case oc.Uncount:
		return river.JobSnooze(oc.Snooze)
	case oc.CancelJob:
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

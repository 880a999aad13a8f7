package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/channels"
	"github.com/mailwatch/mailwatch/internal/deliveries"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// addChannelWorkers registers the notification channel sender.
func addChannelWorkers(w *river.Workers, deps Deps) {
	river.AddWorker(w, &ChannelSendWorker{deps: deps, gate: webhook.NewGate(deps.Settings.WebhookLimits)})
}

// ChannelSendWorker sends one event to one notification channel
// (events.ChannelSendArgs; rules in internal/channels). A 429, a 5xx or a
// network error is retried, at the destination's Retry-After (capped at an
// hour) when it gives one, else on the webhook schedule; any other answer
// cancels the job with the status in its error.
type ChannelSendWorker struct {
	river.WorkerDefaults[events.ChannelSendArgs]
	deps Deps
	// retryAt hands the destination's Retry-After to NextRetry, which
	// River calls right after Work returns an error.
	retryAt sync.Map // retryKey -> time.Time
	// gate bounds the sends in flight per account and per destination
	// host, as the webhook pushes' own gate does: one account's slow
	// channels (a Teams workflow that takes its time) hold its own sends
	// back, not the webhook workers of every account.
	gate *webhook.Gate
}

// NextRetry implements river.Worker: the instant Work stored from
// Retry-After, else the webhook schedule (webhook.NextDelay).
func (w *ChannelSendWorker) NextRetry(job *river.Job[events.ChannelSendArgs]) time.Time {
	if v, ok := w.retryAt.LoadAndDelete(retryKey{job.ID, job.Attempt}); ok {
		return v.(time.Time)
	}
	return time.Now().Add(webhook.NextDelay(job.Attempt, nil))
}

// service is the channels service over the worker's dependencies.
func (w *ChannelSendWorker) service() *channels.Service {
	s := &channels.Service{Keyring: w.deps.Keyring, Hosts: w.deps.ChannelHosts, Client: w.deps.WebhookClient}
	if w.gate != nil {
		s.Admit = w.gate.Admit
	}
	if w.deps.Mail != nil {
		s.BaseURL = w.deps.Mail.BaseURL
	}
	return s
}

// Work sends the event as the channel and the event are now; nothing goes
// out for an account that is gone, being deleted or suspended.
func (w *ChannelSendWorker) Work(ctx context.Context, job *river.Job[events.ChannelSendArgs]) error {
	if account, ok := events.DeliveryTagAccount(job.Tags); ok {
		if allowed, err := mailAllowed(ctx, w.deps, account); !allowed || err != nil {
			return err
		}
	}
	now := w.deps.Now()
	res, err := w.service().Deliver(ctx, w.deps.Pool, nil, job.Args.ChannelID, job.Args.EventID, now)
	switch {
	case err != nil:
		return err
	case res.Skipped != "":
		return river.RecordOutput(ctx, map[string]string{"skipped": res.Skipped})
	case res.Busy != nil:
		return w.wait(ctx, job, res.Busy)
	case res.Delivered:
		return river.RecordOutput(ctx, map[string]any{"status_code": res.StatusCode, "action": res.Action})
	case !res.Retryable:
		return river.JobCancel(fmt.Errorf("channel send refused (status %d): %s", res.StatusCode, res.Error))
	}
	if res.RetryAfter > 0 {
		w.retryAt.Store(retryKey{job.ID, job.Attempt}, now.Add(res.RetryAfter))
	}
	w.deps.Logger.DebugContext(ctx, "channel send failed", slog.String("channel_id", job.Args.ChannelID.String()),
		slog.Int("status_code", res.StatusCode))
	return fmt.Errorf("channel send failed (status %d): %s", res.StatusCode, res.Error)
}

// wait puts back a send over its account's or host's bound: the job is
// snoozed (no attempt used) for the growing fair wait of the webhook
// pushes, and its metadata counts the waits.
func (w *ChannelSendWorker) wait(ctx context.Context, job *river.Job[events.ChannelSendArgs], busy error) error {
	waits := deliveries.FairWaits(job.Metadata)
	d := webhook.FairWait(waits, nil)
	if err := river.MetadataSet(ctx, deliveries.MetadataFairWaits, waits+1); err != nil {
		return fmt.Errorf("error counting a wait: %w", err)
	}
	if err := river.RecordOutput(ctx, map[string]string{"waiting": fmt.Sprintf("%s; this send waits %s for its turn", busy, d)}); err != nil {
		return fmt.Errorf("error recording job output: %w", err)
	}
	return river.JobSnooze(d)
}

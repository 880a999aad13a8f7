package deliveries

import (
	"net/http"
	"time"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// Run is what Decide needs of the River job running an attempt.
type Run struct {
	// Attempt and MaxAttempts are the job's (River counts from 1).
	Attempt, MaxAttempts int
	// Metadata is the job's metadata (snooze and wait counts).
	Metadata []byte
	// CancelledRemotely: an operator cancelled the running job.
	CancelledRemotely bool
}

// Outcome is what one attempt does to the delivery and its job.
type Outcome struct {
	// Status is the delivery's status after the attempt.
	Status string
	// NextRetry is the delivery's next_retry_at (nil: none planned).
	NextRetry *time.Time
	// Snooze, with Uncount, is how long River holds the job back.
	Snooze time.Duration
	// Uncount: the attempt says nothing about the endpoint's health and
	// does not use an attempt (the job is snoozed).
	Uncount bool
	// CancelJob: fail now, whatever the attempts left.
	CancelJob bool
	// Disable disables the subscription with this reason.
	Disable string
	// Label names the outcome in metrics.
	Label string
}

// Decide maps an attempt a of delivery d, made by run, to its outcome.
// It reads nothing and writes nothing: Finish records the outcome.
func Decide(run Run, d dbsqlc.WebhookDelivery, a webhook.Attempt, now time.Time) Outcome {
	switch {
	case a.Delivered:
		return Outcome{Status: StatusDelivered, Label: "delivered"}
	case a.ErrorClass == webhook.ErrorClassCanceled:
		if run.CancelledRemotely {
			// An operator cancelled the running job: River cancels it
			// whatever the worker returns, so the delivery ends failed.
			return Outcome{Status: StatusFailed, CancelJob: true, Label: "cancelled"}
		}
		// Shutdown: the attempt says nothing about the endpoint. Snoozing
		// for 0 hands the job straight back to the queue without using an
		// attempt.
		return Outcome{Status: StatusWhileQueued(d, true), Uncount: true, NextRetry: &now, Label: "interrupted"}
	case (a.StatusCode == http.StatusTooManyRequests || a.StatusCode == http.StatusServiceUnavailable) && a.RetryAfter > 0 &&
		jobSnoozes(run.Metadata)-FairWaits(run.Metadata) < MaxSnoozes:
		// Waits for a turn (fairness) are snoozes too, but say nothing of
		// the endpoint: they do not count against MaxSnoozes.
		wait := min(a.RetryAfter, MaxSnooze)
		at := now.Add(wait)
		return Outcome{Status: StatusWhileQueued(d, true), Uncount: true, Snooze: wait, NextRetry: &at, Label: "snoozed"}
	case a.ErrorClass == webhook.ErrorClassBlockedDestination || a.ErrorClass == webhook.ErrorClassInvalidRequest:
		return Outcome{Status: StatusFailed, CancelJob: true, Label: "failed"}
	case a.StatusCode == http.StatusGone:
		return Outcome{Status: StatusFailed, CancelJob: true, Disable: "the endpoint answered 410 Gone", Label: "failed"}
	}
	if run.Attempt >= run.MaxAttempts {
		return Outcome{Status: StatusFailed, Label: "failed"}
	}
	at := now.Add(webhook.NextDelay(run.Attempt, nil))
	return Outcome{Status: StatusRetrying, NextRetry: &at, Label: "retrying"}
}

// StatusWhileQueued is the status of a delivery waiting for its next run;
// uncount leaves out the attempt just started.
func StatusWhileQueued(d dbsqlc.WebhookDelivery, uncount bool) string {
	n := d.Attempts
	if uncount {
		n--
	}
	if n <= 0 {
		return StatusPending
	}
	return StatusRetrying
}

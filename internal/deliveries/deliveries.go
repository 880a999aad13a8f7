// Package deliveries holds the rules of webhook delivery: the statuses a
// delivery row goes through, what one push attempt does to the row, its
// subscription and its River job (Decide, Start, Finish), the repair of
// rows whose job changed outside mailwatch (Reconcile, ReconcileJobs), and
// the manual retry of the REST API (Retry).
//
// The River worker (jobs.DeliveryWorker) and the REST adapter
// (api/deliveries.go) only decode, call these functions and encode. Every
// function takes the caller's transaction or executor; the account, where
// it matters, is a parameter. docs/webhook-delivery.md describes the state
// machine.
package deliveries

import "time"

// Delivery statuses (webhook_deliveries.status).
const (
	// StatusPending: queued, never attempted.
	StatusPending = "pending"
	// StatusRetrying: attempted, failed, another attempt is planned.
	StatusRetrying = "retrying"
	// StatusDelivered: an attempt was accepted (2xx).
	StatusDelivered = "delivered"
	// StatusFailed: no attempts left, a permanent error, or its job was
	// stopped outside the API.
	StatusFailed = "failed"
)

// Timing rules (docs/features/webhooks.md, docs/webhook-delivery.md).
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
	// ReconcileGrace leaves rows alone that changed this recently, so the
	// reconciler never races a transition in progress.
	ReconcileGrace = 30 * time.Second
	// SuspendedSnooze is how long a push of a suspended account waits
	// before its job looks again. Unsuspending wakes the account's pushes
	// at once (accounts.WakeDeliveries); this bounds the wait of a run that was
	// deciding to snooze just as the account was unsuspended.
	SuspendedSnooze = 2 * time.Minute
)

// Error classes recorded without a push (webhook.Attempt has the others).
const (
	ErrorClassSecret               = "secret_unavailable"
	ErrorClassSubscriptionDisabled = "subscription_disabled"
	ErrorClassJobCancelled         = "job_cancelled"
	ErrorClassJobGone              = "job_gone"
)

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
	// SkipSubscriptionBusy: the push waits for its subscription's own
	// bound (max_per_second, max_in_flight).
	SkipSubscriptionBusy = "subscription_busy"
)

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

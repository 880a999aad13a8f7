package api

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/deliveries"
)

// RecoverSubscriptionRequest is the body of POST
// .../event-subscriptions/{id}/recover.
type RecoverSubscriptionRequest struct {
	ID    uuid.UUID  `path:"id" format:"uuid"`
	Since time.Time  `json:"since" validate:"required" example:"2026-01-01T08:00:00Z" description:"Start of the range (RFC 3339, inclusive): deliveries created at or after it. At most 14 days ago."`
	Until *time.Time `json:"until,omitempty" example:"2026-01-02T08:00:00Z" description:"End of the range (RFC 3339, exclusive); omitted, or later than now, means now. Must be later than since."`
}

// SubscriptionRecovery is a queued recovery of a subscription's failed
// deliveries.
type SubscriptionRecovery struct {
	JobID          int64     `json:"job_id" validate:"required" description:"The River job (kind webhook_recover) that queues the deliveries again; its output says how many (River UI, or mailwatch jobs list --kind webhook_recover)."`
	SubscriptionID uuid.UUID `json:"subscription_id" validate:"required"`
	Since          time.Time `json:"since" validate:"required" description:"The range applied, at millisecond precision."`
	Until          time.Time `json:"until" validate:"required"`
	AlreadyQueued  bool      `json:"already_queued" validate:"required" description:"true when the same range was already queued and not yet done: job_id is that job."`
}

// subscriptionRecoverRoutes registers the recovery of a time range
// (called from subscriptionRoutes).
func (s *Server) subscriptionRecoverRoutes(base string) {
	s.ops.RecoverSubscription = Handle(s.router, Endpoint[RecoverSubscriptionRequest, SubscriptionRecovery]{
		Method: "POST", Path: base + "/{id}/recover", Status: 202, OperationID: "recoverEventSubscription", Tag: "event subscriptions",
		Errors:  []int{404, 409},
		Summary: "Push again the failed deliveries of a time range",
		Description: "Queues again every delivery of the subscription created in [since, until) whose status is failed " +
			"(pending, retrying and delivered ones are left alone), each for one extra attempt as a manual retry of a " +
			"failed delivery gives. A River job does it in the background, 500 per transaction and at most 10,000 per " +
			"request (its output says how many, and whether the range held more). Requesting a range again queues " +
			"nothing twice. since at most 14 days ago and before until, else 422; a disabled subscription is 409 " +
			"(enable it first). Emits the audit event subscription_recovery_requested.",
		Call: s.recoverSubscription,
	})
}

// recoverSubscription serves POST /api/accounts/me/event-subscriptions/{id}/recover: push again the failed deliveries of a time range (deliveries.RequestRecovery).
func (s *Server) recoverSubscription(ctx context.Context, req *RecoverSubscriptionRequest) (*SubscriptionRecovery, error) {
	caller := mustCaller(ctx)
	r, err := deliveries.RequestRecovery(ctx, s.db, s.deps.Emitter, s.deps.River, caller.AccountID, req.ID,
		req.Since, req.Until, caller.KeyIdentifier, s.now())
	var rangeErr *deliveries.RangeError
	switch {
	case errors.As(err, &rangeErr):
		return nil, InvalidField(rangeErr.Field, rangeErr.Message)
	case errors.Is(err, deliveries.ErrSubscriptionNotFound):
		return nil, NotFound("event subscription")
	case errors.Is(err, deliveries.ErrRecoverDisabled):
		return nil, Conflict("%s", deliveries.ErrRecoverDisabled.Error())
	case err != nil:
		return nil, err
	}
	return &SubscriptionRecovery{JobID: r.JobID, SubscriptionID: req.ID, Since: r.Since, Until: r.Until, AlreadyQueued: r.AlreadyQueued}, nil
}

package providers

import (
	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// PayloadArgs normalises stored provider webhook payloads: the
// ingress stores a batch of concurrent requests in one transaction and
// queues one job for the batch (PayloadIDs); PayloadID names a single one
// (jobs queued before batching, and tests).
type PayloadArgs struct {
	PayloadID  uuid.UUID   `json:"payload_id,omitzero"`
	PayloadIDs []uuid.UUID `json:"payload_ids,omitempty"`
}

// IDs lists every payload the job normalises.
func (a PayloadArgs) IDs() []uuid.UUID {
	if a.PayloadID == uuid.Nil {
		return a.PayloadIDs
	}
	return append([]uuid.UUID{a.PayloadID}, a.PayloadIDs...)
}

// Kind implements river.JobArgs.
func (PayloadArgs) Kind() string { return "provider_payload" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (PayloadArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 10} }

// SNSConfirmArgs confirms an SNS subscription (the SubscribeURL of a
// stored, verified SubscriptionConfirmation).
type SNSConfirmArgs struct {
	PayloadID uuid.UUID `json:"payload_id"`
}

// Kind implements river.JobArgs.
func (SNSConfirmArgs) Kind() string { return "sns_subscription_confirm" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (SNSConfirmArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 8} }

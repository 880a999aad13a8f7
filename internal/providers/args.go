package providers

import (
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// PayloadArgs normalises stored provider webhook payloads: the
// ingress stores a batch of concurrent requests in one transaction and
// queues one job per account of the batch (PayloadIDs, AccountID);
// PayloadID names a single one (jobs queued before batching, and tests).
type PayloadArgs struct {
	PayloadID  uuid.UUID   `json:"payload_id,omitzero"`
	PayloadIDs []uuid.UUID `json:"payload_ids,omitempty"`
	// AccountID is the account every payload of the job belongs to; the
	// worker bounds the jobs of one account running at once by it (Gate).
	// Jobs queued before batches were split by account have none: they
	// are worked as before, outside any account's bound.
	AccountID uuid.UUID `json:"account_id,omitzero"`
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

// SpikeCheckInterval is how often the spike scheduler
// (jobs.MessageSpikeScheduleWorker) enqueues a check of every domain that
// got message events since its previous runs. Checking
// from a schedule rather than from each normalisation job keeps the hot
// path free of a per-domain unique insert that concurrent jobs would queue
// on.
const SpikeCheckInterval = 30 * time.Second

// SpikeCheckArgs evaluates a domain's bounce and complaint rates.
type SpikeCheckArgs struct {
	DomainID uuid.UUID `json:"domain_id"`
}

// Kind implements river.JobArgs.
func (SpikeCheckArgs) Kind() string { return "message_spike_check" }

// InsertOpts implements river.JobArgsWithInsertOpts: at most one check
// per domain per SpikeCheckInterval.
func (SpikeCheckArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 5, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: SpikeCheckInterval}}
}

package domains

import (
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/queues"
)

// CheckArgs checks one domain's DNS now and applies the result: change
// detection, the stored snapshot and the health score (Checker.Run).
type CheckArgs struct {
	DomainID uuid.UUID `json:"domain_id"`
}

// Kind implements river.JobArgs.
func (CheckArgs) Kind() string { return "domain_check" }

// InsertOpts implements river.JobArgsWithInsertOpts. A failed check is
// retried a couple of times; the next period checks again anyway.
func (CheckArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.DNS, MaxAttempts: checkMaxAttempts}
}

const checkMaxAttempts = 3

// HealthArgs recomputes one domain's health score from its stored DNS
// results (Score).
type HealthArgs struct {
	DomainID uuid.UUID `json:"domain_id"`
}

// Kind implements river.JobArgs.
func (HealthArgs) Kind() string { return "domain_health" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (HealthArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.DNS, MaxAttempts: 5}
}

// ScheduleArgs enqueues one CheckArgs per domain for the next period, each
// at a stable offset within it (ScheduleChecks).
type ScheduleArgs struct{}

// Kind implements river.JobArgs.
func (ScheduleArgs) Kind() string { return "domain_check_schedule" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (ScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: 30 * time.Second}}
}

// HealthPruneArgs deletes health history older than HEALTH_HISTORY_DAYS.
type HealthPruneArgs struct{}

// Kind implements river.JobArgs.
func (HealthPruneArgs) Kind() string { return "domain_health_prune" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (HealthPruneArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// RecheckAllArgs queues a DNS check, now, of every domain of every account
// (the maintenance task recheck-domains). The periodic schedule
// (ScheduleArgs) is untouched.
type RecheckAllArgs struct{}

// Kind implements river.JobArgs.
func (RecheckAllArgs) Kind() string { return "domain_recheck_all" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RecheckAllArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance}
}

// FixApplyArgs writes one DNS recommendation through its domain's DNS
// connection.
type FixApplyArgs struct {
	RecommendationID uuid.UUID `json:"recommendation_id"`
}

// Kind implements river.JobArgs.
func (FixApplyArgs) Kind() string { return "dns_fix_apply" }

// InsertOpts implements river.JobArgsWithInsertOpts: a network failure is
// retried a few times; a conflict or a refusal is final at once.
func (FixApplyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.DNS, MaxAttempts: 4}
}

// MXVerifyArgs verifies one MX setup.
type MXVerifyArgs struct {
	SetupID uuid.UUID `json:"setup_id"`
}

// Kind implements river.JobArgs.
func (MXVerifyArgs) Kind() string { return "mx_verify" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (MXVerifyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.DNS, MaxAttempts: 3, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: MXReverifyInterval / 2}}
}

// MXScheduleArgs queues an MXVerifyArgs per setup still to watch.
type MXScheduleArgs struct{}

// Kind implements river.JobArgs.
func (MXScheduleArgs) Kind() string { return "mx_verify_schedule" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (MXScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queues.Maintenance, UniqueOpts: river.UniqueOpts{ByPeriod: 30 * time.Second}}
}

package deliveries

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/dbutil"
)

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

// jobStateOf returns the state of a job ("" when there is none).
func jobStateOf(ctx context.Context, db dbutil.Executor, jobID *int64) (string, error) {
	if jobID == nil {
		return "", nil
	}
	state, _, err := JobState(ctx, db, *jobID)
	return state, err
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

// JobStateActive reports whether a job in this state may still run.
func JobStateActive(state string) bool {
	switch state {
	case "available", "running", "retryable", "scheduled", "pending":
		return true
	}
	return false
}

// Queued reports whether a delivery in this status waits for a run.
func Queued(status string) bool {
	return status == StatusPending || status == StatusRetrying
}

// AwaitsReconcile reports whether a delivery row still says it is queued
// (pending or retrying) although its job, in state jobState ("" for a
// deleted job), will never run it again: an operator cancelled or deleted
// the job outside mailwatch, and the reconciler has yet to mark the row
// failed. Such a row's next_retry_at will not happen.
func AwaitsReconcile(status, jobState string) bool {
	return Queued(status) && !JobStateActive(jobState)
}

// MetadataFairWaits is the job metadata key counting the times a job
// waited for its turn (its account's or host's pushes at their bound).
// River's own "snoozes" counts those too.
const MetadataFairWaits = "fair_waits"

// FairWaits reads how often a job waited for its turn.
func FairWaits(metadata []byte) int {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(metadata, &m) // absent or malformed: none
	var n int
	_ = json.Unmarshal(m[MetadataFairWaits], &n)
	return n
}

// jobSnoozes reads the snooze count River keeps in a job's metadata.
func jobSnoozes(metadata []byte) int {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(metadata, &m) // absent or malformed: no snoozes
	return m.Snoozes
}

// OperatorRetry reports whether this run of a job follows an attempt that
// finished without an error, which River never runs again by itself: an
// operator retried a completed job (River UI, `mailwatch jobs retry`). A
// run that follows a failed attempt, or an attempt the rescuer gave up on
// after its worker died (River records "Stuck job rescued by JobRescuer"
// as that attempt's error), is River's own retry.
func OperatorRetry(job *rivertype.JobRow) bool {
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

package deliveries

import (
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// TestDecide drives the state machine over attempts and job states.
func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	first := dbsqlc.WebhookDelivery{Attempts: 1}  // the attempt just started is the first
	second := dbsqlc.WebhookDelivery{Attempts: 2} // one attempt was made before
	run := Run{Attempt: 1, MaxAttempts: 10, Metadata: []byte(`{}`)}
	last := Run{Attempt: 10, MaxAttempts: 10}
	for _, tc := range []struct {
		name     string
		run      Run
		d        dbsqlc.WebhookDelivery
		a        webhook.Attempt
		want     Outcome
		nextIn   time.Duration // NextRetry - now; -1: none
		minDelay time.Duration // with nextIn 0: NextRetry at least this far
	}{
		{"Accepted", run, first, webhook.Attempt{Delivered: true, StatusCode: 200},
			Outcome{Status: StatusDelivered, Label: "delivered"}, -1, 0},
		{"AcceptedOnTheLastAttempt", last, second, webhook.Attempt{Delivered: true, StatusCode: 204},
			Outcome{Status: StatusDelivered, Label: "delivered"}, -1, 0},
		{"ServerErrorRetries", run, first, webhook.Attempt{StatusCode: 500, ErrorClass: webhook.ErrorClassHTTPStatus},
			Outcome{Status: StatusRetrying, Label: "retrying"}, 0, webhook.BaseDelay(1) / 2},
		{"ServerErrorOnTheLastAttemptFails", last, second, webhook.Attempt{StatusCode: 500, ErrorClass: webhook.ErrorClassHTTPStatus},
			Outcome{Status: StatusFailed, Label: "failed"}, -1, 0},
		{"GoneFailsCancelsAndDisables", run, first, webhook.Attempt{StatusCode: 410, ErrorClass: webhook.ErrorClassHTTPStatus},
			Outcome{Status: StatusFailed, CancelJob: true, Disable: "the endpoint answered 410 Gone", Label: "failed"}, -1, 0},
		{"BlockedDestinationFailsAtOnce", run, first, webhook.Attempt{ErrorClass: webhook.ErrorClassBlockedDestination},
			Outcome{Status: StatusFailed, CancelJob: true, Label: "failed"}, -1, 0},
		{"InvalidRequestFailsAtOnce", run, first, webhook.Attempt{ErrorClass: webhook.ErrorClassInvalidRequest},
			Outcome{Status: StatusFailed, CancelJob: true, Label: "failed"}, -1, 0},
		{"RemoteCancelFails", Run{Attempt: 1, MaxAttempts: 10, CancelledRemotely: true}, first, webhook.Attempt{ErrorClass: webhook.ErrorClassCanceled},
			Outcome{Status: StatusFailed, CancelJob: true, Label: "cancelled"}, -1, 0},
		{"ShutdownOfAFirstAttemptStaysPending", run, first, webhook.Attempt{ErrorClass: webhook.ErrorClassCanceled},
			Outcome{Status: StatusPending, Uncount: true, Label: "interrupted"}, 0, 0},
		{"ShutdownOfALaterAttemptStaysRetrying", run, second, webhook.Attempt{ErrorClass: webhook.ErrorClassCanceled},
			Outcome{Status: StatusRetrying, Uncount: true, Label: "interrupted"}, 0, 0},
		{"RetryAfterSnoozes", run, first, webhook.Attempt{StatusCode: 429, RetryAfter: 30 * time.Second, ErrorClass: webhook.ErrorClassHTTPStatus},
			Outcome{Status: StatusPending, Uncount: true, Snooze: 30 * time.Second, Label: "snoozed"}, 30 * time.Second, 0},
		{"RetryAfterIsCapped", run, second, webhook.Attempt{StatusCode: 503, RetryAfter: 5 * time.Hour, ErrorClass: webhook.ErrorClassHTTPStatus},
			Outcome{Status: StatusRetrying, Uncount: true, Snooze: MaxSnooze, Label: "snoozed"}, MaxSnooze, 0},
		{"RetryAfterOnTheLastAttemptStillSnoozes", last, second, webhook.Attempt{StatusCode: 503, RetryAfter: time.Second, ErrorClass: webhook.ErrorClassHTTPStatus},
			Outcome{Status: StatusRetrying, Uncount: true, Snooze: time.Second, Label: "snoozed"}, time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Decide(tc.run, tc.d, tc.a, now)
			next := got.NextRetry
			got.NextRetry = nil
			require.Equal(t, tc.want, got)
			switch {
			case tc.nextIn < 0:
				require.Nil(t, next)
			case tc.minDelay > 0:
				require.NotNil(t, next)
				require.GreaterOrEqual(t, next.Sub(now), tc.minDelay)
			default:
				require.NotNil(t, next)
				require.Equal(t, tc.nextIn, next.Sub(now))
			}
		})
	}
}

// An endpoint that always answers 503 with Retry-After is snoozed only so
// often; then its answers count as failed attempts and the delivery moves
// on to failed like any other.
func TestSnoozesAreBounded(t *testing.T) {
	t.Parallel()
	now := time.Now()
	d := dbsqlc.WebhookDelivery{Attempts: 1}
	busy := webhook.Attempt{StatusCode: 503, RetryAfter: time.Second, ErrorClass: "http_status"}
	run := func(metadata string) Run { return Run{Attempt: 1, MaxAttempts: 10, Metadata: []byte(metadata)} }

	oc := Decide(run(`{}`), d, busy, now)
	require.Equal(t, "snoozed", oc.Label)
	require.True(t, oc.Uncount)

	oc = Decide(run(`{"snoozes": 49}`), d, busy, now)
	require.Equal(t, "snoozed", oc.Label)

	oc = Decide(run(`{"snoozes": 50}`), d, busy, now)
	require.Equal(t, "retrying", oc.Label, "past the bound the answer is a failed attempt")
	require.False(t, oc.Uncount)

	// Waits for a turn (fairness) are River snoozes too, but do not count.
	oc = Decide(run(`{"snoozes": 70, "fair_waits": 30}`), d, busy, now)
	require.Equal(t, "snoozed", oc.Label)
	oc = Decide(run(`{"snoozes": 80, "fair_waits": 30}`), d, busy, now)
	require.Equal(t, "retrying", oc.Label)

	last := Run{Attempt: 10, MaxAttempts: 10, Metadata: []byte(`{"snoozes": 80}`)}
	require.Equal(t, StatusFailed, Decide(last, d, busy, now).Status)
}

func TestAwaitsReconcile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status, jobState string
		want             bool
	}{
		{StatusPending, "available", false},
		{StatusRetrying, "retryable", false},
		{StatusRetrying, "scheduled", false},
		{StatusRetrying, "running", false},
		{StatusPending, "", true}, // job deleted
		{StatusRetrying, "cancelled", true},
		{StatusRetrying, "discarded", true},
		{StatusPending, "completed", true},
		{StatusFailed, "", false},
		{StatusDelivered, "completed", false},
	} {
		require.Equal(t, tc.want, AwaitsReconcile(tc.status, tc.jobState), "%s with job %q", tc.status, tc.jobState)
	}
}

func TestFairWaits(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, FairWaits(nil))
	require.Equal(t, 0, FairWaits([]byte(`not json`)))
	require.Equal(t, 3, FairWaits([]byte(`{"fair_waits": 3, "snoozes": 7}`)))
}

// TestOperatorRetry pins the signal that tells an operator's retry of a
// finished job (re-send) from River's own runs (never re-send a delivered
// delivery): whether River recorded an error for the previous attempt.
func TestOperatorRetry(t *testing.T) {
	t.Parallel()
	rescued := rivertype.AttemptError{Attempt: 1, Error: "Stuck job rescued by JobRescuer"}
	failed := rivertype.AttemptError{Attempt: 2, Error: "webhook push failed"}
	for _, tc := range []struct {
		name    string
		attempt int
		errs    []rivertype.AttemptError
		want    bool
	}{
		{"FirstRun", 1, nil, false},
		{"RetryOfACompletedFirstAttempt", 2, nil, true},
		{"RescueAfterACrash", 2, []rivertype.AttemptError{rescued}, false},
		{"RiversRetryAfterAFailure", 3, []rivertype.AttemptError{rescued, failed}, false},
		{"RetryOfACompletedJobThatFailedEarlier", 3, []rivertype.AttemptError{rescued}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, OperatorRetry(&rivertype.JobRow{Attempt: tc.attempt, Errors: tc.errs}))
		})
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://hooks.example.com/p/x", redactURL("https://user:pw@hooks.example.com/p/x?token=s3cret#frag"))
	require.Equal(t, "http://h:8080/", redactURL("http://h:8080/?"))
	require.Equal(t, "", redactURL("http://[::1"))
}

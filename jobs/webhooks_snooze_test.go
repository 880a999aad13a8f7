package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// An endpoint that always answers 503 with Retry-After is snoozed only so
// often; then its answers count as failed attempts and the delivery moves
// on to failed like any other.
func TestSnoozesAreBounded(t *testing.T) {
	t.Parallel()
	w := &DeliveryWorker{}
	now := time.Now()
	st := &started{delivery: dbsqlc.WebhookDelivery{Attempts: 1}}
	busy := webhook.Attempt{StatusCode: 503, RetryAfter: time.Second, ErrorClass: "http_status"}
	job := func(metadata string) *river.Job[events.DeliveryArgs] {
		return &river.Job[events.DeliveryArgs]{JobRow: &rivertype.JobRow{Attempt: 1, MaxAttempts: 10, Metadata: []byte(metadata)}}
	}

	oc := w.decide(context.Background(), job(`{}`), st, busy, now)
	require.Equal(t, "snoozed", oc.label)
	require.True(t, oc.uncount)

	oc = w.decide(context.Background(), job(`{"snoozes": 49}`), st, busy, now)
	require.Equal(t, "snoozed", oc.label)

	oc = w.decide(context.Background(), job(`{"snoozes": 50}`), st, busy, now)
	require.Equal(t, "retrying", oc.label, "past the bound the answer is a failed attempt")
	require.False(t, oc.uncount)

	// Waits for a turn (fairness) are River snoozes too, but do not count.
	oc = w.decide(context.Background(), job(`{"snoozes": 70, "fair_waits": 30}`), st, busy, now)
	require.Equal(t, "snoozed", oc.label)
	oc = w.decide(context.Background(), job(`{"snoozes": 80, "fair_waits": 30}`), st, busy, now)
	require.Equal(t, "retrying", oc.label)

	last := &river.Job[events.DeliveryArgs]{JobRow: &rivertype.JobRow{Attempt: 10, MaxAttempts: 10, Metadata: []byte(`{"snoozes": 80}`)}}
	require.Equal(t, DeliveryFailed, w.decide(context.Background(), last, st, busy, now).status)
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://hooks.example.com/p/x", redactURL("https://user:pw@hooks.example.com/p/x?token=s3cret#frag"))
	require.Equal(t, "http://h:8080/", redactURL("http://h:8080/?"))
	require.Equal(t, "", redactURL("http://[::1"))
}

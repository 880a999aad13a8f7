package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/esp/ses"
	"github.com/mailwatch/mailwatch/internal/esp/ses/snstest"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/queues"
)

// TestProviderJobsOnRiver works the provider jobs with a real River client:
// a stored Mailgun payload is normalised (event + suppression), the spike
// scheduler enqueues a check of its domain, and a stored SNS
// SubscriptionConfirmation is confirmed against the loopback SNS.
func TestProviderJobsOnRiver(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	sns := snstest.New(t)
	deps := Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), SNSClient: ses.AWSOnlyClient(sns.Client())}
	client, err := NewClient(deps, Options{Concurrency: 4, Queues: []string{queues.Default, queues.Maintenance}})
	require.NoError(t, err)
	done, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	t.Cleanup(cancel)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	})
	waitKind := func(kind string) *rivertype.JobRow {
		for ev := range done {
			if ev.Job.Kind == kind {
				require.Equal(t, rivertype.JobStateCompleted, ev.Job.State, "%s errors: %v", kind, ev.Job.Errors)
				return ev.Job
			}
		}
		return nil
	}

	account, domain, provider := uuid.New(), uuid.New(), uuid.New()
	exec := func(sql string, args ...any) {
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	exec(`INSERT INTO accounts (id, email, password_hash) VALUES ($1, 'jobs-providers@example.com', 'x')`, account)
	exec(`INSERT INTO domains (id, account_id, name) VALUES ($1, $2, 'symfony.com')`, domain, account)
	exec(`INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id) VALUES ($1, $2, 'mailgun', 'mg', '\x00', 'k')`, provider, account)
	exec(`INSERT INTO sending_provider_links (provider_id, domain_id) VALUES ($1, $2)`, provider, domain)
	payload := uuid.New()
	exec(`INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body) VALUES ($1, $2, $3, 'token:t', '\x00', $4)`,
		payload, provider, account, corpus.Read(t, "esp/mailgun-permanent_failure.json"))

	_, err = client.Insert(ctx, providers.PayloadArgs{PayloadID: payload}, nil)
	require.NoError(t, err)
	waitKind("provider_payload")
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM message_events WHERE domain_id = $1 AND event_type = 'bounced' AND bounce_class = 'hard'`, domain).Scan(&n))
	require.Equal(t, 1, n, "the sender app.symfony.com belongs to the linked symfony.com")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM suppressions WHERE account_id = $1 AND reason = 'hard_bounce'`, account).Scan(&n))
	require.Equal(t, 1, n)

	_, err = client.Insert(ctx, MessageSpikeScheduleArgs{}, nil)
	require.NoError(t, err)
	waitKind("message_spike_schedule")
	job := waitKind("message_spike_check")
	require.Contains(t, string(job.EncodedArgs), domain.String())

	confirm := uuid.New()
	sesProvider := uuid.New()
	exec(`INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id) VALUES ($1, $2, 'ses', 'ses', '\x00', 'k')`, sesProvider, account)
	exec(`INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body) VALUES ($1, $2, $3, 'sns:c', '\x00', $4)`,
		confirm, sesProvider, account, sns.SubscriptionConfirmation("arn:aws:sns:us-east-1:123456789012:t", "tok-9"))
	_, err = client.Insert(ctx, providers.SNSConfirmArgs{PayloadID: confirm}, nil)
	require.NoError(t, err)
	waitKind("sns_subscription_confirm")
	require.Equal(t, []string{"tok-9"}, sns.Confirmed())
	requireProcessed(t, pool, confirm)
}

func requireProcessed(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) {
	t.Helper()
	var processed bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT processed_at IS NOT NULL FROM provider_payloads WHERE id = $1`, id).Scan(&processed))
	require.True(t, processed)
}

// TestProviderPayloadPruneByID prunes by the UUIDv7 id (provider_payloads has
// no received_at index): processed payloads older than the retention go,
// unprocessed ones and newer ones stay; a payload whose provider is gone is
// deleted by its job.
func TestProviderPayloadPruneByID(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	account, provider := uuid.New(), uuid.New()
	exec(`INSERT INTO accounts (id, email, password_hash) VALUES ($1, 'prune-payloads@example.com', 'x')`, account)
	exec(`INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id) VALUES ($1, $2, 'mailgun', 'mg', '\x00', 'k')`, provider, account)
	// v7 returns an id made at t, as the ingester makes them.
	v7 := func(at time.Time) uuid.UUID {
		id := dbutil.UUIDv7Floor(at)
		tail := uuid.New()
		copy(id[9:], tail[9:])
		return id
	}
	payload := func(name string, at time.Time, processed bool) uuid.UUID {
		id := v7(at)
		var done *time.Time
		if processed {
			done = &at
		}
		exec(`INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body, processed_at)
			VALUES ($1, $2, $3, $4, '\x00', '{}', $5)`, id, provider, account, name, done)
		return id
	}
	oldDone := payload("old-done", now.Add(-providerPayloadRetention-time.Minute), true)
	oldOpen := payload("old-open", now.Add(-providerPayloadRetention-time.Hour), false)
	newDone := payload("new-done", now.Add(-providerPayloadRetention+time.Minute), true)

	w := &ProviderPayloadPruneWorker{deps: Deps{Pool: pool, Now: func() time.Time { return now }}.withDefaults()}
	require.NoError(t, w.Work(ctx, &river.Job[ProviderPayloadPruneArgs]{}))
	var left []uuid.UUID
	rows, err := pool.Query(ctx, `SELECT id FROM provider_payloads ORDER BY id`)
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	require.ElementsMatch(t, []uuid.UUID{oldOpen, newDone}, left, "only %s (processed, past retention) is pruned", oldDone)

	// A payload stored while its provider was being deleted: nothing
	// cascades to it, so its job deletes it.
	orphan := uuid.New()
	exec(`INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body) VALUES ($1, $2, $3, 'o', '\x00', '{}')`,
		orphan, uuid.New(), account)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	res, err := providers.ProcessPayload(ctx, tx, orphan, now)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.True(t, res.Gone)
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM provider_payloads WHERE id = $1`, orphan).Scan(&n))
	require.Zero(t, n)
}

// TestProviderPayloadJobIsolatesPayloads works one normalising job over a
// batch of three tenants' payloads, as the ingress queues them: an
// attacker's signed payload whose strings hold \u0000, a payload that
// fails for another reason (a trigger refuses its event), and a victim's
// ordinary payloads around them. The job completes: the victim's payloads
// are normalised and its hard bounce suppressed, the attacker's NULs are
// replaced, and the failing payload alone is rolled back, its attempt and
// reason recorded, and queued again in a later job of its own.
func TestProviderPayloadJobIsolatesPayloads(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	deps := Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	client, err := NewClient(deps, Options{Concurrency: 2, Queues: []string{queues.Default}})
	require.NoError(t, err)
	done, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	t.Cleanup(cancel)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	})
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	tenant := func(name string) (account, provider uuid.UUID) {
		account, provider = uuid.New(), uuid.New()
		exec(`INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')`, account, name+"@isolation.example")
		exec(`INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id) VALUES ($1, $2, 'mailgun', 'mg', '\x00', 'k')`, provider, account)
		return account, provider
	}
	payload := func(account, provider uuid.UUID, key string, body []byte) uuid.UUID {
		id := uuid.Must(uuid.NewV7())
		exec(`INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body) VALUES ($1, $2, $3, $4, '\x00', $5)`,
			id, provider, account, key, body)
		return id
	}
	bounce := corpus.Read(t, "esp/mailgun-permanent_failure.json")
	withRecipient := func(to string) []byte {
		b, err := json.Marshal(to)
		require.NoError(t, err)
		return bytes.Replace(bounce, []byte(`"recipient": "alice@example.com"`), append([]byte(`"recipient": `), b...), 1)
	}
	victim, victimProvider := tenant("victim")
	attacker, attackerProvider := tenant("attacker")
	other, otherProvider := tenant("other")
	exec(`CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.recipient = 'poison@other.example' THEN RAISE EXCEPTION 'poisoned event refused'; END IF; RETURN NEW; END $$`)
	exec(`CREATE TRIGGER refuse_poison BEFORE INSERT ON message_events FOR EACH ROW EXECUTE FUNCTION refuse_poison()`)

	nul := withRecipient("x\x00@attacker.example")
	require.Contains(t, string(nul), `\u0000`)
	ids := []uuid.UUID{
		payload(victim, victimProvider, "token:v1", bounce),
		payload(attacker, attackerProvider, "token:a1", bytes.Replace(nul, []byte(`"G9Bn5sl1TC6nu79C8C0bwg"`), []byte(`"G9Bn\u0000"`), 1)),
		payload(other, otherProvider, "token:o1", withRecipient("poison@other.example")),
		payload(victim, victimProvider, "token:v2", corpus.Read(t, "esp/mailgun-delivered.json")),
		payload(victim, victimProvider, "token:v3", corpus.Read(t, "esp/mailgun-complained.json")),
	}
	job, err := client.Insert(ctx, providers.PayloadArgs{PayloadIDs: ids}, nil)
	require.NoError(t, err)
	for ev := range done {
		if ev.Job.ID == job.Job.ID {
			require.Equal(t, rivertype.JobStateCompleted, ev.Job.State, "errors: %v", ev.Job.Errors)
			break
		}
	}

	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}
	require.Equal(t, 3, count(`SELECT count(*) FROM provider_payloads WHERE account_id = $1 AND processed_at IS NOT NULL AND error IS NULL`, victim))
	require.Equal(t, 3, count(`SELECT count(*) FROM message_events WHERE account_id = $1`, victim))
	require.Equal(t, 1, count(`SELECT count(*) FROM suppressions WHERE account_id = $1 AND reason = 'hard_bounce' AND email = 'alice@example.com'`, victim))
	require.Equal(t, 1, count(`SELECT count(*) FROM message_events WHERE account_id = $1 AND recipient = 'x' || chr(65533) || '@attacker.example'
		AND event_id = 'G9Bn' || chr(65533)`, attacker), "the attacker's NULs are replaced, its event kept")

	var attempts int
	var processed bool
	var reason string
	require.NoError(t, pool.QueryRow(ctx, `SELECT attempts, processed_at IS NOT NULL, error FROM provider_payloads WHERE id = $1`, ids[2]).
		Scan(&attempts, &processed, &reason))
	require.Equal(t, 1, attempts)
	require.False(t, processed, "a failed payload is tried again")
	require.Contains(t, reason, "poisoned event refused")
	require.Zero(t, count(`SELECT count(*) FROM message_events WHERE account_id = $1`, other))
	require.Equal(t, 1, count(`SELECT count(*) FROM river_job WHERE kind = 'provider_payload' AND state = 'scheduled'
		AND scheduled_at > now() AND args->'payload_ids' = to_jsonb(ARRAY[$1::text])`, ids[2].String()),
		"the failed payload is queued again alone, later")

	// A job of one account (as the ingress queues them) queues its failed
	// payloads again under that account, so the retry stays within the
	// account's bound.
	poisoned := payload(other, otherProvider, "token:o2", withRecipient("poison@other.example"))
	job, err = client.Insert(ctx, providers.PayloadArgs{AccountID: other, PayloadIDs: []uuid.UUID{poisoned}}, nil)
	require.NoError(t, err)
	for ev := range done {
		if ev.Job.ID == job.Job.ID {
			require.Equal(t, rivertype.JobStateCompleted, ev.Job.State, "errors: %v", ev.Job.Errors)
			break
		}
	}
	require.Equal(t, 1, count(`SELECT count(*) FROM river_job WHERE kind = 'provider_payload' AND state = 'scheduled'
		AND args->'payload_ids' = to_jsonb(ARRAY[$1::text]) AND args->>'account_id' = $2`, poisoned.String(), other.String()),
		"the retry keeps the job's account")
}

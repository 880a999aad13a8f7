package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/jobs"
)

// fillAccount gives an account a bit of everything: 10,000 events, an
// email and an SMS receiver with messages, a subscription with deliveries
// (their River jobs queued, tagged with the account) and attempts, a
// domain with health history, and a DNS connection linked to it.
func fillAccount(t *testing.T, b *testBundle, pool *pgxpool.Pool, emitter *events.Emitter, a account, smsNumber string) {
	t.Helper()
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	exec(`INSERT INTO events (id, account_id, event_type, severity, payload, rendered, created_at)
		SELECT gen_random_uuid(), $1, 'bounce_spike', 'info', '{}', '{}', now() - make_interval(secs => g)
		FROM generate_series(1, 10000) g`, a.ID)

	resp := b.do(t, "POST", "/api/accounts/me/receivers", a.Key, map[string]any{"channel": "email", "label": "inbox"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var rcv struct {
		ID string `json:"id"`
	}
	resp.JSON(t, &rcv)
	exec(`INSERT INTO receiver_messages (id, receiver_id, account_id, seq, channel, sender, parsed, size_bytes, received_at)
		VALUES (gen_random_uuid(), $1, $2, 1, 'email', 'a@example.com', '{}', 10, now())`, rcv.ID, a.ID)
	if smsNumber != "" {
		resp = b.do(t, "POST", "/api/accounts/me/receivers", a.Key, map[string]any{"channel": "sms", "label": "otp"})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	}

	rc := newHookReceiver(t, nil)
	createSub(t, b, a.Key, map[string]any{"url": rc.URL})
	for range 5 {
		_, err := dbutil.WithTxV(ctx, pool, func(ctx context.Context, tx pgx.Tx) (uuid.UUID, error) {
			row, err := emitter.Emit(ctx, tx, events.Event{AccountID: uuid.MustParse(a.ID), Type: events.TypeReceiverMessageReceived,
				Payload: map[string]any{"receiver_id": uuid.New(), "message_id": uuid.New(), "channel": "email"}})
			return row.ID, err
		})
		require.NoError(t, err)
	}
	exec(`INSERT INTO webhook_delivery_attempts (id, delivery_id, job_id, job_attempt, started_at)
		SELECT gen_random_uuid(), id, coalesce(job_id, 0), 1, now() FROM webhook_deliveries WHERE account_id = $1`, a.ID)

	resp = b.do(t, "POST", "/api/accounts/me/domains", a.Key, map[string]any{"domain": "example.com"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var dom struct {
		ID string `json:"id"`
	}
	resp.JSON(t, &dom)
	exec(`INSERT INTO domain_health_history (id, domain_id, score, report) VALUES (gen_random_uuid(), $1, 80, '{}')`, dom.ID)
	conn := uuid.Must(uuid.NewV7())
	exec(`INSERT INTO dns_connections (id, account_id, kind, label, secret_ciphertext, secret_key_id, verified_at)
		VALUES ($1, $2, 'cloudflare', 'cf', '\x00', 'k1', now())`, conn, a.ID)
	exec(`INSERT INTO dns_connection_links (domain_id, connection_id, zone_name, zone_id) VALUES ($1, $2, 'example.com', 'z1')`, dom.ID, conn)
}

// accountTables lists every base table of the public schema with an
// account_id column, from the catalog, so that tables added by later
// migrations are checked too.
func accountTables(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT c.table_name FROM information_schema.columns c
		JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name
		WHERE c.table_schema = 'public' AND c.column_name = 'account_id' AND t.table_type = 'BASE TABLE'
		ORDER BY 1`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return tables
}

func countRows(t *testing.T, pool *pgxpool.Pool, table, accountID string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()+" WHERE account_id = $1", accountID).Scan(&n))
	return n
}

// TestAccountDeleteRemovesEverything: DELETE /me answers 202 and stops the
// keys at once; a River job then removes every row of the account, table
// by table, frees its SMS number and cancels its queued jobs, while another
// account keeps working throughout.
func TestAccountDeleteRemovesEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)
	b := setup(t, func(o *setupOpts) { o.db = pool })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The worker works the maintenance queue only: delivery jobs stay
	// queued, so the purge has jobs to cancel.
	worker, err := jobs.NewClient(jobs.Deps{Pool: pool, Logger: logger}, jobs.Options{Concurrency: 4, Queues: []string{queues.Maintenance}})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.StopAndCancel(ctx)
	})
	emitter := &events.Emitter{River: worker}

	admin := b.createAccount(t)
	b.makeAdmin(t, admin)
	const number = "+14155550123"
	require.Equal(t, http.StatusCreated, b.do(t, "POST", "/api/admin/sms-numbers", admin.Key, map[string]any{"phone_number": number}).Status)
	audit := b.eventsOf(t, admin.Key, "sms_pool_changed")
	require.Len(t, audit, 1, "pool changes are audited on the admin's account")
	require.Equal(t, number, audit[0].Payload["phone_number"])

	doomed := b.createAccount(t)
	other := b.createAccount(t)
	fillAccount(t, b, pool, emitter, doomed, number)
	fillAccount(t, b, pool, emitter, other, "")

	tables := accountTables(t, pool)
	for _, want := range []string{"api_keys", "events", "receivers", "receiver_messages", "webhook_deliveries", "event_subscriptions", "domains", "dns_connections"} {
		require.Contains(t, tables, want)
	}
	require.Equal(t, 10_005, countRows(t, pool, "events", doomed.ID))
	var holder *string
	require.NoError(t, pool.QueryRow(ctx, "SELECT receiver_id::text FROM sms_numbers WHERE phone_number = $1", number).Scan(&holder))
	require.NotNil(t, holder, "the SMS receiver holds the number")
	var queued int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'available' AND tags @> ARRAY[$1]::varchar(255)[]`,
		"account-"+doomed.ID).Scan(&queued))
	require.Equal(t, 6, queued, "the delivery jobs wait in the (unworked) webhooks queue, with the sign-up's verification mail")
	before := map[string]int{}
	for _, table := range tables {
		before[table] = countRows(t, pool, table, other.ID)
	}

	resp := b.do(t, "DELETE", "/api/accounts/me", doomed.Key, nil)
	require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
	var del struct {
		JobID int64 `json:"job_id"`
	}
	resp.JSON(t, &del)
	require.Equal(t, http.StatusUnauthorized, b.do(t, "GET", "/api/accounts/me", doomed.Key, nil).Status, "keys stop at once")

	require.NoError(t, worker.Start(ctx))
	// Meanwhile the other account's requests succeed, reads and writes.
	deadline := time.Now().Add(60 * time.Second)
	requests := 0
	for {
		require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me/receivers", other.Key, nil).Status)
		resp := b.do(t, "POST", "/api/accounts/me/receivers", other.Key, map[string]any{"channel": "email"})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		requests++
		var state string
		require.NoError(t, pool.QueryRow(ctx, "SELECT state::text FROM river_job WHERE id = $1", del.JobID).Scan(&state))
		if state == "completed" {
			break
		}
		require.True(t, time.Now().Before(deadline), "account_delete job still %s", state)
		time.Sleep(10 * time.Millisecond)
	}
	require.Positive(t, requests)
	// The rows went in batches, table by table, before the account row
	// (whose cascade would otherwise have taken them in one statement).
	var out struct {
		Done bool             `json:"done"`
		Rows map[string]int64 `json:"rows"`
	}
	var raw []byte
	require.NoError(t, pool.QueryRow(ctx, "SELECT metadata->'output' FROM river_job WHERE id = $1", del.JobID).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	require.True(t, out.Done)
	require.Equal(t, int64(10_005), out.Rows["events"])
	require.Equal(t, int64(5), out.Rows["webhook_deliveries"])
	require.Equal(t, int64(5), out.Rows["webhook_delivery_attempts"])
	require.Equal(t, int64(6), out.Rows["river_job"], "5 deliveries and the verification mail cancelled")
	require.Equal(t, int64(1), out.Rows["sms_numbers"])
	require.Equal(t, int64(1), out.Rows["dns_connections"])
	require.Equal(t, int64(1), out.Rows["domain_health_history"])
	require.Equal(t, int64(2), out.Rows["receivers"])

	for _, table := range tables {
		require.Zero(t, countRows(t, pool, table, doomed.ID), "rows of the deleted account left in %s", table)
		if table == "receivers" {
			require.Equal(t, before[table]+requests, countRows(t, pool, table, other.ID), "the other account's %s", table)
		} else if table != "api_usage_daily" {
			require.GreaterOrEqual(t, countRows(t, pool, table, other.ID), before[table], "the other account's %s", table)
		}
	}
	require.Equal(t, 10_005, countRows(t, pool, "events", other.ID))
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM accounts WHERE id = $1", doomed.ID).Scan(&n))
	require.Zero(t, n)
	// Tables without account_id that hang off the account's rows.
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_delivery_attempts a
		WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.id = a.delivery_id))
		+ (SELECT count(*) FROM domain_health_history h WHERE NOT EXISTS (SELECT 1 FROM domains d WHERE d.id = h.domain_id))
		+ (SELECT count(*) FROM dns_connection_links)`).Scan(&n))
	require.Equal(t, 1, n, "only the other account's DNS link is left")
	require.NoError(t, pool.QueryRow(ctx, "SELECT receiver_id::text FROM sms_numbers WHERE phone_number = $1", number).Scan(&holder))
	require.Nil(t, holder, "the SMS number is back in the pool")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state NOT IN ('cancelled', 'completed', 'discarded')
		AND tags @> ARRAY[$1]::varchar(255)[]`, "account-"+doomed.ID).Scan(&n))
	require.Zero(t, n, "the account's queued jobs are cancelled")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'available' AND tags @> ARRAY[$1]::varchar(255)[]`,
		"account-"+other.ID).Scan(&n))
	require.Equal(t, 6, n, "the other account's jobs are untouched")

	// The email is free again.
	resp = b.do(t, "POST", "/api/accounts", "", map[string]string{"email": doomed.Email, "password": "correct horse battery"})
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)

	// Re-running the job (an operator in River UI) converges: nothing left,
	// nothing fails.
	_, err = worker.JobRetry(ctx, del.JobID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var state string
		var attempt int
		_ = pool.QueryRow(ctx, "SELECT state::text, attempt FROM river_job WHERE id = $1", del.JobID).Scan(&state, &attempt)
		return state == "completed" && attempt >= 2
	}, 20*time.Second, 20*time.Millisecond)

	// A purge of an account nobody asked to delete does nothing.
	_, err = accounts.Purge(ctx, pool, uuid.MustParse(other.ID), accounts.PurgeOptions{})
	require.True(t, errors.Is(err, accounts.ErrNotDeleting), "%v", err)
	require.Equal(t, 10_005, countRows(t, pool, "events", other.ID))
}

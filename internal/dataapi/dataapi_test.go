package dataapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

type tenant struct {
	id     uuid.UUID
	claims []byte
}

// seed makes an account with n events, a domain (with health history) and
// a subscription whose secret must never be readable.
func seed(t testing.TB, db dbutil.Executor, n int) tenant {
	t.Helper()
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7())
	_, err := db.Exec(ctx, `INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')`, id, id.String()+"@example.com")
	require.NoError(t, err)
	for i := range n {
		_, err := db.Exec(ctx, `INSERT INTO events (id, account_id, event_type, severity, payload, rendered, created_at)
			VALUES ($1, $2, $3, 'info', '{}', '{}', now() - make_interval(mins => $4))`,
			uuid.Must(uuid.NewV7()), id, []string{"bounce_spike", "health_score_changed"}[i%2], i)
		require.NoError(t, err)
	}
	domainID := uuid.Must(uuid.NewV7())
	_, err = db.Exec(ctx, `INSERT INTO domains (id, account_id, name) VALUES ($1, $2, $3)`, domainID, id, "d"+id.String()[:8]+".example.com")
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO domain_health_history (id, domain_id, score, report) VALUES ($1, $2, 90, '{}')`, uuid.Must(uuid.NewV7()), domainID)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO event_subscriptions (id, account_id, url, secret_ciphertext, secret_key_id)
		VALUES ($1, $2, 'https://hooks.example.com/x', '\xdeadbeef', 'k1')`, uuid.Must(uuid.NewV7()), id)
	require.NoError(t, err)
	seedTenantTables(t, db, id, domainID)
	claims, _ := json.Marshal(map[string]any{"sub": id.String(), "role": "authenticated", "aud": "authenticated"})
	return tenant{id: id, claims: claims}
}

// newTables are the views of schema/0012_data_api_tables.sql; seed puts
// exactly one row of each tenant in each.
var newTables = []string{"providers", "provider_links", "message_events", "suppressions", "message_spikes",
	"received_reports", "dmarc_reports", "dmarc_records", "dmarc_sources", "tls_reports", "dns_connections",
	"dns_connection_links", "dns_recommendations", "mx_setups",
	// schema/0013_preferences.sql
	"preference_groups", "preference_overrides",
	// schema/0029_message_event_rollups.sql: the message event's day
	"message_event_days",
	// schema/0041_reputation.sql
	"reputation_targets", "reputation_listings",
	// schema/0044_reputation_watch.sql
	"reputation_pins",
	// schema/0049_dmarc_subdomains.sql
	"dmarc_subdomains",
	// schema/0057_dmarc_reporters.sql
	"dmarc_reporters",
	// schema/0058_dkim_selectors.sql
	"dkim_selectors",
	// schema/0042_transport.sql
	"mx_transport"}

// seedTenantTables gives the account one row in each table of 0012, with
// secrets in the columns that must never be readable.
func seedTenantTables(t testing.TB, db dbutil.Executor, account, domain uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	provider, event, message, report, conn := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()),
		uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	name := "d" + account.String()[:8] + ".example.com"
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id)
			VALUES ($1, $2, 'ses', 'main', '\xdeadbeef', 'k1')`, []any{provider, account}},
		{`INSERT INTO sending_provider_links (provider_id, domain_id) VALUES ($1, $2)`, []any{provider, domain}},
		{`INSERT INTO message_events (id, account_id, provider_id, provider_kind, event_id, event_type, recipient,
			recipient_hash, domain, domain_id, occurred_at)
			VALUES ($1, $2, $3, 'ses', 'e1', 'bounced', 'r@example.net', '\x01', $5, $4, now())`, []any{event, account, provider, domain, name}},
		{`INSERT INTO suppressions (id, account_id, email, email_hash, reason, source_event_id)
			VALUES (gen_random_uuid(), $1, 'r@example.net', '\x01', 'hard_bounce', $2)`, []any{account, event}},
		{`INSERT INTO message_spikes (domain_id, provider_id, kind) VALUES ($1, $2, 'bounce')`, []any{domain, provider}},
		{`INSERT INTO report_messages (id, account_id, domain_id, kind, source, raw, raw_size)
			VALUES ($1, $2, $3, 'dmarc', 'upload', '\x01', 1)`, []any{message, account, domain}},
		{`INSERT INTO dmarc_reports (id, domain_id, message_id, org_name, report_id, email, begin_at, end_at,
			policy_domain, policy, version, record_count, message_count, pass_count)
			VALUES ($1, $2, $3, 'google.com', 'r1', 'noreply@google.com', now() - interval '1 day', now(), $4, '{}', '1.0', 1, 3, 2)`,
			[]any{report, domain, message, name}},
		{`INSERT INTO dmarc_records (report_id, ordinal, source_ip, count, disposition, dkim, spf, header_from,
			envelope_from, envelope_to, reasons, dkim_results, spf_results)
			VALUES ($1, 0, '192.0.2.1', 3, 'none', 'pass', 'fail', $2, $2, '', '[]', '[]', '[]')`, []any{report, name}},
		{`INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned, spf_aligned, compliant,
			forwarded, failing) VALUES ($1, current_date, '192.0.2.1', 3, 2, 0, 2, 0, 1)`, []any{domain}},
		{`INSERT INTO tls_reports (id, domain_id, message_id, org_name, report_id, contact_info, begin_at, end_at,
			successful_count, failure_count, policies)
			VALUES (gen_random_uuid(), $1, $2, 'google.com', 't1', 'x@google.com', now() - interval '1 day', now(), 5, 0, '[]')`,
			[]any{domain, message}},
		{`INSERT INTO dns_connections (id, account_id, kind, label, secret_ciphertext, secret_key_id, verified_at)
			VALUES ($1, $2, 'cloudflare', 'cf', '\xdeadbeef', 'k1', now())`, []any{conn, account}},
		{`INSERT INTO dns_connection_links (domain_id, connection_id, zone_name, zone_id) VALUES ($1, $2, $3, 'z1')`,
			[]any{domain, conn, name}},
		{`INSERT INTO dns_recommendations (id, domain_id, key, check_name, severity, name, rtype, op, why, fingerprint, job_id)
			VALUES (gen_random_uuid(), $1, 'spf', 'spf', 'warning', $2, 'TXT', 'create', 'no SPF record', 'f1', 42)`,
			[]any{domain, name}},
		{`INSERT INTO mx_setups (id, domain_id, name, token) VALUES (gen_random_uuid(), $1, $2, 'tok')`,
			[]any{domain, "reports." + name}},
		{`INSERT INTO mx_probe_results (account_id, domain_id, mx_host, address, port, verdict, host_verdict, probed_at)
			VALUES ($1, $2, 'mx.' || $3, '192.0.2.25', 25, 'ok', 'ok', now())`, []any{account, domain, name}},
		{`INSERT INTO preference_groups (account_id, group_name, email, webhook) VALUES ($1, 'health', false, true)`,
			[]any{account}},
		{`INSERT INTO reputation_targets (account_id, domain_id, target, kind, origin, messages, share)
			VALUES ($1, $2, '192.0.2.10', 'ip', 'report', 40, 0.4)`, []any{account, domain}},
		{`INSERT INTO reputation_listings (account_id, domain_id, zone, target, listed_at)
			VALUES ($1, $2, 'bl.test', '192.0.2.10', now())`, []any{account, domain}},
		{`INSERT INTO reputation_pins (account_id, domain_id, cidr) VALUES ($1, $2, '192.0.2.8/30')`, []any{account, domain}},
		{`INSERT INTO dmarc_subdomains (domain_id, name, first_seen, last_seen, first_messages, first_passing)
			VALUES ($1, 'news.' || $2, current_date, current_date, 3, 2)`, []any{domain, name}},
		{`INSERT INTO dmarc_reporters (domain_id, reporter, first_seen_at, last_seen_at, recent_days, reports)
			VALUES ($1, 'reporter.' || $2, now(), now(), ARRAY[current_date], 1)`, []any{domain, name}},
		{`INSERT INTO dkim_selectors (domain_id, selector, first_seen_at, sources) VALUES ($1, 's' || left(md5($2), 8), now(), '{192.0.2.1}')`,
			[]any{domain, name}},
		{`INSERT INTO dmarc_header_from_days (domain_id, day, header_from, messages, passing)
			VALUES ($1, current_date, 'news.' || $2, 3, 2)`, []any{domain, name}},
		{`INSERT INTO preference_overrides (account_id, event_type, email) VALUES ($1, 'bounce_spike', true)`,
			[]any{account}},
		{`INSERT INTO notification_addresses (id, account_id, email, token_hash, token_expires_at)
			VALUES (gen_random_uuid(), $1, $2, sha256(convert_to($2, 'UTF8')), now() + interval '1 day')`, []any{account, "n" + account.String() + "@example.com"}},
	} {
		_, err := db.Exec(ctx, st.sql, st.args...)
		require.NoError(t, err, st.sql)
	}
}

func run(t *testing.T, r *Runner, who tenant, table, rawQuery string, count, singular bool) (*Result, error) {
	t.Helper()
	req, err := Parse(rawQuery)
	require.NoError(t, err)
	return r.Run(context.Background(), Call{Table: table, AccountID: who.id.String(), Claims: who.claims, Request: req, Count: count, Singular: singular})
}

func rowsOf(t *testing.T, res *Result) []map[string]any {
	t.Helper()
	var out []map[string]any
	require.NoError(t, json.Unmarshal(res.Body, &out), string(res.Body))
	return out
}

func TestAllowListMatchesViews(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	rows, err := db.Query(context.Background(), `
		SELECT table_name, column_name, CASE data_type
			WHEN 'ARRAY' THEN substr(udt_name, 2) || '[]'
			WHEN 'timestamp with time zone' THEN 'timestamptz'
			ELSE data_type END
		FROM information_schema.columns WHERE table_schema = 'data_api' ORDER BY table_name, ordinal_position`)
	require.NoError(t, err)
	got := map[string][]Column{}
	for rows.Next() {
		var table string
		var c Column
		require.NoError(t, rows.Scan(&table, &c.Name, &c.Type))
		got[table] = append(got[table], c)
	}
	require.NoError(t, rows.Err())
	want := map[string][]Column{}
	for name, tab := range Tables {
		want[name] = tab.Columns
	}
	require.Equal(t, want, got, "Tables must list exactly the views of schema data_api")
}

// TestTenantIsolationWithBuggyBuilder injects the bug the database must
// survive: the builder's own account filter is removed from the SQL.
func TestTenantIsolationWithBuggyBuilder(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	alice, bob := seed(t, db, 3), seed(t, db, 4)
	buggy := &Runner{DB: db, opts: buildOptions{omitAccountFilter: true}}

	q, err := build("events", &Request{}, alice.id.String(), 100, false, buggy.opts)
	require.NoError(t, err)
	require.NotContains(t, q.sql, "account_id =", "the bug is injected")

	// Control: the same SQL run by the owner role, which RLS does not bind,
	// does leak Bob's rows, so the check below is not vacuous.
	var leaked int64
	var body string
	require.NoError(t, db.QueryRow(context.Background(), q.sql, q.args...).Scan(&body, &leaked))
	require.GreaterOrEqual(t, leaked, int64(7))

	wants := map[string]int{"events": 3, "domains": 1, "domain_health_history": 1, "event_subscriptions": 1}
	for _, table := range newTables {
		wants[table] = 1
	}
	for table, want := range wants {
		res, err := run(t, buggy, alice, table, "", true, false)
		require.NoError(t, err, table)
		rows := rowsOf(t, res)
		require.Len(t, rows, want, table)
		require.Equal(t, fmt.Sprintf("0-%d/%d", want-1, want), res.ContentRange, table)
		for _, r := range rows {
			if acct, ok := r["account_id"]; ok {
				require.Equal(t, alice.id.String(), acct, table)
			}
		}
	}
	// Bob sees his own through the same bug.
	res, err := run(t, buggy, bob, "events", "", false, false)
	require.NoError(t, err)
	require.Len(t, rowsOf(t, res), 4)

	// A caller whose claims name no account sees nothing at all.
	nobody := tenant{id: uuid.Must(uuid.NewV7()), claims: []byte(`{"sub":"user_2abc","role":"authenticated"}`)}
	res, err = run(t, buggy, nobody, "events", "", false, false)
	require.NoError(t, err)
	require.Empty(t, rowsOf(t, res))
}

// TestRowLevelSecurityInSQL checks the policies and grants directly, as
// PostgREST would use them.
func TestRowLevelSecurityInSQL(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	alice, bob := seed(t, db, 2), seed(t, db, 2)
	ctx := context.Background()
	asAlice := func(t *testing.T, fn func(tx pgx.Tx) error) error {
		sp, err := db.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = sp.Rollback(ctx) }()
		_, err = sp.Exec(ctx, `SET LOCAL ROLE authenticated`)
		require.NoError(t, err)
		_, err = sp.Exec(ctx, `SELECT set_config('request.jwt.claims', $1, true)`, string(alice.claims))
		require.NoError(t, err)
		return fn(sp)
	}
	count := func(sql string) func(tx pgx.Tx) error {
		return func(tx pgx.Tx) error {
			var n int
			if err := tx.QueryRow(ctx, sql, bob.id).Scan(&n); err != nil {
				return err
			}
			if n != 0 {
				return fmt.Errorf("%d of Bob's rows visible", n)
			}
			return nil
		}
	}
	for _, sql := range []string{
		`SELECT count(*) FROM events WHERE account_id = $1`,
		`SELECT count(*) FROM data_api.events WHERE account_id = $1`,
		`SELECT count(*) FROM data_api.domains WHERE account_id = $1`,
		`SELECT count(*) FROM data_api.event_subscriptions WHERE account_id = $1`,
		`SELECT count(*) FROM data_api.domain_health_history h JOIN domains d ON d.id = h.domain_id WHERE d.account_id = $1`,
	} {
		require.NoError(t, asAlice(t, count(sql)), sql)
	}
	// Alice does see her own.
	require.NoError(t, asAlice(t, func(tx pgx.Tx) error {
		var n int
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM data_api.events`).Scan(&n))
		require.Equal(t, 2, n)
		return nil
	}))
	// The tables of 0012: both tenants have one row in each; Alice sees
	// exactly hers, through the view and on the base table alike.
	for _, view := range newTables {
		sql := `SELECT count(*) FROM data_api.` + view
		require.NoError(t, asAlice(t, func(tx pgx.Tx) error {
			var n int
			if err := tx.QueryRow(ctx, sql).Scan(&n); err != nil {
				return err
			}
			if n != 1 {
				return fmt.Errorf("%d rows visible, want Alice's one", n)
			}
			return nil
		}), sql)
	}
	for _, sql := range []string{
		`SELECT count(*) FROM sending_providers WHERE account_id = $1`,
		`SELECT count(*) FROM message_events WHERE account_id = $1`,
		`SELECT count(*) FROM message_event_account_hourly WHERE account_id = $1`,
		`SELECT count(*) FROM message_event_account_daily WHERE account_id = $1`,
		`SELECT count(*) FROM suppressions WHERE account_id = $1`,
		`SELECT count(*) FROM report_messages WHERE account_id = $1`,
		`SELECT count(*) FROM dns_connections WHERE account_id = $1`,
		`SELECT count(*) FROM preference_groups WHERE account_id = $1`,
		`SELECT count(*) FROM preference_overrides WHERE account_id = $1`,
		`SELECT count(*) FROM event_counts_hourly WHERE account_id = $1`,
		`SELECT count(*) FROM event_counts_daily WHERE account_id = $1`,
		`SELECT count(*) FROM data_api.event_daily_counts WHERE account_id = $1`,
		`SELECT count(*) FROM data_api.dmarc_records r JOIN dmarc_reports p ON p.id = r.report_id
			JOIN domains d ON d.id = p.domain_id WHERE d.account_id = $1`,
		`SELECT count(*) FROM data_api.mx_setups m JOIN domains d ON d.id = m.domain_id WHERE d.account_id = $1`,
		`SELECT count(*) FROM data_api.provider_links l JOIN sending_providers p ON p.id = l.provider_id WHERE p.account_id = $1`,
	} {
		require.NoError(t, asAlice(t, count(sql)), sql)
	}
	// Writes and secrets are refused.
	for _, sql := range []string{
		`DELETE FROM events`,
		`UPDATE events SET payload = '{}'`,
		`INSERT INTO events (id, account_id, event_type, severity, payload, rendered) VALUES (gen_random_uuid(), mailwatch_jwt_account_id(), 'x', 'info', '{}', '{}')`,
		`DELETE FROM data_api.events`,
		`SELECT secret_ciphertext FROM event_subscriptions`,
		`SELECT password_hash FROM accounts`,
		`SELECT key_hash FROM api_keys`,
		`SELECT private_ciphertext FROM signing_keys`,
		`SELECT body FROM webhook_deliveries`,
		`SELECT raw FROM receiver_messages`,
		`SELECT webhook_secret_ciphertext FROM auth_providers`,
		`SELECT secret_ciphertext FROM sending_providers`,
		`SELECT secret_key_id FROM sending_providers`,
		`SELECT secret_ciphertext FROM dns_connections`,
		`SELECT secret_key_id FROM dns_connections`,
		`SELECT recipient_hash FROM message_events`,
		`SELECT n FROM message_event_domain_hourly`,
		`DELETE FROM message_event_account_hourly`,
		`UPDATE message_event_account_hourly SET n = 0`,
		`SELECT n FROM message_event_domain_daily`,
		`DELETE FROM message_event_account_daily`,
		`UPDATE message_event_account_daily SET n = 0`,
		`SELECT email_hash FROM suppressions`,
		`SELECT raw FROM report_messages`,
		`SELECT body FROM provider_payloads`,
		`SELECT token_hash FROM notification_addresses`,
		`SELECT email FROM notification_addresses`,
		`INSERT INTO preference_groups (account_id, group_name, email, webhook) VALUES (mailwatch_jwt_account_id(), 'reports', false, false)`,
		`UPDATE preference_overrides SET email = false`,
		`UPDATE event_counts_hourly SET events = 0`,
		`DELETE FROM event_counts_hourly`,
		`UPDATE event_counts_daily SET events = 0`,
		`DELETE FROM event_counts_daily`,
		`SELECT job_id FROM dns_recommendations`,
		`DELETE FROM suppressions`,
		`DELETE FROM data_api.suppressions`,
		`UPDATE dns_recommendations SET state = 'dismissed'`,
		`INSERT INTO mx_setups (id, domain_id, name, token) SELECT gen_random_uuid(), id, 'x.' || name, 't' FROM domains`,
	} {
		err := asAlice(t, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, sql); return err })
		require.ErrorContains(t, err, "permission denied", sql)
	}
}

func TestRunGrammar(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	alice := seed(t, db, 5)
	seed(t, db, 5)
	r := &Runner{DB: db, MaxRows: 4}

	res, err := run(t, r, alice, "events", "select=id,event_type&order=created_at.desc&limit=2", true, false)
	require.NoError(t, err)
	require.Equal(t, http.StatusPartialContent, res.Status)
	require.Equal(t, "0-1/5", res.ContentRange)
	rows := rowsOf(t, res)
	require.Len(t, rows, 2)
	require.Len(t, rows[0], 2, "only the selected columns")

	// The row cap applies to a missing or larger limit.
	res, err = run(t, r, alice, "events", "limit=100", false, false)
	require.NoError(t, err)
	require.Len(t, rowsOf(t, res), 4)
	require.Equal(t, "0-3/*", res.ContentRange)

	res, err = run(t, r, alice, "events", "event_type=eq.bounce_spike", true, false)
	require.NoError(t, err)
	require.Len(t, rowsOf(t, res), 3)
	require.Equal(t, http.StatusOK, res.Status)

	res, err = run(t, r, alice, "events", "event_type=not.eq.bounce_spike&acknowledged_at=is.null", false, false)
	require.NoError(t, err)
	require.Len(t, rowsOf(t, res), 2)

	res, err = run(t, r, alice, "events", `event_type=in.(health_score_changed,"x,y")&order=created_at.asc.nullslast`, false, false)
	require.NoError(t, err)
	got := rowsOf(t, res)
	require.Len(t, got, 2)
	times := []string{got[0]["created_at"].(string), got[1]["created_at"].(string)}
	require.True(t, sort.StringsAreSorted(times))

	res, err = run(t, r, alice, "events", "offset=3&limit=2", true, false)
	require.NoError(t, err)
	require.Equal(t, "3-4/5", res.ContentRange)
	require.Equal(t, http.StatusPartialContent, res.Status)

	_, err = run(t, r, alice, "events", "offset=9", true, false)
	requireCode(t, err, http.StatusRequestedRangeNotSatisfiable, "PGRST103")

	res, err = run(t, r, alice, "events", "offset=7", false, false)
	require.NoError(t, err)
	require.Equal(t, "*/*", res.ContentRange)

	res, err = run(t, r, alice, "domains", "select=name", false, true)
	require.NoError(t, err)
	var one map[string]any
	require.NoError(t, json.Unmarshal(res.Body, &one), string(res.Body))
	require.Contains(t, one["name"], ".example.com")

	_, err = run(t, r, alice, "events", "", false, true)
	requireCode(t, err, http.StatusNotAcceptable, "PGRST116")
	_, err = run(t, r, alice, "nope", "", false, false)
	requireCode(t, err, http.StatusNotFound, "PGRST205")
	_, err = run(t, r, alice, "events", "select=secret", false, false)
	requireCode(t, err, http.StatusBadRequest, "42703")
	_, err = run(t, r, alice, "event_subscriptions", "secret_ciphertext=eq.x", false, false)
	requireCode(t, err, http.StatusBadRequest, "42703")
	_, err = run(t, r, alice, "events", "created_at=gt.yesterday-ish", false, false)
	requireCode(t, err, http.StatusBadRequest, "22007")
	_, err = run(t, r, alice, "events", "id=eq.not-a-uuid", false, false)
	requireCode(t, err, http.StatusBadRequest, "22P02")

	// A value is data, never SQL.
	res, err = run(t, r, alice, "events", "event_type=eq.x' OR '1'='1", false, false)
	require.NoError(t, err)
	require.Empty(t, rowsOf(t, res))
}

func requireCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, status, e.Status, e.Message)
	require.Equal(t, code, e.Code, e.Message)
}

// TestRunOnPoolLeavesNoRole checks the one-round-trip path: the role and
// claims end with the batch's implicit transaction.
func TestRunOnPoolLeavesNoRole(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	alice := seed(t, pool, 2)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 1
	cfg.AfterConnect = dbutil.AfterConnect
	one, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	defer one.Close()
	r := &Runner{DB: one}
	for range 3 {
		res, err := run(t, r, alice, "events", "order=created_at.desc", true, false)
		require.NoError(t, err)
		require.Len(t, rowsOf(t, res), 2)
		_, err = run(t, r, alice, "events", "id=eq.bad", false, false)
		require.Error(t, err)
		var user, claims string
		var ro string
		require.NoError(t, one.QueryRow(context.Background(),
			`SELECT current_user, coalesce(current_setting('request.jwt.claims', true), ''), current_setting('transaction_read_only')`).Scan(&user, &claims, &ro))
		require.NotEqual(t, "authenticated", user)
		require.Empty(t, claims)
		require.Equal(t, "off", ro)
	}
}

// TestMessageEventDaysSumSlots reads message_event_days over striped daily
// rows (schema/0038_striped_message_rollups.sql): a key counted in two
// slots is one row with their sum, and a key whose slots cancel out is not
// listed.
func TestMessageEventDaysSumSlots(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	alice := seed(t, db, 1)
	seed(t, db, 1)
	_, err := db.Exec(context.Background(), `INSERT INTO message_event_account_daily
		(account_id, day, provider_kind, event_type, bounce_class, slot, n)
		VALUES ($1, '2026-01-02', 'ses', 'delivered', NULL, 1, 2), ($1, '2026-01-02', 'ses', 'delivered', NULL, 5, 3),
		       ($1, '2026-01-03', 'ses', 'delivered', NULL, 1, 4), ($1, '2026-01-03', 'ses', 'delivered', NULL, 5, -4)`, alice.id)
	require.NoError(t, err)
	r := &Runner{DB: db, MaxRows: 10}
	res, err := run(t, r, alice, "message_event_days", "select=day,count&day=lt.2026-01-10&order=day", false, false)
	require.NoError(t, err)
	require.Equal(t, []map[string]any{{"day": "2026-01-02", "count": float64(5)}}, rowsOf(t, res))
}

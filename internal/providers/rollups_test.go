package providers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/providers"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// rollupEpoch is the start of the randomized streams' time range: a few
// seconds before a UTC hour, so that every window drawn has partial hours.
var rollupEpoch = time.Date(2026, 3, 1, 23, 59, 57, 0, time.UTC)

// rollupProvider is a sending provider of a stream and the senders its
// events name (Mailgun carries one; SendGrid none).
type rollupProvider struct {
	id, account uuid.UUID
	kind        string
	senders     []string
}

// rollupWorld is a set of accounts, domains and providers fed through the
// production path: stored payloads normalised by providers.ProcessPayloads.
type rollupWorld struct {
	pool dbutil.Executor
	// writers are the connections the stream's transactions run on, one
	// drawn per transaction (the pool when empty): with connections of
	// different rollup slots, a key's count is spread over several rows,
	// and a decrement may leave a slot's row negative.
	writers   []dbutil.Executor
	r         *rand.Rand
	providers []rollupProvider
	domains   map[uuid.UUID][]dbsqlc.Domain
	sent      map[uuid.UUID][]json.RawMessage // per provider, events stored, for re-sends
	seq       int
}

func newRollupWorld(t *testing.T, db dbutil.Executor, seed uint64, accounts int) *rollupWorld {
	t.Helper()
	w := &rollupWorld{pool: db, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		domains: map[uuid.UUID][]dbsqlc.Domain{}, sent: map[uuid.UUID][]json.RawMessage{}}
	for a := range accounts {
		acct := testfactory.Account(t, db)
		var doms []dbsqlc.Domain
		for d := range 3 {
			doms = append(doms, testfactory.Domain(t, db, acct, fmt.Sprintf("d%d.a%d-%s.example", d, a, acct.String()[:8])))
		}
		w.domains[acct] = doms
		// A SendGrid provider linked to one domain (its events are that
		// domain's), one linked to none (unlinked, no domain), and a Mailgun
		// provider linked to two, whose senders pick the domain.
		w.addProvider(t, acct, "sendgrid", doms[:1], nil)
		w.addProvider(t, acct, "sendgrid", nil, nil)
		w.addProvider(t, acct, "mailgun", doms[1:], []string{
			"news@" + doms[1].Name, "bounces@mail." + doms[2].Name, "x@elsewhere.example", "",
		})
	}
	return w
}

func (w *rollupWorld) addProvider(t *testing.T, account uuid.UUID, kind string, links []dbsqlc.Domain, senders []string) {
	t.Helper()
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7())
	_, err := w.pool.Exec(ctx, `INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id)
		VALUES ($1, $2, $3, $4, '\x00', 'k')`, id, account, kind, kind+"-"+id.String())
	require.NoError(t, err)
	for _, d := range links {
		_, err := w.pool.Exec(ctx, `INSERT INTO sending_provider_links (provider_id, domain_id) VALUES ($1, $2)`, id, d.ID)
		require.NoError(t, err)
	}
	w.providers = append(w.providers, rollupProvider{id: id, account: account, kind: kind, senders: senders})
}

// at draws an event time over six days: a quarter exactly on a UTC hour, a
// quarter within two seconds of one, the rest anywhere.
func (w *rollupWorld) at() int64 {
	base := rollupEpoch.Unix() + 3 // the first whole hour
	switch w.r.IntN(4) {
	case 0:
		return base + 3600*w.r.Int64N(6*24)
	case 1:
		return base + 3600*w.r.Int64N(6*24) + w.r.Int64N(5) - 2
	default:
		return rollupEpoch.Unix() + w.r.Int64N(6*24*3600)
	}
}

// event makes one provider event in the provider's own format, covering
// every outcome and bounce class the format has.
func (w *rollupWorld) event(p rollupProvider) json.RawMessage {
	w.seq++
	id, rcpt, ts := fmt.Sprintf("ev-%d", w.seq), fmt.Sprintf("r%d@rcpt.example", w.r.IntN(50)), w.at()
	var v any
	if p.kind == "sendgrid" {
		ev := map[string]any{"email": rcpt, "timestamp": ts, "sg_event_id": id, "sg_message_id": "m" + id}
		switch k := w.r.IntN(8); k {
		case 0, 1, 2:
			ev["event"] = []string{"processed", "delivered", "deferred"}[k]
		case 3:
			ev["event"], ev["type"] = "bounce", "bounce"
		case 4:
			ev["event"], ev["type"] = "bounce", "blocked"
		default:
			ev["event"] = []string{"dropped", "spamreport", "unsubscribe"}[k-5]
		}
		v = ev
	} else {
		data := map[string]any{"id": id, "recipient": rcpt, "timestamp": ts,
			"envelope": map[string]any{"sender": p.senders[w.r.IntN(len(p.senders))]}}
		switch k := w.r.IntN(7); k {
		case 0, 1, 2, 3:
			data["event"] = []string{"accepted", "delivered", "complained", "unsubscribed"}[k]
		case 4:
			data["event"], data["severity"] = "failed", "temporary"
		case 5:
			data["event"], data["severity"] = "failed", "permanent"
		default:
			data["event"], data["severity"], data["reason"] = "failed", "permanent", "suppress-bounce"
		}
		v = map[string]any{"signature": map[string]any{}, "event-data": data}
	}
	b, _ := json.Marshal(v)
	return b
}

// payload stores a payload of p (a fresh one, or with some events the
// provider sent before: a provider's re-delivery) and returns its id.
func (w *rollupWorld) payload(t *testing.T, p rollupProvider) uuid.UUID {
	t.Helper()
	var evs []json.RawMessage
	n := 1
	if p.kind == "sendgrid" {
		n = 1 + w.r.IntN(8)
	}
	for range n {
		if old := w.sent[p.id]; len(old) > 0 && w.r.IntN(8) == 0 {
			evs = append(evs, old[w.r.IntN(len(old))])
			continue
		}
		e := w.event(p)
		w.sent[p.id] = append(w.sent[p.id], e)
		evs = append(evs, e)
	}
	body := evs[0]
	if p.kind == "sendgrid" {
		body, _ = json.Marshal(evs)
	}
	return w.store(t, p, body)
}

// store stores a payload of p with body and returns its id.
func (w *rollupWorld) store(t *testing.T, p rollupProvider, body json.RawMessage) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := w.pool.Exec(context.Background(), `INSERT INTO provider_payloads (id, provider_id, account_id, replay_key, body_sha256, body)
		VALUES ($1, $2, $3, $4, '\x00', $5)`, id, p.id, p.account, id.String(), []byte(body))
	require.NoError(t, err)
	return id
}

// process normalises payloads as the provider_payload job does, in one
// transaction; with fail, the transaction is rolled back after the work (a
// job whose completion failed, retried by River).
func (w *rollupWorld) process(t *testing.T, ids []uuid.UUID, fail bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := w.writer().Begin(ctx)
	require.NoError(t, err)
	res, err := providers.ProcessPayloads(ctx, tx, ids, time.Now())
	require.NoError(t, err)
	require.Empty(t, res.Failures)
	if fail {
		require.NoError(t, tx.Rollback(ctx))
		return
	}
	require.NoError(t, tx.Commit(ctx))
}

// writer draws the connection of a transaction.
func (w *rollupWorld) writer() dbutil.Executor {
	if len(w.writers) == 0 {
		return w.pool
	}
	return w.writers[w.r.IntN(len(w.writers))]
}

// stream sends rounds batches of payloads, with failed job runs retried and
// payloads normalised again.
func (w *rollupWorld) stream(t *testing.T, rounds int) {
	t.Helper()
	var done []uuid.UUID
	for range rounds {
		batch := make([]uuid.UUID, 1+w.r.IntN(6))
		for i := range batch {
			batch[i] = w.payload(t, w.providers[w.r.IntN(len(w.providers))])
		}
		if w.r.IntN(6) == 0 {
			w.process(t, batch, true)
		}
		w.process(t, batch, false)
		done = append(done, batch...)
		if w.r.IntN(5) == 0 { // a River retry of a job that had finished: nothing to do
			w.process(t, batch, false)
		}
		if w.r.IntN(5) == 0 { // an operator re-runs a payload: everything it writes is keyed
			id := done[w.r.IntN(len(done))]
			_, err := w.pool.Exec(context.Background(), `UPDATE provider_payloads SET processed_at = NULL WHERE id = $1`, id)
			require.NoError(t, err)
			w.process(t, []uuid.UUID{id}, false)
		}
	}
}

// requireRollupsEqualRecount compares the sums over slots of each key of the
// rollup tables with a GROUP BY of the raw rows, ignoring keys whose slots
// sum to zero, and checks that no daily row at zero is kept.
func requireRollupsEqualRecount(t *testing.T, db dbutil.Executor) {
	t.Helper()
	ctx := context.Background()
	var raw int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM message_events`).Scan(&raw))
	require.NotZero(t, raw, "the stream stored events")
	for name, sql := range map[string]string{
		"domain": `
			WITH recount AS (
				SELECT account_id, domain, date_trunc('hour', occurred_at, 'UTC') AS hour, domain_id, provider_id,
				       provider_kind, event_type, bounce_class, count(*) AS n
				FROM message_events GROUP BY 1, 2, 3, 4, 5, 6, 7, 8),
			rollup AS (
				SELECT account_id, domain, hour, domain_id, provider_id, provider_kind, event_type, bounce_class, sum(n)::bigint
				FROM message_event_domain_hourly GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 HAVING sum(n) <> 0)
			SELECT count(*), (SELECT count(*) FROM recount) FROM (
				(SELECT * FROM recount EXCEPT ALL SELECT * FROM rollup)
				UNION ALL (SELECT * FROM rollup EXCEPT ALL SELECT * FROM recount)) diff`,
		"account": `
			WITH recount AS (
				SELECT account_id, date_trunc('hour', occurred_at, 'UTC') AS hour, provider_kind, event_type,
				       bounce_class, count(*) AS n
				FROM message_events GROUP BY 1, 2, 3, 4, 5),
			rollup AS (
				SELECT account_id, hour, provider_kind, event_type, bounce_class, sum(n)::bigint
				FROM message_event_account_hourly GROUP BY 1, 2, 3, 4, 5 HAVING sum(n) <> 0)
			SELECT count(*), (SELECT count(*) FROM recount) FROM (
				(SELECT * FROM recount EXCEPT ALL SELECT * FROM rollup)
				UNION ALL (SELECT * FROM rollup EXCEPT ALL SELECT * FROM recount)) diff`,
		"domain daily": `
			WITH recount AS (
				SELECT account_id, domain, (occurred_at AT TIME ZONE 'UTC')::date AS day, domain_id, provider_id,
				       provider_kind, event_type, bounce_class, count(*) AS n
				FROM message_events GROUP BY 1, 2, 3, 4, 5, 6, 7, 8),
			rollup AS (
				SELECT account_id, domain, day, domain_id, provider_id, provider_kind, event_type, bounce_class, sum(n)::bigint
				FROM message_event_domain_daily GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 HAVING sum(n) <> 0)
			SELECT count(*), (SELECT count(*) FROM recount) FROM (
				(SELECT * FROM recount EXCEPT ALL SELECT * FROM rollup)
				UNION ALL (SELECT * FROM rollup EXCEPT ALL SELECT * FROM recount)) diff`,
		"account daily": `
			WITH recount AS (
				SELECT account_id, (occurred_at AT TIME ZONE 'UTC')::date AS day, provider_kind, event_type,
				       bounce_class, count(*) AS n
				FROM message_events GROUP BY 1, 2, 3, 4, 5),
			rollup AS (
				SELECT account_id, day, provider_kind, event_type, bounce_class, sum(n)::bigint
				FROM message_event_account_daily GROUP BY 1, 2, 3, 4, 5 HAVING sum(n) <> 0)
			SELECT count(*), (SELECT count(*) FROM recount) FROM (
				(SELECT * FROM recount EXCEPT ALL SELECT * FROM rollup)
				UNION ALL (SELECT * FROM rollup EXCEPT ALL SELECT * FROM recount)) diff`,
	} {
		var diff, rows int
		require.NoError(t, db.QueryRow(ctx, sql).Scan(&diff, &rows))
		require.NotZero(t, rows, name)
		require.Zero(t, diff, "%s rollup keys that differ from a recount of the raw rows", name)
	}
	var zeros int
	require.NoError(t, db.QueryRow(ctx, `SELECT (SELECT count(*) FROM message_event_domain_daily WHERE n = 0)
		+ (SELECT count(*) FROM message_event_account_daily WHERE n = 0)
		+ (SELECT count(*) FROM message_event_domain_hourly WHERE n = 0)
		+ (SELECT count(*) FROM message_event_account_hourly WHERE n = 0)`).Scan(&zeros))
	require.Zero(t, zeros, "rollup rows at zero are deleted")
}

// TestMessageRollupsEqualRecount feeds a randomized stream of provider
// payloads (two formats, every outcome and bounce class, event times on,
// near and between hour boundaries over six days) through the production
// normalisation, with failed job runs rolled back and retried, finished
// jobs run again, payloads re-run and events re-sent by providers; then
// deletes a domain (its events' domain_id set to NULL), a provider, an
// account, some raw rows, and prunes payloads (payload_id set to NULL).
// The transactions run on connections of three rollup slots, so keys are
// counted over several rows and decrements land in other slots than the
// increments. After each stage the rollup tables' sums over slots equal a
// recount of the raw rows, and
// every reader answers what raw rows say for windows that do not fall on
// hours.
func TestMessageRollupsEqualRecount(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	w := newRollupWorld(t, pool, 26, 4)
	for _, c := range dbtest.SlotConns(t, pool, 3) {
		w.writers = append(w.writers, c)
	}
	w.stream(t, 150)
	var striped int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM message_event_account_hourly
		GROUP BY account_id, hour, provider_kind, event_type, bounce_class HAVING count(*) > 1) k`).Scan(&striped))
	require.NotZero(t, striped, "keys counted in several slots")
	requireRollupsEqualRecount(t, pool)
	var dups int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM provider_payloads WHERE events < (
		SELECT count(*) FROM jsonb_array_elements(CASE WHEN jsonb_typeof(convert_from(body, 'UTF8')::jsonb) = 'array'
			THEN convert_from(body, 'UTF8')::jsonb ELSE jsonb_build_array(1) END))`).Scan(&dups))
	require.NotZero(t, dups, "the stream re-sent events")

	accounts := slices.Collect(func(yield func(uuid.UUID) bool) {
		for _, p := range w.providers {
			if p.kind == "mailgun" && !yield(p.account) {
				return
			}
		}
	})
	exec := func(sql string, args ...any) int64 {
		t.Helper()
		tag, err := w.writer().Exec(ctx, sql, args...)
		require.NoError(t, err)
		return tag.RowsAffected()
	}
	require.NotZero(t, exec(`DELETE FROM domains WHERE id = $1`, w.domains[accounts[0]][0].ID))
	require.NotZero(t, exec(`DELETE FROM domains WHERE id = $1`, w.domains[accounts[1]][1].ID))
	require.NotZero(t, exec(`DELETE FROM sending_providers WHERE id = $1`, w.providers[4].id))
	require.NotZero(t, exec(`DELETE FROM accounts WHERE id = $1`, accounts[3]))
	require.NotZero(t, exec(`DELETE FROM message_events WHERE account_id = $1 AND get_byte(uuid_send(id), 15) % 3 = 0`, accounts[2]))
	require.NotZero(t, exec(`DELETE FROM provider_payloads WHERE id IN (SELECT payload_id FROM message_events WHERE account_id = $1 LIMIT 20)`, accounts[0]))
	requireRollupsEqualRecount(t, pool)

	w.stream(t, 40) // and the triggers keep counting afterwards
	requireRollupsEqualRecount(t, pool)
	for _, a := range accounts[:3] {
		requireReadersMatchRaw(t, pool, w, a)
	}
}

// window draws [from, until) inside the stream's range: mostly not on hours,
// sometimes on an hour or on an event's own time, from under an hour to
// six days long (several whole days, read from the daily rollups).
func (w *rollupWorld) window(t *testing.T, db dbutil.Executor, account uuid.UUID) (from, until time.Time) {
	t.Helper()
	pick := func() time.Time {
		switch w.r.IntN(4) {
		case 0:
			return rollupEpoch.Add(time.Duration(1+w.r.IntN(6*24)) * time.Hour).Add(3 * time.Second)
		case 1:
			var at time.Time
			require.NoError(t, db.QueryRow(context.Background(), `SELECT occurred_at FROM message_events WHERE account_id = $1
				ORDER BY md5(id::text || $2) LIMIT 1`, account, fmt.Sprint(w.r.Int())).Scan(&at))
			return at
		default:
			return rollupEpoch.Add(time.Duration(w.r.Int64N(int64(6 * 24 * time.Hour))))
		}
	}
	from = pick()
	lengths := []time.Duration{time.Duration(w.r.Int64N(int64(time.Hour))), time.Duration(w.r.Int64N(int64(3 * time.Hour))),
		time.Duration(w.r.Int64N(int64(72 * time.Hour))), 48*time.Hour + time.Duration(w.r.Int64N(int64(96*time.Hour)))}
	return from, from.Add(lengths[w.r.IntN(len(lengths))])
}

// requireReadersMatchRaw compares each reader with a count of raw rows over
// random windows of account.
func requireReadersMatchRaw(t *testing.T, db dbutil.Executor, w *rollupWorld, account uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	raw := func(sql string, args ...any) map[string]int64 {
		t.Helper()
		rows, err := db.Query(ctx, sql, args...)
		require.NoError(t, err)
		out := map[string]int64{}
		for rows.Next() {
			var k string
			var n int64
			require.NoError(t, rows.Scan(&k, &n))
			out[k] = n
		}
		require.NoError(t, rows.Err())
		return out
	}
	names := []*string{nil, new(string), new(string)}
	*names[1], *names[2] = w.domains[account][1].Name, "elsewhere.example"
	for i := range 12 {
		from, until := w.window(t, db, account)
		for j, name := range slices.Concat(names, names) {
			day := from.Truncate(24 * time.Hour) // a chart's window, then the drawn one
			if j >= len(names) {
				day = from
			}
			got, err := providers.DailyVolume(ctx, db, account, name, day, until)
			require.NoError(t, err)
			have := map[string]int64{}
			for _, d := range got {
				have[d.Day.Format(time.DateOnly)+" "+d.EventType] += d.Count
			}
			want := raw(`SELECT to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') || ' ' || event_type, count(*)
				FROM message_events WHERE account_id = $1 AND occurred_at >= $2 AND occurred_at < $3
				AND ($4::text IS NULL OR domain = $4) GROUP BY 1`, account, day, until, name)
			require.Equal(t, want, have, "daily volume %d of %v from %s until %s", i, name, day, until)
		}

		types, err := providers.TypeBreakdown(ctx, db, account, from)
		require.NoError(t, err)
		have := map[string]int64{}
		for _, c := range types {
			have[c.EventType+" "+c.ProviderKind] += c.Count
		}
		require.Equal(t, raw(`SELECT event_type || ' ' || provider_kind, count(*) FROM message_events
			WHERE account_id = $1 AND occurred_at > $2 GROUP BY 1`, account, from), have, "type breakdown after %s", from)

		c, err := providers.AccountCounts(ctx, db, account, from)
		require.NoError(t, err)
		require.Equal(t, rawCounts(t, db, `account_id = $1 AND occurred_at >= $2`, account, from), c, "account counts from %s", from)

		for _, d := range w.domains[account] {
			for _, end := range []time.Time{until, {}} {
				per, err := providers.DomainCounts(ctx, db, account, d.ID, from, end)
				require.NoError(t, err)
				want := map[uuid.UUID]providers.Counts{}
				for _, p := range w.providers {
					cond := `domain_id = $1 AND provider_id = $2 AND occurred_at >= $3 AND ($4::timestamptz IS NULL OR occurred_at < $4)`
					var endArg *time.Time
					if !end.IsZero() {
						endArg = &end
					}
					var n int
					require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM message_events WHERE `+cond, d.ID, p.id, from, endArg).Scan(&n))
					if n > 0 {
						want[p.id] = rawCounts(t, db, cond, d.ID, p.id, from, endArg)
					}
				}
				require.Equal(t, want, per, "domain %s counts from %s until %s", d.Name, from, end)
			}
		}
	}
}

// rawCounts counts the raw rows matching cond the way the rates do.
func rawCounts(t *testing.T, db dbutil.Executor, cond string, args ...any) providers.Counts {
	t.Helper()
	var c providers.Counts
	require.NoError(t, db.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE event_type = 'sent'), count(*) FILTER (WHERE event_type = 'delivered'),
		       count(*) FILTER (WHERE event_type = 'bounced'), count(*) FILTER (WHERE event_type = 'bounced' AND bounce_class = 'hard'),
		       count(*) FILTER (WHERE event_type = 'complained')
		FROM message_events WHERE `+cond, args...).Scan(&c.Sent, &c.Delivered, &c.Bounced, &c.HardBounced, &c.Complained))
	return c
}

// TestMessageRollupWritersOfOneHourDoNotWait normalises a payload of one
// account in a transaction left open, then another payload of the same
// account, provider, outcome and hour on a connection of another rollup
// slot: the second transaction adds to its own slot's counters and commits
// while the first still holds its own (with one row per key it waited for
// the first's commit, and its lock_timeout ends that wait with an error).
// Both events are counted once both committed.
func TestMessageRollupWritersOfOneHourDoNotWait(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	w := newRollupWorld(t, pool, 3, 1)
	p := w.providers[0] // SendGrid, linked to one domain
	hour := time.Now().UTC().Truncate(time.Hour).Unix()
	payload := func(id string) uuid.UUID {
		body, _ := json.Marshal([]map[string]any{{"email": "r@rcpt.example", "event": "delivered",
			"timestamp": hour + 60, "sg_event_id": id, "sg_message_id": "m" + id}})
		return w.store(t, p, body)
	}
	conns := dbtest.SlotConns(t, pool, 2)

	first, err := conns[0].Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	_, err = providers.ProcessPayloads(ctx, first, []uuid.UUID{payload("first")}, time.Now())
	require.NoError(t, err)

	_, err = conns[1].Exec(ctx, `SET lock_timeout = '2s'`)
	require.NoError(t, err)
	second := payload("second")
	require.NoError(t, dbutil.WithTx(ctx, conns[1], func(ctx context.Context, tx pgx.Tx) error {
		res, err := providers.ProcessPayloads(ctx, tx, []uuid.UUID{second}, time.Now())
		if err == nil && len(res.Failures) > 0 {
			err = fmt.Errorf("payload failed: %+v", res.Failures)
		}
		return err
	}), "the second writer of the hour commits while the first is open")
	_, err = conns[1].Exec(ctx, `RESET lock_timeout`)
	require.NoError(t, err)

	require.NoError(t, first.Commit(ctx))
	requireRollupsEqualRecount(t, pool)
	c, err := providers.AccountCounts(ctx, pool, p.account, time.Unix(hour, 0).Add(-24*time.Hour))
	require.NoError(t, err)
	require.Equal(t, providers.Counts{Delivered: 2}, c)
}

// TestMessageRollupRowBackAtZeroIsDeleted: an event counted in one slot
// and deleted by a writer of another leaves that other slot's hourly rows
// at -1; the same writer's next event of the key brings them to zero, and
// the insert trigger deletes them (schema 0040) instead of keeping rows no
// raw event explains.
func TestMessageRollupRowBackAtZeroIsDeleted(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	w := newRollupWorld(t, pool, 3, 1)
	p := w.providers[0]
	hour := time.Now().UTC().Truncate(time.Hour).Unix()
	process := func(conn *pgxpool.Conn, id string) {
		t.Helper()
		body, _ := json.Marshal([]map[string]any{{"email": "r@rcpt.example", "event": "delivered",
			"timestamp": hour + 60, "sg_event_id": id, "sg_message_id": "m" + id}})
		payload := w.store(t, p, body)
		require.NoError(t, dbutil.WithTx(ctx, conn, func(ctx context.Context, tx pgx.Tx) error {
			res, err := providers.ProcessPayloads(ctx, tx, []uuid.UUID{payload}, time.Now())
			if err == nil && len(res.Failures) > 0 {
				err = fmt.Errorf("payload failed: %+v", res.Failures)
			}
			return err
		}))
	}
	conns := dbtest.SlotConns(t, pool, 2)
	process(conns[0], "first")
	_, err := conns[1].Exec(ctx, `DELETE FROM message_events WHERE account_id = $1`, p.account)
	require.NoError(t, err)
	var negative int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM message_event_account_hourly WHERE account_id = $1 AND n < 0`,
		p.account).Scan(&negative))
	require.Equal(t, 1, negative, "the deleting writer's slot holds -1")

	process(conns[1], "second")
	requireRollupsEqualRecount(t, pool)
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM message_event_account_hourly WHERE account_id = $1)
		+ (SELECT count(*) FROM message_event_domain_hourly WHERE account_id = $1)`, p.account).Scan(&rows))
	require.Equal(t, 2, rows, "one hourly row per table: the first writer's +1; the second writer's row went at zero")
}

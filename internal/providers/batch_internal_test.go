package providers

import (
	"encoding/json"

	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// isolationFixture is a fresh database with two accounts, a Mailgun
// provider each, and a trigger that refuses any row of table whose column
// holds "poison".
type isolationFixture struct {
	pool      dbutil.Executor
	providers [2]*dbsqlc.SendingProvider
}

func newIsolationFixture(t *testing.T, table, condition string) isolationFixture {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	var f isolationFixture
	f.pool = pool
	for i := range f.providers {
		p := &dbsqlc.SendingProvider{ID: uuid.New(), AccountID: uuid.New(), Kind: KindMailgun}
		exec(`INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')`, p.AccountID, p.AccountID.String()+"@isolation.example")
		exec(`INSERT INTO sending_providers (id, account_id, kind, label, secret_ciphertext, secret_key_id) VALUES ($1, $2, 'mailgun', 'mg', '\x00', 'k')`, p.ID, p.AccountID)
		f.providers[i] = p
	}
	exec(`CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF ` + condition + ` THEN RAISE EXCEPTION 'poisoned row refused'; END IF; RETURN NEW; END $$`)
	exec(`CREATE TRIGGER refuse_poison BEFORE INSERT ON ` + table + ` FOR EACH ROW EXECUTE FUNCTION refuse_poison()`)
	return f
}

type testBatchArgs struct {
	AccountID  uuid.UUID   `json:"account_id"`
	PayloadIDs []uuid.UUID `json:"payload_ids"`
}

func (testBatchArgs) Kind() string { return "test_provider_batch" }

// TestIngesterWriteIsolatesPayloads writes one ingress batch holding two
// accounts' requests, one of which the database refuses to store: that
// request alone fails; the others are stored and named by the batch's job.
func TestIngesterWriteIsolatesPayloads(t *testing.T) {
	t.Parallel()
	f := newIsolationFixture(t, "provider_payloads", `position('poison'::bytea in NEW.body) > 0`)
	ctx := context.Background()
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{})
	require.NoError(t, err)
	g := &Ingester{DB: f.pool, River: client, BatchJob: func(account uuid.UUID, ids []uuid.UUID) river.JobArgs {
		return testBatchArgs{AccountID: account, PayloadIDs: ids}
	}}
	call := func(p *dbsqlc.SendingProvider, key, body string) *ingestCall {
		return &ingestCall{in: Ingest{Provider: p, Verified: Verified{ReplayKey: key}, Body: []byte(body), Now: time.Now()}, done: make(chan struct{})}
	}
	batch := []*ingestCall{
		call(f.providers[0], "token:1", `{"ok":1}`),
		call(f.providers[1], "token:2", `{"poison":true}`),
		call(f.providers[0], "token:3", `{"ok":3}`),
	}
	require.NoError(t, g.write(ctx, batch))
	require.ErrorContains(t, batch[1].err, "poisoned row refused")
	var stored []uuid.UUID
	for _, i := range []int{0, 2} {
		require.NoError(t, batch[i].err)
		require.False(t, batch[i].out.Duplicate)
		stored = append(stored, batch[i].out.PayloadID)
	}
	var n int
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*) FROM provider_payloads`).Scan(&n))
	require.Equal(t, 2, n)
	var args []byte
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT args FROM river_job WHERE kind = 'test_provider_batch'`).Scan(&args))
	for _, id := range stored {
		require.Contains(t, string(args), id.String())
	}
}

// TestIngesterWriteQueuesOneJobPerAccount writes one ingress batch
// holding two accounts' requests, interleaved: one transaction stores them
// all, and one job per account is queued, naming that account and only
// its own payloads, so that each is bounded by its own account (Gate).
func TestIngesterWriteQueuesOneJobPerAccount(t *testing.T) {
	t.Parallel()
	f := newIsolationFixture(t, "provider_payloads", `false`)
	ctx := context.Background()
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{})
	require.NoError(t, err)
	g := &Ingester{DB: f.pool, River: client, BatchJob: func(account uuid.UUID, ids []uuid.UUID) river.JobArgs {
		return testBatchArgs{AccountID: account, PayloadIDs: ids}
	}}
	call := func(p *dbsqlc.SendingProvider, key string) *ingestCall {
		return &ingestCall{in: Ingest{Provider: p, Verified: Verified{ReplayKey: key}, Body: []byte(`{"k":"` + key + `"}`), Now: time.Now()}, done: make(chan struct{})}
	}
	batch := []*ingestCall{
		call(f.providers[0], "token:a1"),
		call(f.providers[1], "token:b1"),
		call(f.providers[0], "token:a2"),
		call(f.providers[1], "token:b2"),
	}
	require.NoError(t, g.write(ctx, batch))
	want := map[uuid.UUID][]uuid.UUID{}
	for _, c := range batch {
		require.NoError(t, c.err)
		want[c.in.Provider.AccountID] = append(want[c.in.Provider.AccountID], c.out.PayloadID)
	}
	rows, err := f.pool.Query(ctx, `SELECT args FROM river_job WHERE kind = 'test_provider_batch' ORDER BY id`)
	require.NoError(t, err)
	all, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	require.NoError(t, err)
	require.Len(t, all, 2, "one job per account of the batch")
	got := map[uuid.UUID][]uuid.UUID{}
	for _, raw := range all {
		var a testBatchArgs
		require.NoError(t, json.Unmarshal(raw, &a))
		require.NotEqual(t, uuid.Nil, a.AccountID)
		got[a.AccountID] = a.PayloadIDs
	}
	require.Equal(t, want, got, "each job names its account and only that account's payloads")
}

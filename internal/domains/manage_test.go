package domains

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/billing"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/plans"
)

// noMint mints nothing (a server without a reporting keyring).
type noMint struct{ err error }

func (m noMint) Mint(context.Context, dbsqlc.DBTX, uuid.UUID, uuid.UUID, string) error { return m.err }

func insertTestAccount(t *testing.T, db dbutil.Executor) uuid.UUID {
	t.Helper()
	account := uuid.Must(uuid.NewV7())
	_, err := db.Exec(context.Background(), "INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')", account, account.String()+"@example.com")
	require.NoError(t, err)
	return account
}

// checkJobs counts the domain's queued check jobs.
func checkJobs(t *testing.T, db dbutil.Executor, domainID uuid.UUID) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(context.Background(),
		"SELECT count(*) FROM river_job WHERE kind = 'domain_check' AND args->>'domain_id' = $1", domainID.String()).Scan(&n))
	return n
}

func newManageTest(t *testing.T) (context.Context, dbutil.Executor, *river.Client[pgx.Tx]) {
	t.Helper()
	pool, _ := dbtest.NewDB(t)
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	return context.Background(), pool, client
}

func TestCreateQueuesTheFirstCheckInItsTransaction(t *testing.T) {
	t.Parallel()
	ctx, db, client := newManageTest(t)
	account := insertTestAccount(t, db)
	now := time.Now()

	row, err := Create(ctx, db, client, noMint{}, account, New{Name: "Example.COM.", Tags: []string{" a ", "a", "b"}}, "", now)
	require.NoError(t, err)
	require.Equal(t, "example.com", row.Name)
	require.Equal(t, []string{"a", "b"}, row.Tags)
	require.Equal(t, 1, checkJobs(t, db, row.ID))

	// A step after the queueing fails: the domain and its job go together.
	_, err = Create(ctx, db, client, noMint{err: errors.New("keyring down")}, account, New{Name: "rolled-back.example"}, "", now)
	require.ErrorContains(t, err, "keyring down")
	_, err = Get(ctx, db, account, "rolled-back.example")
	require.ErrorIs(t, err, ErrNotFound)
	var jobs int
	require.NoError(t, db.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'domain_check'").Scan(&jobs))
	require.Equal(t, 1, jobs, "the rolled-back create left a job")
}

func TestCreateRefuses(t *testing.T) {
	t.Parallel()
	ctx, db, client := newManageTest(t)
	account := insertTestAccount(t, db)
	now := time.Now()
	first, err := Create(ctx, db, client, noMint{}, account, New{Name: "dup.example"}, "", now)
	require.NoError(t, err)

	t.Run("Duplicate", func(t *testing.T) {
		_, err := Create(ctx, db, client, noMint{}, account, New{Name: "DUP.example."}, "", now)
		require.ErrorIs(t, err, ErrExists)
		var exists *ExistsError
		require.ErrorAs(t, err, &exists)
		require.Equal(t, "the account already monitors dup.example", exists.Error())
		require.Equal(t, 1, checkJobs(t, db, first.ID))
	})
	t.Run("BadInput", func(t *testing.T) {
		var fe *FieldError
		_, err := Create(ctx, db, client, noMint{}, account, New{Name: "com"}, "", now)
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "domain", fe.Field)
		_, err = Create(ctx, db, client, noMint{}, account, New{Name: "ok.example", Tags: []string{"x", " "}}, "", now)
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "tags[1]", fe.Field)
	})
	t.Run("PlanLimit", func(t *testing.T) {
		full := insertTestAccount(t, db)
		free, _, _ := plans.Get(plans.Free).Limit(plans.LimitDomains)
		for i := range free {
			_, err := Create(ctx, db, client, noMint{}, full, New{Name: fmt.Sprintf("d%d.example", i)}, plans.Free, now)
			require.NoError(t, err)
		}
		_, err := Create(ctx, db, client, noMint{}, full, New{Name: "one-more.example"}, plans.Free, now)
		var le *billing.LimitError
		require.ErrorAs(t, err, &le)
		_, err = Get(ctx, db, full, "one-more.example")
		require.ErrorIs(t, err, ErrNotFound)
	})
}

func TestAnotherAccountsDomainIsNotFound(t *testing.T) {
	t.Parallel()
	ctx, db, client := newManageTest(t)
	owner, other := insertTestAccount(t, db), insertTestAccount(t, db)
	row, err := Create(ctx, db, client, noMint{}, owner, New{Name: "owned.example"}, "", time.Now())
	require.NoError(t, err)

	_, err = Get(ctx, db, other, "owned.example")
	require.ErrorIs(t, err, ErrNotFound)
	tags := []string{"stolen"}
	_, err = Update(ctx, db, client, other, "owned.example", Change{Tags: &tags})
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorIs(t, Delete(ctx, db, other, "owned.example"), ErrNotFound)
	_, err = Get(ctx, db, owner, "not a name")
	require.ErrorIs(t, err, ErrNotFound)

	got, err := Get(ctx, db, owner, "OWNED.example")
	require.NoError(t, err)
	require.Equal(t, row.ID, got.ID)
	require.Empty(t, got.Tags)
	require.NoError(t, Delete(ctx, db, owner, "owned.example"))
	require.ErrorIs(t, Delete(ctx, db, owner, "owned.example"), ErrNotFound)
}

func TestSelectorChangeForgetsTheDKIMResult(t *testing.T) {
	t.Parallel()
	ctx, db, client := newManageTest(t)
	account := insertTestAccount(t, db)
	row, err := Create(ctx, db, client, noMint{}, account, New{Name: "sel.example"}, "", time.Now())
	require.NoError(t, err)
	setKnown := func() {
		_, err := db.Exec(ctx, `UPDATE domains SET known = '{"dkim": {"status": "pass"}, "spf": {"status": "pass"}}' WHERE id = $1`, row.ID)
		require.NoError(t, err)
	}
	knownChecks := func() []string {
		var keys []string
		require.NoError(t, db.QueryRow(ctx, "SELECT coalesce(array_agg(k ORDER BY k), '{}') FROM domains, jsonb_object_keys(known) k WHERE id = $1", row.ID).Scan(&keys))
		return keys
	}
	setKnown()

	// Tags only: nothing forgotten, nothing queued.
	tags := []string{"t"}
	_, err = Update(ctx, db, client, account, "sel.example", Change{Tags: &tags})
	require.NoError(t, err)
	require.Equal(t, []string{"dkim", "spf"}, knownChecks())
	require.Equal(t, 1, checkJobs(t, db, row.ID))

	// New selectors: DKIM is a new baseline and a check is queued.
	sels := []string{"S1", "s1", "k1.mail"}
	got, err := Update(ctx, db, client, account, "sel.example", Change{DKIMSelectors: &sels})
	require.NoError(t, err)
	require.Equal(t, []string{"s1", "k1.mail"}, got.DkimSelectors)
	require.Equal(t, []string{"spf"}, knownChecks())
	require.Equal(t, 2, checkJobs(t, db, row.ID))

	// The same selectors again change nothing.
	setKnown()
	_, err = Update(ctx, db, client, account, "sel.example", Change{DKIMSelectors: &sels})
	require.NoError(t, err)
	require.Equal(t, []string{"dkim", "spf"}, knownChecks())
	require.Equal(t, 2, checkJobs(t, db, row.ID))

	// A refused selector is a field error and changes nothing.
	bad := []string{"ok", "-bad"}
	_, err = Update(ctx, db, client, account, "sel.example", Change{DKIMSelectors: &bad})
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "dkim_selectors[1]", fe.Field)
}

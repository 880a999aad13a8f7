package dataapi

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

// TestPagesNeverServeAnotherSubjectsRows runs the events cache over the
// builder with its account filter removed: what the cache serves is only
// ever what RLS returned to the same subject, and a new event shows at once.
func TestPagesNeverServeAnotherSubjectsRows(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	alice, bob := seed(t, db, 3), seed(t, db, 4)
	pages := NewPages(time.Minute, 1<<20)
	var hits, misses int
	pages.Observe = func(hit bool) {
		if hit {
			hits++
		} else {
			misses++
		}
	}
	r := &Runner{DB: db, Pages: pages, opts: buildOptions{omitAccountFilter: true}}
	read := func(who tenant, account string, rawQuery string) []map[string]any {
		t.Helper()
		req, err := Parse(rawQuery)
		require.NoError(t, err)
		res, err := r.Run(context.Background(), Call{Table: "events", AccountID: account, Claims: who.claims, Request: req, RawQuery: rawQuery})
		require.NoError(t, err)
		rows := rowsOf(t, res)
		for _, row := range rows {
			require.Equal(t, who.id.String(), row["account_id"], "a row of another subject")
		}
		return rows
	}
	const q = "limit=50&order=created_at.desc"

	require.Len(t, read(alice, alice.id.String(), q), 3)
	require.Len(t, read(alice, alice.id.String(), q), 3)
	require.Equal(t, 1, hits, "the second read is served from the cache")

	// Bob's identical request is his own entry, filled under his claims.
	require.Len(t, read(bob, bob.id.String(), q), 4)
	// Claims naming Bob with Alice's account id (a bug in the caller) are
	// not cached, and never get Alice's cached page.
	before := hits + misses
	require.Len(t, read(bob, alice.id.String(), q), 4)
	require.Len(t, read(bob, alice.id.String(), q), 4)
	require.Equal(t, before, hits+misses)
	require.Equal(t, 1, hits)

	// A new event of Alice's is seen at once: the newest event changed.
	_, err := db.Exec(context.Background(), `INSERT INTO events (id, account_id, event_type, severity, payload, rendered)
		VALUES ($1, $2, 'bounce_spike', 'info', '{}', '{}')`, uuid.Must(uuid.NewV7()), alice.id)
	require.NoError(t, err)
	require.Len(t, read(alice, alice.id.String(), q), 4)
	require.Len(t, read(alice, alice.id.String(), q), 4)
	require.Equal(t, 2, hits)

	// Only first pages of the events table are cached.
	before = hits + misses
	read(alice, alice.id.String(), q+"&offset=1")
	require.Equal(t, before, hits+misses)

	// Claims without a subject are never cached (and RLS shows nothing).
	nobody := tenant{id: uuid.Must(uuid.NewV7()), claims: []byte(`{"role":"authenticated"}`)}
	require.Empty(t, read(nobody, alice.id.String(), q))
	require.Equal(t, before, hits+misses)
}

func TestPagesExpireAndStayWithinTheirMemory(t *testing.T) {
	t.Parallel()
	db := dbtest.Tx(t)
	alice := seed(t, db, 2)
	now := time.Now()
	pages := NewPages(time.Second, 1<<20)
	pages.now = func() time.Time { return now }
	hits := 0
	pages.Observe = func(hit bool) {
		if hit {
			hits++
		}
	}
	r := &Runner{DB: db, Pages: pages}
	for range 2 {
		_, err := run2(t, r, alice, "limit=10")
		require.NoError(t, err)
	}
	require.Equal(t, 1, hits)
	now = now.Add(time.Second)
	_, err := run2(t, r, alice, "limit=10")
	require.NoError(t, err)
	require.Equal(t, 1, hits, "an entry older than the TTL is not served")

	// Many distinct queries: the cache keeps within its bytes.
	small := NewPages(time.Minute, 4096)
	r.Pages = small
	for i := 1; i <= 50; i++ {
		_, err := run2(t, r, alice, "select=id,event_type&limit="+strconv.Itoa(i))
		require.NoError(t, err)
	}
	small.mu.Lock()
	defer small.mu.Unlock()
	require.LessOrEqual(t, small.bytes, 4096)
	require.NotEmpty(t, small.entries)
	require.Nil(t, NewPages(0, 1), "TTL 0 turns the cache off")
}

func run2(t *testing.T, r *Runner, who tenant, rawQuery string) (*Result, error) {
	t.Helper()
	req, err := Parse(rawQuery)
	if err != nil {
		return nil, err
	}
	return r.Run(context.Background(), Call{Table: "events", AccountID: who.id.String(), Claims: who.claims, Request: req, RawQuery: rawQuery})
}

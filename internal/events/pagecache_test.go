package events_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// pageIDs decodes the ids of a rendered page.
func pageIDs(t *testing.T, items [][]byte) []uuid.UUID {
	t.Helper()
	out := make([]uuid.UUID, len(items))
	for i, it := range items {
		var e struct {
			ID uuid.UUID `json:"id"`
		}
		require.NoError(t, json.Unmarshal(it, &e))
		out[i] = e.ID
	}
	return out
}

type lookups struct {
	mu        sync.Mutex
	hit, miss int
}

func (l *lookups) observe(hit bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if hit {
		l.hit++
	} else {
		l.miss++
	}
}

func (l *lookups) counts() (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hit, l.miss
}

func TestFirstPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	em := newEmitter(t)
	account, other := testfactory.Account(t, tx), testfactory.Account(t, tx)
	emit := func(acct uuid.UUID, typ string, at time.Time) uuid.UUID {
		t.Helper()
		ev := events.Event{AccountID: acct, Type: typ, At: at, Payload: map[string]any{
			"receiver_id": uuid.New(), "message_id": uuid.New(), "channel": "email"}}
		if typ == events.TypeHealthScoreChanged {
			ev.Domain = "example.com"
			ev.Payload = map[string]any{"domain": "example.com", "previous_score": 80, "score": 70, "delta": -10}
		}
		row, err := em.Emit(ctx, tx, ev)
		require.NoError(t, err)
		return row.ID
	}
	now := time.Now()
	base := now.Add(-time.Hour)
	var ids []uuid.UUID
	for i := range 5 {
		ids = append(ids, emit(account, events.TypeReceiverMessageReceived, base.Add(time.Duration(i)*time.Minute)))
	}
	emit(other, events.TypeReceiverMessageReceived, now)

	clock := now
	c := events.NewFirstPages(time.Second, 1<<20)
	events.SetPageCacheClock(c, func() time.Time { return clock })
	var l lookups
	c.Observe = l.observe
	first := events.ListFilter{AccountID: account, Order: events.OrderDesc, Limit: 3}

	items, next, err := c.ListRendered(ctx, tx, first)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{ids[4], ids[3], ids[2]}, pageIDs(t, items))
	require.NotNil(t, next)
	items2, next2, err := c.ListRendered(ctx, tx, first)
	require.NoError(t, err)
	require.Equal(t, items, items2)
	require.Equal(t, next, next2, "the cursor is cached with its page")
	hit, miss := l.counts()
	require.Equal(t, 1, hit)
	require.Equal(t, 1, miss)

	t.Run("ANewEventShowsAtOnce", func(t *testing.T) {
		newest := emit(account, events.TypeReceiverMessageReceived, base.Add(10*time.Minute))
		items, _, err := c.ListRendered(ctx, tx, first)
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{newest, ids[4], ids[3]}, pageIDs(t, items))
		ids = append(ids, newest)
	})

	t.Run("AnotherAccountsEventsDoNotMatter", func(t *testing.T) {
		_, missBefore := l.counts()
		emit(other, events.TypeReceiverMessageReceived, now.Add(time.Second))
		items, _, err := c.ListRendered(ctx, tx, events.ListFilter{AccountID: other, Order: events.OrderDesc, Limit: 3})
		require.NoError(t, err)
		require.Len(t, items, 2)
		_, _, err = c.ListRendered(ctx, tx, first)
		require.NoError(t, err)
		_, missAfter := l.counts()
		require.Equal(t, missBefore+1, missAfter, "the other account's listing missed; this one's page was still good")
	})

	t.Run("ALateCommitShowsWithinTheTTL", func(t *testing.T) {
		// An event raised before the newest one but committed after it
		// is not seen by the newest-event check: it shows once the
		// cached page expires.
		late := emit(account, events.TypeReceiverMessageReceived, base.Add(9*time.Minute))
		items, _, err := c.ListRendered(ctx, tx, first)
		require.NoError(t, err)
		require.NotContains(t, pageIDs(t, items), late, "served from the cache within the TTL")
		clock = clock.Add(time.Second)
		items, _, err = c.ListRendered(ctx, tx, first)
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{ids[5], late, ids[4]}, pageIDs(t, items))
	})

	t.Run("FiltersAndLimitsAreCachedApart", func(t *testing.T) {
		health := emit(account, events.TypeHealthScoreChanged, base.Add(20*time.Minute))
		byType := first
		byType.Type = events.TypeReceiverMessageReceived
		items, _, err := c.ListRendered(ctx, tx, byType)
		require.NoError(t, err)
		require.NotContains(t, pageIDs(t, items), health)
		items, _, err = c.ListRendered(ctx, tx, first)
		require.NoError(t, err)
		require.Equal(t, health, pageIDs(t, items)[0])
		bigger := first
		bigger.Limit = 10
		items, _, err = c.ListRendered(ctx, tx, bigger)
		require.NoError(t, err)
		require.Len(t, items, 8)
	})

	t.Run("OtherPagesAreNeverCached", func(t *testing.T) {
		hitBefore, missBefore := l.counts()
		since := base
		for _, f := range []events.ListFilter{
			{AccountID: account, Order: events.OrderAsc, Limit: 3},
			{AccountID: account, Order: events.OrderDesc, Limit: 3, Since: &since},
			{AccountID: account, Order: events.OrderDesc, Limit: 3, After: next},
			{AccountID: account, Order: events.OrderDesc, Limit: 3, AlertsOnly: true},
		} {
			want, _, err := events.ListRendered(ctx, tx, f)
			require.NoError(t, err)
			got, _, err := c.ListRendered(ctx, tx, f)
			require.NoError(t, err)
			require.Equal(t, want, got)
		}
		hitAfter, missAfter := l.counts()
		require.Equal(t, hitBefore, hitAfter)
		require.Equal(t, missBefore, missAfter, "no lookup: read straight through")
	})

	t.Run("NilCacheReadsThrough", func(t *testing.T) {
		var none *events.FirstPages
		want, _, err := events.ListRendered(ctx, tx, first)
		require.NoError(t, err)
		got, _, err := none.ListRendered(ctx, tx, first)
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Nil(t, events.NewFirstPages(0, 1<<20), "TTL 0 turns the cache off")
		require.Nil(t, events.NewFirstPages(time.Second, 0), "no memory turns the cache off")
	})
}

func TestFirstPagesStayWithinTheirMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	em := newEmitter(t)
	accounts := make([]uuid.UUID, 20)
	for i := range accounts {
		accounts[i] = testfactory.Account(t, tx)
		for range 3 {
			_, err := em.Emit(ctx, tx, events.Event{AccountID: accounts[i], Type: events.TypeReceiverMessageReceived,
				Payload: map[string]any{"receiver_id": uuid.New(), "message_id": uuid.New(), "channel": "email"}})
			require.NoError(t, err)
		}
	}
	one, _, err := events.ListRendered(ctx, tx, events.ListFilter{AccountID: accounts[0], Order: events.OrderDesc, Limit: 3})
	require.NoError(t, err)
	pageSize := 0
	for _, it := range one {
		pageSize += len(it)
	}
	budget := pageSize * 8 // room for eight pages; a page is at most 1/8 of it
	c := events.NewFirstPages(time.Minute, budget)
	for _, a := range accounts {
		items, _, err := c.ListRendered(ctx, tx, events.ListFilter{AccountID: a, Order: events.OrderDesc, Limit: 3})
		require.NoError(t, err)
		require.Len(t, items, 3, "an evicting cache still answers right")
		require.LessOrEqual(t, c.Bytes(), budget)
	}
	require.Greater(t, c.Bytes(), 0)

	tiny := events.NewFirstPages(time.Minute, pageSize) // a page is more than 1/8 of it: never kept
	_, _, err = tiny.ListRendered(ctx, tx, events.ListFilter{AccountID: accounts[0], Order: events.OrderDesc, Limit: 3})
	require.NoError(t, err)
	require.Zero(t, tiny.Bytes())
}

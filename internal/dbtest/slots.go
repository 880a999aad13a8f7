package dbtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SlotConns holds n connections of pool whose rollup slots
// (mailwatch_rollup_slot(), schema 0038: the backend pid modulo 8) all
// differ, until the test ends: writers on them update different rows of a
// striped counter.
func SlotConns(t testing.TB, pool *pgxpool.Pool, n int) []*pgxpool.Conn {
	t.Helper()
	ctx := context.Background()
	var out, others []*pgxpool.Conn
	seen := map[int16]bool{}
	for len(out) < n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatalf("error acquiring a connection: %v", err)
		}
		var slot int16
		if err := c.QueryRow(ctx, `SELECT mailwatch_rollup_slot()`).Scan(&slot); err != nil {
			t.Fatalf("error reading a connection's rollup slot: %v", err)
		}
		if seen[slot] {
			others = append(others, c)
			continue
		}
		seen[slot] = true
		out = append(out, c)
	}
	for _, c := range others {
		c.Release()
	}
	t.Cleanup(func() {
		for _, c := range out {
			c.Release()
		}
	})
	return out
}

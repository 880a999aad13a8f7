package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/partitions"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

func TestCursor(t *testing.T) {
	t.Parallel()
	c := events.Cursor{At: time.Date(2026, 3, 1, 12, 0, 0, 123456000, time.UTC), ID: uuid.Must(uuid.NewV7())}
	got, err := events.ParseCursor(c.String())
	require.NoError(t, err)
	require.Equal(t, c, got)
	require.NotContains(t, c.String(), "=", "URL-safe, unpadded")

	for _, bad := range []string{"", "x", "!!!!", c.String()[:10], c.String() + "AA", "B" + c.String()[1:]} {
		_, err := events.ParseCursor(bad)
		require.ErrorIs(t, err, events.ErrMalformedCursor, "%q", bad)
	}
}

func FuzzParseCursor(f *testing.F) {
	f.Add(events.Cursor{At: time.Unix(1700000000, 0), ID: uuid.New()}.String())
	f.Add("")
	f.Add("AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := events.ParseCursor(s)
		if err != nil {
			return
		}
		// Whatever parses re-encodes to a token that parses to the same position.
		again, err := events.ParseCursor(c.String())
		require.NoError(t, err)
		require.Equal(t, c, again)
	})
}

// TestListQueryPlans checks that every listing variant is an index range
// scan bounded by account_id, in index order (no Sort), with no sequential
// scan of events: a listing never reads other accounts' events. The plans
// are taken over a realistic table (many accounts, ANALYZEd), both as
// custom plans and as the generic plans pgx's prepared statements end up
// with.
func TestListQueryPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := dbtest.NewDB(t)

	const accounts, perAccount = 60, 400
	ids := make([]uuid.UUID, accounts)
	for i := range ids {
		ids[i] = testfactory.Account(t, pool)
	}
	typesList := events.Types()
	base := time.Now().UTC().Add(-30 * 24 * time.Hour)
	// The events span 30 days of weekly partitions, made as time went by.
	for at := base; at.Before(time.Now()); at = at.AddDate(0, 0, 7) {
		_, err := partitions.MaintainSpecs(ctx, pool, at, partitions.Settings{}, []partitions.Spec{eventsSpec(t)})
		require.NoError(t, err)
	}
	step := 30 * 24 * time.Hour / perAccount
	rows := make([][]any, 0, accounts*perAccount)
	for a, acct := range ids {
		for i := 0; i < perAccount; i++ {
			typ := typesList[(a+i)%len(typesList)]
			sev := "info"
			var ackAt any
			switch {
			case i%50 == 0:
				sev = "critical"
				if i%100 == 0 {
					ackAt = base
				}
			case i%5 == 0:
				sev = "warning"
			}
			at := base.Add(time.Duration(i) * step)
			id := uuid.Must(uuid.NewV7())
			r := events.Rendered{ID: id, Type: typ.Name, Payload: typ.Example, CreatedAt: at, Severity: sev, Tags: []string{}}
			rows = append(rows, []any{id, acct, typ.Name, sev, []string{}, json.RawMessage(typ.Example), string(r.AppendJSON(nil)), at, ackAt})
		}
	}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"events"},
		[]string{"id", "account_id", "event_type", "severity", "tags", "payload", "rendered", "created_at", "acknowledged_at"}, pgx.CopyFromRows(rows))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "ANALYZE events")
	require.NoError(t, err)

	since := base.Add(100 * step)
	cursor := &events.Cursor{At: base.Add(200 * step), ID: uuid.Must(uuid.NewV7())}
	yes, no := true, false
	for _, mode := range []string{"auto", "force_generic_plan"} {
		for _, typ := range []string{"", events.TypeBounceSpike} {
			for _, s := range []*time.Time{nil, &since} {
				for _, after := range []*events.Cursor{nil, cursor} {
					for _, order := range []events.Order{events.OrderDesc, events.OrderAsc} {
						for _, alerts := range []string{"", "all", "true", "false"} {
							if alerts != "" && typ != "" {
								continue // the alerts listing has no type filter
							}
							f := events.ListFilter{AccountID: ids[7], Type: typ, Since: s, After: after, Order: order, Limit: 50}
							switch alerts {
							case "all":
								f.AlertsOnly = true
							case "true":
								f.AlertsOnly, f.Acknowledged = true, &yes
							case "false":
								f.AlertsOnly, f.Acknowledged = true, &no
							}
							name := fmt.Sprintf("%s/type=%q/since=%v/cursor=%v/%s/alerts=%s", mode, typ, s != nil, after != nil, order, alerts)
							t.Run(name, func(t *testing.T) {
								checkPlan(t, pool, mode, f)
							})
						}
					}
				}
			}
		}
	}
}

type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	IndexCond    string     `json:"Index Cond"`
	Plans        []planNode `json:"Plans"`
}

func checkPlan(t *testing.T, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, mode string, f events.ListFilter) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode)
	require.NoError(t, err)
	sql, args := events.ListQuery(f)
	var raw []byte
	require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw))
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &out))
	var scans []planNode
	var walk func(n planNode)
	walk = func(n planNode) {
		// The index gives the order within a partition. Across partitions the
		// planner merges them in order, or, when it expects few rows, sorts
		// the partitions' rows; never the rows of one index scan.
		if n.NodeType == "Sort" {
			require.Len(t, n.Plans, 1, "%s", raw)
			require.Equal(t, "Append", n.Plans[0].NodeType, "the index gives the order: %s", raw)
		}
		if strings.HasPrefix(n.RelationName, "events") || strings.Contains(n.NodeType, "Index") {
			scans = append(scans, n)
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(out[0].Plan)
	// One index scan per partition of the listing's range, merged in order.
	require.NotEmpty(t, scans, "%s", raw)
	for _, scan := range scans {
		if scan.NodeType == "Seq Scan" {
			// The planner may scan an empty partition (a week ahead): it
			// reads nothing.
			var rows int
			require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{scan.RelationName}.Sanitize()).Scan(&rows))
			require.Zero(t, rows, "a sequential scan of %s: %s", scan.RelationName, raw)
			continue
		}
		require.Contains(t, []string{"Index Scan", "Index Scan Backward", "Index Only Scan"}, scan.NodeType, "%s", raw)
		require.Contains(t, scan.IndexCond, "account_id = ", "the scan is bounded by the account: %s", raw)
		index := parentIndex(t, tx, scan.IndexName)
		if f.Acknowledged != nil && !*f.Acknowledged {
			require.Equal(t, "events_account_unacked_alerts_idx", index)
		}
		if f.Type != "" {
			require.Equal(t, "events_account_type_created_idx", index)
		}
	}
}

// parentIndex is the partitioned table's index a partition's index belongs
// to.
func parentIndex(t *testing.T, tx pgx.Tx, name string) string {
	t.Helper()
	var parent string
	require.NoError(t, tx.QueryRow(context.Background(), `SELECT coalesce((SELECT p.relname::text FROM pg_inherits i
		JOIN pg_class p ON p.oid = i.inhparent WHERE i.inhrelid = to_regclass($1)), $1)`, name).Scan(&parent))
	return parent
}

func eventsSpec(t *testing.T) partitions.Spec {
	t.Helper()
	s, ok := partitions.Lookup("events")
	require.True(t, ok)
	return s
}

func TestList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.Tx(t)
	em := newEmitter(t)
	a, b := testfactory.Account(t, db), testfactory.Account(t, db)
	at := time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC)
	ex, _ := events.Lookup(events.TypeDMARCReportReceived)
	var want []uuid.UUID
	for i := 0; i < 7; i++ {
		// Pairs of equal timestamps: the id breaks the tie.
		row, err := em.Emit(ctx, db, events.Event{AccountID: a, Type: ex.Name, Payload: ex.Example, At: at.Add(time.Duration(i/2) * time.Second)})
		require.NoError(t, err)
		want = append(want, row.ID)
		_, err = em.Emit(ctx, db, events.Event{AccountID: b, Type: ex.Name, Payload: ex.Example, At: at.Add(time.Duration(i/2) * time.Second)})
		require.NoError(t, err)
	}
	collect := func(order events.Order, limit int) []uuid.UUID {
		var got []uuid.UUID
		var after *events.Cursor
		for pages := 0; ; pages++ {
			require.Less(t, pages, 20)
			rows, next, err := events.List(ctx, db, events.ListFilter{AccountID: a, Order: order, Limit: limit, After: after})
			require.NoError(t, err)
			require.LessOrEqual(t, len(rows), limit)
			for _, r := range rows {
				require.Equal(t, a, r.AccountID)
				got = append(got, r.ID)
			}
			if next == nil {
				return got
			}
			after = next
		}
	}
	asc := sortedByTimeThenID(t, db, want)
	for _, limit := range []int{1, 2, 3, 7, 50} {
		require.Equal(t, asc, collect(events.OrderAsc, limit), "limit %d", limit)
		require.Equal(t, reversed(asc), collect(events.OrderDesc, limit), "limit %d", limit)
	}
}

func sortedByTimeThenID(t *testing.T, db pgx.Tx, ids []uuid.UUID) []uuid.UUID {
	t.Helper()
	rows, err := db.Query(context.Background(), "SELECT id FROM events WHERE id = ANY($1) ORDER BY created_at, id", ids)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	return out
}

func reversed(in []uuid.UUID) []uuid.UUID {
	out := make([]uuid.UUID, len(in))
	for i, v := range in {
		out[len(in)-1-i] = v
	}
	return out
}

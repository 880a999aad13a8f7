package accounts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// ErrNotDeleting is returned by Purge for an account nobody asked to
// delete: a purge run by hand (River UI) on a live account does nothing.
var ErrNotDeleting = errors.New("the account is not marked for deletion")

// DefaultPurgeBatch is how many rows one purge statement removes: each
// statement is its own short transaction, so no lock is held for long and
// other accounts' requests carry on.
const DefaultPurgeBatch = 1000

// JobTag is the River tag of jobs that belong to one account (delivery
// jobs carry it): Purge cancels those that have not run yet.
func JobTag(id uuid.UUID) string { return "account-" + id.String() }

// PurgeOptions tune Purge.
type PurgeOptions struct {
	// Batch is the rows per statement; DefaultPurgeBatch when 0.
	Batch int
	// Deadline ends a run early (Done false) so that a River job stays within
	// its timeout; the next run continues where this one stopped. Zero: none.
	Deadline time.Time
}

// PurgeResult says what one Purge run did.
type PurgeResult struct {
	// Done: the account row is gone (it was deleted now or before).
	Done bool
	// Rows counts the rows deleted per table (and "river_job" cancelled jobs,
	// "sms_numbers" released numbers).
	Rows map[string]int64
}

// Purge removes everything an account marked for deletion owns, in
// batches, then the account row. It converges: a run cut short, failed or
// repeated by an operator continues from whatever is left, and a run for
// an account already gone does nothing.
//
// Order: the account's River jobs that have not started are cancelled (a
// running one finds its rows gone and ends); its receivers' SMS numbers go
// back to the pool; its DNS connections (sealed provider credentials) are
// deleted; then every table of the public schema with an account_id
// column, and every table hanging off one of them by an ON DELETE CASCADE
// foreign key, is emptied of the account's rows, children before parents.
// The tables are read from the catalog at each run, so a table added by a
// later migration is covered without touching this code.
func Purge(ctx context.Context, db dbutil.Executor, id uuid.UUID, opts PurgeOptions) (PurgeResult, error) {
	if opts.Batch <= 0 {
		opts.Batch = DefaultPurgeBatch
	}
	res := PurgeResult{Rows: map[string]int64{}}
	st, err := Get(ctx, db, id)
	if errors.Is(err, ErrNotFound) {
		res.Done = true
		return res, nil
	}
	if err != nil {
		return res, err
	}
	if !st.Deleting() {
		return res, ErrNotDeleting
	}
	steps, err := purgePlan(ctx, db)
	if err != nil {
		return res, err
	}
	for _, s := range steps {
		for {
			if !opts.Deadline.IsZero() && time.Now().After(opts.Deadline) {
				return res, nil
			}
			tag, err := db.Exec(ctx, s.sql, id, opts.Batch)
			if err != nil {
				return res, fmt.Errorf("error purging %s: %w", s.name, err)
			}
			res.Rows[s.name] += tag.RowsAffected()
			// Until a statement finds nothing: a row updated meanwhile
			// (a new ctid) is missed by one batch, never by the next.
			if s.once || tag.RowsAffected() == 0 {
				break
			}
		}
	}
	if _, err := db.Exec(ctx, `DELETE FROM accounts WHERE id = $1 AND deleted_at IS NOT NULL`, id); err != nil {
		return res, fmt.Errorf("error deleting account row: %w", err)
	}
	res.Done = true
	return res, nil
}

// purgeStep is one batched statement: $1 is the account id, $2 the batch
// size; it is repeated until it removes nothing.
type purgeStep struct {
	name string
	sql  string
	// once: the statement is not batched (it runs a single time).
	once bool
}

// fixedSteps run first, in this order.
var fixedSteps = []purgeStep{
	{name: "river_job", sql: `
UPDATE river_job SET state = 'cancelled', finalized_at = now(),
       metadata = jsonb_set(metadata, '{cancel_attempted_at}', to_jsonb(now()), true)
WHERE id = ANY(ARRAY(
    SELECT id FROM river_job
    WHERE state IN ('available', 'pending', 'retryable', 'scheduled')
      AND tags @> ARRAY['account-' || $1::uuid::text]::varchar(255)[]
    LIMIT $2))
  AND state IN ('available', 'pending', 'retryable', 'scheduled')`},
	{name: "sms_numbers", once: true, sql: `
UPDATE sms_numbers SET receiver_id = NULL
WHERE receiver_id IN (SELECT id FROM receivers WHERE account_id = $1::uuid AND channel = 'sms')
  AND $2::int > 0`},
	{name: "dns_connections", sql: `
DELETE FROM dns_connections WHERE id = ANY(ARRAY(
    SELECT id FROM dns_connections WHERE account_id = $1::uuid LIMIT $2))`},
}

// fk is one single-column foreign key between two public tables.
type fk struct {
	child, childCol, parent, parentCol string
	cascade                            bool
}

// purgePlan reads the catalog and returns every step of a purge.
func purgePlan(ctx context.Context, db dbsqlc.DBTX) ([]purgeStep, error) {
	tables, err := stringList(ctx, db, `
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
ORDER BY c.relname`)
	if err != nil {
		return nil, err
	}
	keys, err := rowKeys(ctx, db)
	if err != nil {
		return nil, err
	}
	owned, err := stringList(ctx, db, `
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'account_id' AND NOT a.attisdropped
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname <> 'accounts'`)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `
SELECT ch.relname, ca.attname, pa.relname, pk.attname, con.confdeltype = 'c'
FROM pg_constraint con
JOIN pg_class ch ON ch.oid = con.conrelid
JOIN pg_class pa ON pa.oid = con.confrelid
JOIN pg_namespace n ON n.oid = ch.relnamespace AND n.nspname = 'public'
JOIN pg_namespace pn ON pn.oid = pa.relnamespace AND pn.nspname = 'public'
JOIN pg_attribute ca ON ca.attrelid = con.conrelid AND ca.attnum = con.conkey[1]
JOIN pg_attribute pk ON pk.attrelid = con.confrelid AND pk.attnum = con.confkey[1]
WHERE con.contype = 'f' AND cardinality(con.conkey) = 1 AND con.conparentid = 0
ORDER BY ch.relname, con.conname`)
	if err != nil {
		return nil, fmt.Errorf("error reading foreign keys: %w", err)
	}
	fks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fk, error) {
		var f fk
		err := r.Scan(&f.child, &f.childCol, &f.parent, &f.parentCol, &f.cascade)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading foreign keys: %w", err)
	}
	isOwned := map[string]bool{}
	for _, t := range owned {
		isOwned[t] = true
	}
	steps := slices.Clone(fixedSteps)
	for _, t := range deleteOrder(tables, fks) {
		if t == "accounts" {
			continue
		}
		qt := pgx.Identifier{t}.Sanitize()
		key := keyOf(keys, t)
		if isOwned[t] {
			steps = append(steps, purgeStep{name: t, sql: key.delete(qt, fmt.Sprintf(
				`SELECT %[2]s FROM %[1]s c WHERE account_id = $1::uuid LIMIT $2`, qt, key.pick))})
			continue
		}
		// A table without account_id whose rows cascade from an owned
		// table: emptied in batches first, so the parent's batch never
		// cascades into an unbounded number of rows.
		for _, f := range fks {
			if f.child != t || !f.cascade || !isOwned[f.parent] || f.parent == t {
				continue
			}
			steps = append(steps, purgeStep{name: t, sql: key.delete(qt, fmt.Sprintf(
				`SELECT %[5]s FROM %[1]s c JOIN %[2]s p ON p.%[3]s = c.%[4]s WHERE p.account_id = $1::uuid LIMIT $2`,
				qt, pgx.Identifier{f.parent}.Sanitize(), pgx.Identifier{f.parentCol}.Sanitize(), pgx.Identifier{f.childCol}.Sanitize(),
				key.pick))})
		}
	}
	return steps, nil
}

// rowKey is how a purge statement names the rows its subquery picked: by
// ctid (one row of a plain table), or, in a partitioned table where a ctid
// is only unique within one partition, by the primary key.
type rowKey struct {
	match string // the outer statement's side: ctid, or (k1, k2)
	pick  string // the subquery's, over alias c: c.ctid, or c.k1, c.k2
}

// rowKeys returns the rowKey of every table; a plain table is absent (its
// zero value is replaced by ctid).
func rowKeys(ctx context.Context, db dbsqlc.DBTX) (map[string]rowKey, error) {
	rows, err := db.Query(ctx, `
SELECT c.relname::text, array_agg(a.attname::text ORDER BY k.ord)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
WHERE c.relkind = 'p'
GROUP BY c.relname`)
	if err != nil {
		return nil, fmt.Errorf("error reading primary keys: %w", err)
	}
	out := map[string]rowKey{}
	for rows.Next() {
		var table string
		var cols []string
		if err := rows.Scan(&table, &cols); err != nil {
			rows.Close()
			return nil, fmt.Errorf("error reading primary keys: %w", err)
		}
		match, pick := make([]string, len(cols)), make([]string, len(cols))
		for i, c := range cols {
			match[i] = pgx.Identifier{c}.Sanitize()
			pick[i] = "c." + match[i]
		}
		out[table] = rowKey{match: "(" + strings.Join(match, ", ") + ")", pick: strings.Join(pick, ", ")}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading primary keys: %w", err)
	}
	return out, nil
}

// delete is the statement deleting from table the rows sub selects.
func (k rowKey) delete(table, sub string) string {
	if k.match == "ctid" {
		return "DELETE FROM " + table + " WHERE ctid = ANY(ARRAY(" + sub + "))"
	}
	return "DELETE FROM " + table + " WHERE " + k.match + " IN (" + sub + ")"
}

// keyOf returns the rowKey of table.
func keyOf(keys map[string]rowKey, table string) rowKey {
	if k, ok := keys[table]; ok {
		return k
	}
	return rowKey{match: "ctid", pick: "c.ctid"}
}

// deleteOrder sorts tables so that every table comes before the tables
// its foreign keys reference (children before parents); cycles and
// self-references are broken arbitrarily but deterministically.
func deleteOrder(tables []string, fks []fk) []string {
	children := map[string][]string{}
	for _, f := range fks {
		if f.child != f.parent {
			children[f.parent] = append(children[f.parent], f.child)
		}
	}
	const (
		unseen = iota
		visiting
		done
	)
	state := map[string]int{}
	var out []string
	var visit func(t string)
	visit = func(t string) {
		if state[t] != unseen {
			return
		}
		state[t] = visiting
		for _, c := range children[t] {
			visit(c)
		}
		state[t] = done
		out = append(out, t)
	}
	for _, t := range tables {
		visit(t)
	}
	return out
}

func stringList(ctx context.Context, db dbsqlc.DBTX, sql string) ([]string, error) {
	rows, err := db.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("error reading the catalog: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("error reading the catalog: %w", err)
	}
	return out, nil
}

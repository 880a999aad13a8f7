package partitions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// lockID serialises partition changes: two workers running Maintain at once
// take turns, and the second finds the work done.
const lockID = 7_366_001_050

// LockTimeout bounds how long one change waits for its locks. Creating,
// attaching and detaching a partition lock the table against every reader
// and writer for an instant, but wait behind any long query first, and
// everything queued behind them would wait too: a change that cannot get
// its locks in time gives up (Report.Skipped) and is retried at the next
// run.
const LockTimeout = 5 * time.Second

// Report is what one Maintain run did.
type Report struct {
	// Created and Dropped name the partitions created and dropped.
	Created, Dropped []string
	// Moved counts rows moved from a DEFAULT partition into a new partition
	// of their range; Kept counts rows of dropped partitions copied back
	// (Spec.Keep); RollupRows counts rollup rows deleted with them.
	Moved, Kept, RollupRows int64
	// Skipped lists changes that gave up waiting for a lock (LockTimeout).
	Skipped []string
	// Analyzed names the partitioned tables whose statistics were updated
	// (AnalyzeAfter), which took AnalyzeTook.
	Analyzed    []string
	AnalyzeTook time.Duration
}

// Maintain brings every table of Tables up to date at now: see MaintainSpecs.
func Maintain(ctx context.Context, db dbutil.Executor, now time.Time, s Settings) (Report, error) {
	return MaintainSpecs(ctx, db, now, s, Tables)
}

// MaintainSpecs brings each table of specs up to date at now, in order:
// the partitions from the current interval to Ahead intervals after it
// exist (Ensure), the partitions entirely older than the retention are
// detached and dropped (Expire), and the tables' own statistics are kept
// fresh (analyze). Each change is its own short transaction;
// a run cut short is finished by the next one, and running it twice
// changes nothing the second time.
func MaintainSpecs(ctx context.Context, db dbutil.Executor, now time.Time, s Settings, specs []Spec) (Report, error) {
	var rep Report
	for _, spec := range specs {
		if err := Ensure(ctx, db, spec, now, &rep); err != nil {
			return rep, err
		}
	}
	for _, spec := range specs {
		if err := Expire(ctx, db, spec, now, s, &rep); err != nil {
			return rep, err
		}
	}
	for _, spec := range specs {
		if err := analyze(ctx, db, spec, changedIn(&rep, spec.Table), &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// Ensure creates the partitions of spec's table that hold the interval of
// now and the Ahead intervals after it. Partitions start where the newest
// one ends (so a gap left while no worker ran is filled), and a range the
// DEFAULT partition holds rows of gets them moved into its new partition.
func Ensure(ctx context.Context, db dbutil.Executor, spec Spec, now time.Time, rep *Report) error {
	parts, err := List(ctx, db, spec)
	if err != nil {
		return err
	}
	start := spec.Interval.Start(now)
	end := start
	for range spec.Ahead + 1 {
		end = spec.Interval.Next(end)
	}
	var frontier *time.Time
	for _, p := range parts {
		if p.Default {
			continue
		}
		if p.To == nil {
			return nil // up to MAXVALUE: nothing to add
		}
		if frontier == nil || p.To.After(*frontier) {
			frontier = p.To
		}
	}
	from := start
	if frontier != nil {
		from = *frontier
	}
	for from.Before(end) {
		to := spec.Interval.Next(spec.Interval.Start(from))
		done, err := create(ctx, db, spec, from, to, rep)
		if err != nil {
			return err
		}
		if !done {
			return nil // skipped: a later range would leave a gap
		}
		from = to
	}
	return nil
}

// create makes the partition [from, to) of spec's table in one
// transaction: the DEFAULT partition's rows of that range (if any) are
// taken out first and put back through the table once the partition
// exists, so they land in it; Postgres refuses to create a partition whose
// range the DEFAULT partition holds rows of. It returns false when it gave
// up waiting for a lock.
func create(ctx context.Context, db dbutil.Executor, spec Spec, from, to time.Time, rep *Report) (bool, error) {
	name := partitionName(spec, from)
	var moved int64
	exists := false
	err := change(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		// Another worker may have made it while this one waited for the lock.
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil || exists {
			return err
		}
		table := ident(spec.Table)
		if err := lockReferenced(ctx, tx, spec.Table); err != nil {
			return err
		}
		if err := lockTable(ctx, tx, spec.Table); err != nil {
			return err
		}
		// The children's rows of the range first: taking a referenced row out
		// would delete them with it (ON DELETE CASCADE). Children are
		// partitioned alike, so their rows of the range are exactly those
		// referring to the rows moved.
		var children []moving
		for i, c := range spec.Children {
			m, err := moveOut(ctx, tx, c.Table, c.Column, fmt.Sprintf("mailwatch_moving_child%d", i), value(spec, from), value(spec, to))
			if err != nil {
				return err
			}
			children = append(children, m)
		}
		m, err := moveOut(ctx, tx, spec.Table, spec.Column, "mailwatch_moving", value(spec, from), value(spec, to))
		if err != nil {
			return err
		}
		moved = m.rows
		if _, err := tx.Exec(ctx, fmt.Sprintf("CREATE TABLE %s PARTITION OF %s FOR VALUES FROM (%s) TO (%s)",
			ident(name), table, literal(spec, from), literal(spec, to))); err != nil {
			return fmt.Errorf("error creating partition %s: %w", name, err)
		}
		for _, m := range append([]moving{m}, children...) {
			if err := m.putBack(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errLocked) {
		rep.Skipped = append(rep.Skipped, "create "+name)
		return false, nil
	}
	if err != nil || exists {
		return err == nil, err
	}
	rep.Created = append(rep.Created, name)
	rep.Moved += moved
	return true, nil
}

// moving is rows of a table taken out of its DEFAULT partition, held in a
// temporary table until their partition exists.
type moving struct {
	table, temp, cols string
	rows              int64
}

// moveOut takes table's rows of [from, to) out into a new temporary table.
// It deletes through the table, not its DEFAULT partition (the only one
// holding the range), so that the table's triggers see the rows leave and
// come back (rollups count them out, then in again).
func moveOut(ctx context.Context, tx pgx.Tx, table, column, temp string, from, to any) (moving, error) {
	cols, err := columns(ctx, tx, table)
	if err != nil {
		return moving{}, err
	}
	m := moving{table: ident(table), temp: ident(temp), cols: cols}
	if _, err := tx.Exec(ctx, "CREATE TEMP TABLE "+m.temp+" ON COMMIT DROP AS SELECT "+cols+" FROM "+m.table+" WITH NO DATA"); err != nil {
		return m, fmt.Errorf("error creating a table to move %s rows through: %w", table, err)
	}
	col := ident(column)
	tag, err := tx.Exec(ctx, fmt.Sprintf("WITH m AS (DELETE FROM %s WHERE %s >= $1 AND %s < $2 RETURNING %s) INSERT INTO %s SELECT * FROM m",
		m.table, col, col, cols, m.temp), from, to)
	if err != nil {
		return m, fmt.Errorf("error taking %s rows out of the DEFAULT partition: %w", table, err)
	}
	m.rows = tag.RowsAffected()
	return m, nil
}

// putBack inserts the rows back through their table (into the partition
// now holding their range) and drops the temporary table now, not at
// commit: the caller's transaction may be a savepoint of a longer one.
func (m moving) putBack(ctx context.Context, tx pgx.Tx) error {
	if m.rows > 0 {
		if _, err := tx.Exec(ctx, "INSERT INTO "+m.table+" ("+m.cols+") SELECT * FROM "+m.temp); err != nil {
			return fmt.Errorf("error moving rows back into %s: %w", m.table, err)
		}
	}
	_, err := tx.Exec(ctx, "DROP TABLE "+m.temp)
	return err
}

// Expire detaches and drops every partition of spec's table whose upper
// bound is at least the retention in the past, each in its own
// transaction: the rollups' rows of its range are deleted and the rows
// Spec.Keep names are copied back into the table in the same transaction.
// No row of the partition is deleted one by one.
func Expire(ctx context.Context, db dbutil.Executor, spec Spec, now time.Time, s Settings, rep *Report) error {
	if spec.Retention == nil {
		return nil
	}
	keep := spec.Retention(s)
	if keep <= 0 {
		return nil
	}
	cutoff := now.Add(-keep)
	parts, err := List(ctx, db, spec)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if p.Default || p.To == nil || p.To.After(cutoff) {
			continue
		}
		if err := drop(ctx, db, spec, p, rep); err != nil {
			return err
		}
	}
	return nil
}

// drop detaches p, deletes its hours from the rollups, copies back the rows
// to keep and drops it, in one transaction.
func drop(ctx context.Context, db dbutil.Executor, spec Spec, p Partition, rep *Report) error {
	var kept, rolled int64
	gone := false
	err := change(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		table, part := ident(spec.Table), ident(p.Name)
		// Another worker may have dropped it while this one waited.
		err := tx.QueryRow(ctx, `SELECT NOT EXISTS (SELECT 1 FROM pg_inherits
			WHERE inhrelid = to_regclass($1) AND inhparent = to_regclass($2))`, p.Name, spec.Table).Scan(&gone)
		if err != nil || gone {
			return err
		}
		if err := lockTable(ctx, tx, spec.Table); err != nil {
			return err
		}
		if err := dropChildRows(ctx, tx, spec, p); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "ALTER TABLE "+table+" DETACH PARTITION "+part); err != nil {
			return fmt.Errorf("error detaching %s: %w", p.Name, err)
		}
		n, err := dropRollups(ctx, tx, spec, p)
		if err != nil {
			return err
		}
		rolled += n
		if spec.Keep != "" {
			cols, err := columns(ctx, tx, spec.Table)
			if err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, "INSERT INTO "+table+" ("+cols+") SELECT "+cols+" FROM "+part+" WHERE "+spec.Keep)
			if err != nil {
				return fmt.Errorf("error keeping rows of %s: %w", p.Name, err)
			}
			kept = tag.RowsAffected()
		}
		if _, err := tx.Exec(ctx, "DROP TABLE "+part); err != nil {
			return fmt.Errorf("error dropping %s: %w", p.Name, err)
		}
		return nil
	})
	if errors.Is(err, errLocked) {
		rep.Skipped = append(rep.Skipped, "drop "+p.Name)
		return nil
	}
	if err != nil || gone {
		return err
	}
	rep.Dropped = append(rep.Dropped, p.Name)
	rep.Kept += kept
	rep.RollupRows += rolled
	return nil
}

// dropRollups deletes p's hours from spec's rollups and its days from
// their daily tables (Spec.Daily), the daily tables' row triggers skipped
// while the hours go.
func dropRollups(ctx context.Context, tx pgx.Tx, spec Spec, p Partition) (int64, error) {
	bulk := func(on string) error {
		_, err := tx.Exec(ctx, "SELECT set_config('mailwatch.rollup_bulk', $1, true)", on)
		return err
	}
	midnight := func(t time.Time) bool { return t.UTC().Equal(t.UTC().Truncate(24 * time.Hour)) }
	daily := spec.Daily
	if !midnight(*p.To) || (p.From != nil && !midnight(*p.From)) {
		daily = nil // not whole days: the row triggers keep the daily tables
	}
	if len(daily) > 0 {
		if err := bulk("on"); err != nil {
			return 0, err
		}
	}
	var rolled int64
	del := func(table, column string, from *time.Time, to time.Time) error {
		var tag pgconn.CommandTag
		var err error
		if from == nil {
			tag, err = tx.Exec(ctx, "DELETE FROM "+ident(table)+" WHERE "+column+" < $1", to)
		} else {
			tag, err = tx.Exec(ctx, "DELETE FROM "+ident(table)+" WHERE "+column+" >= $1 AND "+column+" < $2", *from, to)
		}
		if err != nil {
			return fmt.Errorf("error deleting the rollup rows of %s from %s: %w", p.Name, table, err)
		}
		rolled += tag.RowsAffected()
		return nil
	}
	for _, r := range spec.Rollups {
		if err := del(r, "hour", p.From, *p.To); err != nil {
			return rolled, err
		}
	}
	for _, r := range daily {
		// Days: the bounds are UTC midnights, compared as dates.
		var from *time.Time
		if p.From != nil {
			f := p.From.UTC()
			from = &f
		}
		if err := del(r, "day", from, p.To.UTC()); err != nil {
			return rolled, err
		}
	}
	if len(daily) > 0 {
		return rolled, bulk("off")
	}
	return rolled, nil
}

// lockReferenced takes, before the table, the tables its foreign keys
// reference, in the order writers take them: creating a partition takes
// SHARE ROW EXCLUSIVE on each, to add its constraint triggers. A writer
// updates the row it refers to (an account) before it inserts rows
// referring to it (the account's audit event); a creation that held the
// table while waiting for the referenced one would deadlock with it.
// (Dropping a partition is left as it was: it takes the referenced tables
// only at its end, and holding them for the whole change would block
// their readers for as long.)
func lockReferenced(ctx context.Context, tx pgx.Tx, table string) error {
	rows, err := tx.Query(ctx, `SELECT DISTINCT c.confrelid::regclass::text FROM pg_constraint c
		WHERE c.conrelid = to_regclass($1) AND c.contype = 'f' AND c.confrelid <> c.conrelid ORDER BY 1`, table)
	if err != nil {
		return fmt.Errorf("error reading what %s references: %w", table, err)
	}
	referenced, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("error reading what %s references: %w", table, err)
	}
	for _, r := range referenced {
		// regclass text is already quoted where it needs to be.
		if _, err := tx.Exec(ctx, "LOCK TABLE ONLY "+r+" IN SHARE ROW EXCLUSIVE MODE"); err != nil {
			return fmt.Errorf("error locking %s, which %s references: %w", r, table, err)
		}
	}
	return nil
}

// lockTable takes the lock the partition change needs on the table before
// any other on it or its partitions: creating or detaching a partition takes
// it anyway, and taking it later, after a lock on a partition, could
// deadlock with a writer that holds the table and waits for that partition.
func lockTable(ctx context.Context, tx pgx.Tx, table string) error {
	if _, err := tx.Exec(ctx, "LOCK TABLE ONLY "+ident(table)+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return fmt.Errorf("error locking %s: %w", table, err)
	}
	return nil
}

// dropChildRows deletes the rows of p's range from the DEFAULT partition of
// each of spec's children.
func dropChildRows(ctx context.Context, tx pgx.Tx, spec Spec, p Partition) error {
	for _, c := range spec.Children {
		def, col := ident(c.Table+"_default"), ident(c.Column)
		var err error
		if p.From == nil {
			_, err = tx.Exec(ctx, "DELETE FROM "+def+" WHERE "+col+" < $1", value(spec, *p.To))
		} else {
			_, err = tx.Exec(ctx, "DELETE FROM "+def+" WHERE "+col+" >= $1 AND "+col+" < $2", value(spec, *p.From), value(spec, *p.To))
		}
		if err != nil {
			return fmt.Errorf("error deleting the %s rows of %s: %w", c.Table, p.Name, err)
		}
	}
	return nil
}

// errLocked is a change that gave up waiting for a lock (or for a child's
// partition to go first).
var errLocked = errors.New("lock timeout")

// change runs fn in a transaction holding the partition lock, with
// LockTimeout on every lock it takes; a lock timeout is errLocked.
func change(ctx context.Context, db dbutil.Executor, fn func(ctx context.Context, tx pgx.Tx) error) error {
	err := dbutil.WithTx(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(lockID)); err != nil {
			return fmt.Errorf("error taking the partition lock: %w", err)
		}
		ms := LockTimeout.Milliseconds()
		if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", ms)); err != nil {
			return err
		}
		return fn(ctx, tx)
	})
	var pgErr *pgconn.PgError
	// A lock timeout, or a partition still referred to by a child's
	// partition whose drop was itself skipped: retried at the next run.
	if errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "23503") {
		return fmt.Errorf("%w: %s", errLocked, strings.TrimSpace(pgErr.Message))
	}
	return err
}

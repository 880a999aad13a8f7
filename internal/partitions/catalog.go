package partitions

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// Partition is one partition of a table as the catalog has it.
type Partition struct {
	Name string
	// Default: the DEFAULT partition (no bounds).
	Default bool
	// From is the lower bound; nil is MINVALUE (the legacy partition).
	From *time.Time
	// To is the upper bound; nil is MAXVALUE.
	To *time.Time
}

// List returns the partitions of spec's table, the DEFAULT partition last
// and the others by lower bound.
func List(ctx context.Context, db dbsqlc.DBTX, spec Spec) ([]Partition, error) {
	cast := "timestamptz"
	if spec.Key == UUIDv7Key {
		cast = "uuid"
	}
	// The bounds' text is cast back to the key's type, so the session's
	// DateStyle and TimeZone do not matter.
	rows, err := db.Query(ctx, fmt.Sprintf(`
SELECT c.relname::text, b = 'DEFAULT',
       (regexp_match(b, $$FROM \('([^']*)'\)$$))[1]::%[1]s,
       (regexp_match(b, $$TO \('([^']*)'\)$$))[1]::%[1]s
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
CROSS JOIN LATERAL pg_get_expr(c.relpartbound, c.oid) AS b
WHERE i.inhparent = to_regclass($1)`, cast), spec.Table)
	if err != nil {
		return nil, fmt.Errorf("error listing the partitions of %s: %w", spec.Table, err)
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Partition, error) {
		var p Partition
		if spec.Key == UUIDv7Key {
			var from, to *uuid.UUID
			if err := r.Scan(&p.Name, &p.Default, &from, &to); err != nil {
				return p, err
			}
			p.From, p.To = uuidTime(from), uuidTime(to)
			return p, nil
		}
		err := r.Scan(&p.Name, &p.Default, &p.From, &p.To)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing the partitions of %s: %w", spec.Table, err)
	}
	sort.SliceStable(parts, func(i, j int) bool { return before(parts[i], parts[j]) })
	return parts, nil
}

// before orders partitions by lower bound, MINVALUE first and DEFAULT last.
func before(a, b Partition) bool {
	switch {
	case a.Default != b.Default:
		return b.Default
	case a.Default:
		return false
	case a.From == nil || b.From == nil:
		return a.From == nil && b.From != nil
	}
	return a.From.Before(*b.From)
}

// uuidTime is the millisecond a UUIDv7 bound stands for.
func uuidTime(u *uuid.UUID) *time.Time {
	if u == nil {
		return nil
	}
	var b [8]byte
	copy(b[2:], u[0:6])
	t := time.UnixMilli(int64(binary.BigEndian.Uint64(b[:]))).UTC()
	return &t
}

// literal is the SQL literal of the bound t for spec's key.
func literal(spec Spec, t time.Time) string {
	if spec.Key == UUIDv7Key {
		return "'" + dbutil.UUIDv7Floor(t).String() + "'"
	}
	return "'" + t.UTC().Format("2006-01-02 15:04:05") + "+00'"
}

// value is the bound t as a query argument for spec's key.
func value(spec Spec, t time.Time) any {
	if spec.Key == UUIDv7Key {
		return dbutil.UUIDv7Floor(t)
	}
	return t
}

// partitionName names the partition starting at from.
func partitionName(spec Spec, from time.Time) string {
	return spec.Table + "_p" + from.UTC().Format("20060102")
}

// ident quotes an identifier.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// columns returns the table's columns, quoted and comma-separated, in
// order: the list every copy between a partition and its table names.
func columns(ctx context.Context, db dbsqlc.DBTX, table string) (string, error) {
	rows, err := db.Query(ctx, `
SELECT attname::text FROM pg_attribute
WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped
ORDER BY attnum`, table)
	if err != nil {
		return "", fmt.Errorf("error reading the columns of %s: %w", table, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("error reading the columns of %s: %w", table, err)
	}
	if len(names) == 0 {
		return "", fmt.Errorf("table %s has no columns (does it exist?)", table)
	}
	for i, n := range names {
		names[i] = ident(n)
	}
	return strings.Join(names, ", "), nil
}

// Floor returns the lower bound of the oldest range partition of table: rows
// below it can only be in the DEFAULT partition. With a legacy partition
// (from MINVALUE) it is the zero time; with no range partition at all (a
// database no worker has maintained yet) ok is false.
func Floor(ctx context.Context, db dbsqlc.DBTX, table string) (floor time.Time, ok bool, err error) {
	spec, found := Lookup(table)
	if !found {
		return time.Time{}, false, fmt.Errorf("%s is not a partitioned table", table)
	}
	parts, err := List(ctx, db, spec)
	if err != nil {
		return time.Time{}, false, err
	}
	for _, p := range parts {
		if p.Default {
			continue
		}
		if p.From == nil {
			return time.Time{}, true, nil
		}
		return *p.From, true, nil
	}
	return time.Time{}, false, nil
}

// PruneBefore returns the cut-off a row-by-row prune of table may use
// without deleting rows that a partition drop will remove: the earlier of
// cutoff and Floor. Rows older than it are in the DEFAULT partition (out of
// range, or copied back by Spec.Keep). The zero time means nothing may be
// deleted (the legacy partition still holds the oldest rows).
func PruneBefore(ctx context.Context, db dbsqlc.DBTX, table string, cutoff time.Time) (time.Time, error) {
	floor, ok, err := Floor(ctx, db, table)
	if err != nil {
		return time.Time{}, err
	}
	if ok && floor.Before(cutoff) {
		return floor, nil
	}
	return cutoff, nil
}

package partitions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// AnalyzeAfter is how old a partitioned table's own statistics may grow
// before Maintain analyzes it. Autovacuum analyzes each partition as its
// rows change but never a partitioned table itself, whose statistics the
// planner uses for the table as a whole (a join's estimate over all its
// partitions): without this they would stay as the first ANALYZE left them,
// or absent. ANALYZE of a partitioned table samples every partition too,
// seconds on a large table, so it runs at most this often, and after a run
// that changed the table's partitions.
const AnalyzeAfter = 24 * time.Hour

// analyze analyzes spec's table when its statistics are older than
// AnalyzeAfter (by the database's clock, as the statistics are kept), or
// never taken, or changed says this run created or dropped partitions of
// it. ANALYZE takes a lock that conflicts with schema changes and other
// maintenance only, never with reads or writes; waiting longer than
// LockTimeout for it skips the table until the next run.
func analyze(ctx context.Context, db dbutil.Executor, spec Spec, changed bool, rep *Report) error {
	var stale bool
	err := db.QueryRow(ctx, `SELECT coalesce(greatest(last_analyze, last_autoanalyze) < now() - make_interval(secs => $2), true)
		FROM pg_stat_user_tables WHERE relid = $1::regclass`, spec.Table, AnalyzeAfter.Seconds()).Scan(&stale)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("error reading the statistics age of %s: %w", spec.Table, err)
	}
	if !stale && !changed {
		return nil
	}
	start := time.Now()
	defer func() { rep.AnalyzeTook += time.Since(start) }()
	err = change(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "ANALYZE "+ident(spec.Table))
		return err
	})
	if errors.Is(err, errLocked) {
		rep.Skipped = append(rep.Skipped, "analyze "+spec.Table)
		return nil
	}
	if err != nil {
		return fmt.Errorf("error analyzing %s: %w", spec.Table, err)
	}
	rep.Analyzed = append(rep.Analyzed, spec.Table)
	return nil
}

// changedIn reports whether rep created or dropped a partition of table.
func changedIn(rep *Report, table string) bool {
	for _, names := range [][]string{rep.Created, rep.Dropped} {
		for _, n := range names {
			if strings.HasPrefix(n, table+"_p") {
				return true
			}
		}
	}
	return false
}

package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// historyTables are the firehose tables whose storage the bench measures.
var historyTables = []string{"message_events", "events", "dmarc_records", "webhook_deliveries", "webhook_delivery_attempts", "provider_payloads"}

// tableStorage is one table's size after the seeding's VACUUM ANALYZE.
type tableStorage struct {
	Table   string
	Rows    int64
	Heap    int64 // pg_table_size of every partition: heap, TOAST, free space and visibility maps
	Indexes int64 // pg_indexes_size of every partition
}

func (t tableStorage) perRow(b int64) float64 {
	if t.Rows == 0 {
		return 0
	}
	return float64(b) / float64(t.Rows)
}

// measureStorage sizes the firehose tables and the whole database.
func measureStorage(ctx context.Context, env *benchEnv) ([]tableStorage, int64, error) {
	out := make([]tableStorage, 0, len(historyTables))
	for _, t := range historyTables {
		s := tableStorage{Table: t}
		// A partitioned table stores nothing itself: its partitions (every
		// leaf of pg_partition_tree, the table alone when not partitioned)
		// hold the rows and indexes.
		err := env.Pool.QueryRow(ctx, fmt.Sprintf(`SELECT (SELECT count(*) FROM %[1]s),
			(SELECT coalesce(sum(pg_table_size(relid)), 0)::bigint FROM pg_partition_tree('%[1]s') WHERE isleaf),
			(SELECT coalesce(sum(pg_indexes_size(relid)), 0)::bigint FROM pg_partition_tree('%[1]s') WHERE isleaf)`,
			pgx.Identifier{t}.Sanitize())).Scan(&s.Rows, &s.Heap, &s.Indexes)
		if err != nil {
			return nil, 0, fmt.Errorf("error sizing %s: %w", t, err)
		}
		out = append(out, s)
	}
	var db int64
	err := env.Pool.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&db)
	return out, db, err
}

// printHistorySize prints one size's figures as soon as they are known.
func printHistorySize(r historySizeResult) {
	fmt.Printf("load      average %s before the measurements, %s after (2 cores shared with other work)\n", r.LoadBefore, r.LoadAfter)
	fmt.Printf("storage   database %.2f GiB\n", gib(r.DBBytes))
	for _, s := range r.Storage {
		fmt.Printf("storage   %-26s %10d rows  %8.1f MiB  %6.0f bytes/row (%4.0f table, %4.0f indexes)\n", s.Table, s.Rows,
			float64(s.Heap+s.Indexes)/(1<<20), s.perRow(s.Heap+s.Indexes), s.perRow(s.Heap), s.perRow(s.Indexes))
	}
}

// printHistoryTable prints the comparison of every size, as a Markdown
// table, and marks the rows that miss the target: the p50 at M within
// 1.5x of the p50 at S, and under 50 ms.
func printHistoryTable(results []historySizeResult) {
	if len(results) < 2 {
		return
	}
	var b strings.Builder
	b.WriteString("\n| Endpoint |")
	sep := "|---|"
	for _, r := range results {
		fmt.Fprintf(&b, " %s p50 | %s p99 |", r.Size.Name, r.Size.Name)
		sep += "---|---|"
	}
	b.WriteString(" M/S p50 | non-200 answers | target (M p50 <= 1.5x S and < 50 ms) |\n")
	b.WriteString(sep + "---|---|---|\n")
	s, m := results[0], results[1]
	for i, e := range historyEndpoints {
		fmt.Fprintf(&b, "| %s |", e.Name)
		var non200 []string
		for _, r := range results {
			l := r.Endpoints[i]
			fmt.Fprintf(&b, " %s | %s |", fmtMS(l.P50), fmtMS(l.P99))
			if t := l.non200Text(); t != "" {
				non200 = append(non200, r.Size.Name+": "+t)
			}
		}
		ratio := float64(m.Endpoints[i].P50) / float64(max(s.Endpoints[i].P50, 1))
		verdict := "met"
		switch {
		case e.Baseline:
			verdict = "baseline"
		case m.Endpoints[i].non200()+m.Endpoints[i].Errors > 0:
			verdict = "**FAILS** (answers other than 200; the p50 is the statement timeout's)"
		case ratio > 1.5 && ms(m.Endpoints[i].P50) >= 50:
			verdict = "**FAILS** (ratio and 50 ms)"
		case ratio > 1.5:
			verdict = "**FAILS** (ratio)"
		case ms(m.Endpoints[i].P50) >= 50:
			verdict = "**FAILS** (50 ms)"
		}
		fmt.Fprintf(&b, " %.2fx | %s | %s |\n", ratio, strings.Join(non200, "; "), verdict)
	}
	fmt.Print(b.String())
	for _, r := range results {
		fmt.Printf("%s: seeded in %s (%s); load average %s / %s\n", r.Size.Name, r.Seeded.Round(time.Second), r.Rows, r.LoadBefore, r.LoadAfter)
	}
}

// printHistoryStorage prints bytes per row of each table at every size.
func printHistoryStorage(results []historySizeResult) {
	var b strings.Builder
	b.WriteString("\n| Table |")
	sep := "|---|"
	for _, r := range results {
		fmt.Fprintf(&b, " %s rows | %s bytes/row (table + indexes) |", r.Size.Name, r.Size.Name)
		sep += "---|---|"
	}
	b.WriteString("\n" + sep + "\n")
	for i, t := range historyTables {
		fmt.Fprintf(&b, "| `%s` |", t)
		for _, r := range results {
			s := r.Storage[i]
			fmt.Fprintf(&b, " %d | %.0f (%.0f + %.0f) |", s.Rows, s.perRow(s.Heap+s.Indexes), s.perRow(s.Heap), s.perRow(s.Indexes))
		}
		b.WriteString("\n")
	}
	fmt.Print(b.String())
	for _, r := range results {
		for _, rr := range r.Retention {
			fmt.Printf("retention at %s: %s\n", r.Size.Name, rr)
		}
	}
}

// fmtMS formats a latency in milliseconds with a thousands separator.
func fmtMS(d time.Duration) string {
	v := float64(d.Microseconds()) / 1000
	switch {
	case v >= 1000:
		s := fmt.Sprintf("%.0f", v)
		return s[:len(s)-3] + "," + s[len(s)-3:] + " ms"
	case v >= 10:
		return fmt.Sprintf("%.0f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

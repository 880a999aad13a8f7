package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailwatch/mailwatch/internal/esp"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/partitions"
	"github.com/mailwatch/mailwatch/jobs"
)

// retentionPass is one production retention path, run as its maintenance
// job runs it, with the clock that job reads set so that its cut-off falls
// a month after the oldest seeded row: the pass removes the oldest month.
type retentionPass struct {
	Name   string
	Tables []string // the tables it removes rows from, cascades included
	// Now is the clock the job reads.
	Now time.Time
	// JobBound is how long one run of the job may take in production
	// before River cancels it (the next run goes on).
	JobBound time.Duration
	Run      func(ctx context.Context, deps jobs.Deps) error
	// OneRow deletes the oldest row the pass removes; it is explained (and
	// rolled back) when the pass does not finish, to show where the time
	// goes. Due counts the rows the pass has to remove, for the projection.
	OneRow, Due string
}

// historyRetention is the one place that lists the retention paths of the
// firehose tables, as the maintenance jobs run them: first the partition
// maintenance (partitions.MaintainSpecs, what jobs.PartitionMaintainWorker
// runs over every table) dropping whole partitions, one pass per retention
// so that each clock removes the oldest month; then the row-by-row prunes,
// which remove only what no dropped partition held (the DEFAULT
// partitions' rows, the plans keeping less than EVENT_RETENTION_DAYS).
func historyRetention(seed *historySeed) (passes []retentionPass, none []string) {
	oldest := seed.Now.Add(-historySpanDays * 24 * time.Hour)
	cutoff := oldest.Add(30 * 24 * time.Hour)
	settings := partitions.Settings{EventRetentionDays: 90} // EVENT_RETENTION_DAYS' default
	maintain := func(name string, tables []string, retention func(partitions.Settings) time.Duration) retentionPass {
		var specs []partitions.Spec
		for _, t := range tables {
			if spec, ok := partitions.Lookup(t); ok {
				specs = append(specs, spec)
			}
		}
		counted := tables
		for _, spec := range specs {
			counted = append(counted, spec.Rollups...)
			counted = append(counted, spec.Daily...)
		}
		return retentionPass{
			Name:     "partition_maintain: partitions.MaintainSpecs (" + name + ")",
			Tables:   counted,
			Now:      cutoff.Add(retention(settings)),
			JobBound: jobs.MaxJobTimeout,
			Run: func(ctx context.Context, deps jobs.Deps) error {
				rep, err := partitions.MaintainSpecs(ctx, deps.Pool, deps.Now(), settings, specs)
				if err == nil && len(rep.Skipped) > 0 {
					err = fmt.Errorf("changes skipped at the lock timeout: %s", strings.Join(rep.Skipped, ", "))
				}
				fmt.Printf("retention %s: dropped %d partitions, copied back %d rows, deleted %d rollup rows; then analyzed %s in %s\n",
					name, len(rep.Dropped), rep.Kept, rep.RollupRows, strings.Join(rep.Analyzed, ", "), rep.AnalyzeTook.Round(time.Millisecond))
				return err
			},
		}
	}
	passes = []retentionPass{
		maintain("events, webhook deliveries and attempts: EVENT_RETENTION_DAYS",
			[]string{"webhook_delivery_attempts", "webhook_deliveries", "events"}, partitions.EventRetention),
		maintain("message events: partitions.MessageEventRetention", []string{"message_events"}, partitions.MessageEventRetention),
		maintain("provider payloads: partitions.PayloadRetention", []string{"provider_payloads"}, partitions.PayloadRetention),
		{
			Name:     "event_prune: jobs.EventPruneWorker.Work (rows no dropped partition held, plans keeping less)",
			Tables:   []string{"events", "webhook_deliveries", "webhook_delivery_attempts", "message_events"},
			Now:      cutoff.AddDate(0, 0, 90),
			JobBound: (&jobs.EventPruneWorker{}).Timeout(nil),
			Run: func(ctx context.Context, deps jobs.Deps) error {
				return jobs.NewEventPruneWorker(deps).Work(ctx, &river.Job[events.PruneArgs]{})
			},
			OneRow: `DELETE FROM events WHERE id = (SELECT id FROM events ORDER BY created_at LIMIT 1)`,
			Due:    fmt.Sprintf(`SELECT count(*) FROM events WHERE created_at < '%s'`, cutoff.Format(time.RFC3339Nano)),
		}, {
			Name:     "provider_payload_prune: jobs.ProviderPayloadPruneWorker.Work (payloads no dropped partition held)",
			Tables:   []string{"provider_payloads"},
			Now:      cutoff.Add(esp.ReplayRetention),
			JobBound: jobs.MaxJobTimeout,
			Run: func(ctx context.Context, deps jobs.Deps) error {
				return jobs.NewProviderPayloadPruneWorker(deps).Work(ctx, &river.Job[jobs.ProviderPayloadPruneArgs]{})
			},
			OneRow: `DELETE FROM provider_payloads WHERE id = (SELECT id FROM provider_payloads ORDER BY id LIMIT 1)`,
			Due: fmt.Sprintf(`SELECT count(*) FROM provider_payloads WHERE received_at < '%s' AND processed_at IS NOT NULL`,
				cutoff.Format(time.RFC3339Nano)),
		},
	}
	none = []string{"dmarc_records (and dmarc_reports, report_messages, dmarc_source_days): kept as long as their domain"}
	return passes, none
}

// retentionResult is what one pass removed and how long it took.
type retentionResult struct {
	Name     string
	Removed  []string // "events 401234"
	Took     time.Duration
	Finished bool
	Detail   string
}

func (r retentionResult) String() string {
	if len(r.Removed) == 0 {
		return r.Name + ": " + r.Detail
	}
	state := "finished"
	if !r.Finished {
		state = "NOT finished"
	}
	s := fmt.Sprintf("%s: %s in %s, removed %s", r.Name, state, r.Took.Round(time.Millisecond), strings.Join(r.Removed, ", "))
	if r.Detail != "" {
		s += "; " + r.Detail
	}
	return s
}

// historyRetentionTimeout bounds each pass (BENCH_RETENTION_TIMEOUT in
// seconds, default 300).
func historyRetentionTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("BENCH_RETENTION_TIMEOUT") + "s"); err == nil && d > 0 {
		return d
	}
	return 5 * time.Minute
}

// measureRetention runs every retention pass once and reports what it
// removed, how long it took, and how that compares with its job's bound.
func measureRetention(ctx context.Context, env *benchEnv, seed *historySeed) ([]retentionResult, error) {
	passes, none := historyRetention(seed)
	var out []retentionResult
	for _, p := range passes {
		before, err := countRows(ctx, env, p.Tables)
		if err != nil {
			return nil, err
		}
		deps := jobs.Deps{Pool: env.Pool, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return p.Now }}
		runCtx, cancel := context.WithTimeout(ctx, historyRetentionTimeout())
		t0 := time.Now()
		runErr := p.Run(runCtx, deps)
		took := time.Since(t0)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		after, err := countRows(ctx, env, p.Tables)
		if err != nil {
			return nil, err
		}
		res := retentionResult{Name: p.Name, Took: took, Finished: runErr == nil}
		for i, t := range p.Tables {
			res.Removed = append(res.Removed, fmt.Sprintf("%d %s", before[i]-after[i], t))
		}
		switch {
		case runErr != nil && !errors.Is(runErr, context.DeadlineExceeded) && runCtx.Err() == nil:
			return nil, fmt.Errorf("%s: %w", p.Name, runErr)
		case runErr != nil:
			res.Detail = fmt.Sprintf("stopped at the bench's bound (BENCH_RETENTION_TIMEOUT); %s", explainOneRow(ctx, env, p.OneRow, p.Due))
		case took > p.JobBound:
			res.Detail = fmt.Sprintf("longer than one run of the job may take (%s): production needs %d runs", p.JobBound, int(took/p.JobBound)+1)
		}
		fmt.Printf("retention %s\n", res)
		out = append(out, res)
	}
	for _, t := range none {
		fmt.Printf("retention %s\n", t)
		out = append(out, retentionResult{Name: t, Finished: true, Detail: "no retention"})
	}
	return out, nil
}

func countRows(ctx context.Context, env *benchEnv, tables []string) ([]int64, error) {
	out := make([]int64, len(tables))
	for i, t := range tables {
		if err := env.Pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{t}.Sanitize()).Scan(&out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// explainOneRow runs sql (a one-row DELETE) under EXPLAIN ANALYZE in a
// transaction it rolls back, and says how long it took and which
// triggers (foreign keys' actions) took the time.
func explainOneRow(ctx context.Context, env *benchEnv, sql, due string) string {
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var plan []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql).Scan(&plan); err != nil {
		return "explaining a one-row delete failed: " + err.Error()
	}
	var p []struct {
		ExecutionTime float64 `json:"Execution Time"`
		Triggers      []struct {
			Name  string  `json:"Trigger Name"`
			Time  float64 `json:"Time"`
			Calls int     `json:"Calls"`
		} `json:"Triggers"`
	}
	if err := json.Unmarshal(plan, &p); err != nil || len(p) != 1 {
		return "unreadable plan"
	}
	parts := []string{fmt.Sprintf("deleting one row takes %.1f ms", p[0].ExecutionTime)}
	for _, t := range p[0].Triggers {
		// A foreign key's action is an internal trigger: name its constraint.
		name := t.Name
		_ = tx.QueryRow(ctx, `SELECT c.conname || ' on ' || c.conrelid::regclass FROM pg_trigger g
			JOIN pg_constraint c ON c.oid = g.tgconstraint WHERE g.tgname = $1`, t.Name).Scan(&name)
		parts = append(parts, fmt.Sprintf("%s %.1f ms", name, t.Time))
	}
	var n int64
	if err := env.Pool.QueryRow(ctx, due).Scan(&n); err == nil {
		parts = append(parts, fmt.Sprintf("%d rows due: about %s at that rate", n,
			(time.Duration(p[0].ExecutionTime*float64(n))*time.Millisecond).Round(time.Minute)))
	}
	return strings.Join(parts, ", ")
}

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The history bench: one account of 200 domains seeded with 90 days of
// history at size S, then M = 10x S (and L = 30x S on request), each size
// in a fresh database seeded in arrival order; once every size is seeded,
// the p50 and p99 of every aggregate endpoint and dashboard page at each
// size, the sizes measured side by side in alternating turns, next to the
// events page as the flat baseline; the bytes per row of the firehose
// tables; at M, the time the production retention path takes to remove
// the oldest month.

// historySize is one size of the history bench.
type historySize struct {
	Name   string
	Factor float64 // times S
}

// Rows of the measured account at S; the noise accounts add
// historyNoiseAccounts x historyNoiseShare of each.
const (
	historyMessageEventsS = 1_000_000
	historyEventsS        = 100_000
	historyDMARCRecordsS  = 100_000
	historyDomains        = 200
	historyNoiseAccounts  = 4
	historyNoiseShare     = 0.05
	historyNoiseDomains   = 5
	// historyEventsPerPayload is how many message events one provider
	// payload carries on average: SES and Postmark post one event per
	// request, SendGrid and Mailgun batch.
	historyEventsPerPayload = 10
	historySpanDays         = 90
)

// historySizeResult is what one size measured.
type historySizeResult struct {
	Size       historySize
	Rows       historyRows
	Seeded     time.Duration
	LoadBefore string // /proc/loadavg when the measurement started
	LoadAfter  string
	Endpoints  []historyLoad // in historyEndpoints order
	Storage    []tableStorage
	DBBytes    int64
	Retention  []retentionResult // at M only
}

func benchHistory(ctx context.Context, _ *benchEnv) (err error) {
	fraction := historyFraction()
	sizes := []historySize{{"S", 1}, {"M", 10}}
	// Every size stays up until all are measured: the sizes are measured
	// side by side, alternating, so that each ratio compares them under the
	// same load of the machine.
	var runs []*historyRun
	defer func() {
		for _, r := range runs {
			r.close()
		}
	}()
	for _, size := range sizes {
		size.Factor *= fraction
		r, err := seedHistorySize(ctx, size, size.Name == "M")
		if err != nil {
			return fmt.Errorf("size %s: %w", size.Name, err)
		}
		runs = append(runs, r)
	}
	if os.Getenv("BENCH_HISTORY_L") == "1" {
		l := historySize{"L", 30 * fraction}
		if ok, why := historyDiskAllows(ctx, runs[len(runs)-1].res, 3); !ok {
			fmt.Printf("size L skipped: %s\n", why)
		} else {
			r, err := seedHistorySize(ctx, l, false)
			if err != nil {
				return fmt.Errorf("size L: %w", err)
			}
			runs = append(runs, r)
		}
	} else {
		fmt.Println("size L (30x S) not run: set BENCH_HISTORY_L=1 to run it where the disk allows")
	}
	waitQuiet(ctx)
	if err := measureHistorySizes(ctx, runs); err != nil {
		return err
	}
	results := make([]historySizeResult, len(runs))
	for i, r := range runs {
		printHistorySize(r.res)
		if r.retention {
			if r.res.Retention, err = measureRetention(ctx, r.env, r.seed); err != nil {
				return fmt.Errorf("size %s: %w", r.res.Size.Name, err)
			}
		}
		results[i] = r.res
	}
	printHistoryTable(results)
	printHistoryStorage(results)
	return nil
}

// historyRun is one size seeded and served, until close.
type historyRun struct {
	res       historySizeResult
	env       *benchEnv
	srv       *historyServer
	seed      *historySeed
	retention bool // measure retention once the endpoints are measured
}

func (r *historyRun) close() {
	r.srv.close()
	r.env.close()
}

// seedHistorySize seeds a fresh database at size, serves it, and measures
// its storage; the database is dropped at close.
func seedHistorySize(ctx context.Context, size historySize, retention bool) (*historyRun, error) {
	env, err := newBenchEnv(ctx)
	if err != nil {
		return nil, err
	}
	srv, err := startHistoryServer(ctx, env)
	if err != nil {
		env.close()
		return nil, err
	}
	r := &historyRun{res: historySizeResult{Size: size}, env: env, srv: srv, retention: retention}
	t0 := time.Now()
	if r.seed, err = seedHistory(ctx, env, srv, size); err != nil {
		r.close()
		return nil, err
	}
	r.res.Seeded, r.res.Rows = time.Since(t0), r.seed.Rows
	fmt.Printf("== history %s (%gx S): seeded in %s: %s\n", size.Name, size.Factor, r.res.Seeded.Round(time.Second), r.seed.Rows)
	if r.res.Storage, r.res.DBBytes, err = measureStorage(ctx, env); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// historyFraction scales every size (BENCH_HISTORY_FRACTION, default 1):
// a smoke run of the whole bench at 0.01 takes a minute.
func historyFraction() float64 {
	if s := os.Getenv("BENCH_HISTORY_FRACTION"); s != "" {
		if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 && f <= 1 {
			return f
		}
	}
	return 1
}

// waitQuiet holds the measurement until the machine's 1-minute load is
// under BENCH_QUIET_LOAD (unset: no wait), checking every 10 s for at
// most an hour, so that a long seeding can share the machine with other
// work while the measurement does not. It prints what it waited for.
func waitQuiet(ctx context.Context) {
	limit, err := strconv.ParseFloat(os.Getenv("BENCH_QUIET_LOAD"), 64)
	if err != nil || limit <= 0 {
		return
	}
	start := time.Now()
	for time.Since(start) < time.Hour {
		if l := loadAverage(); l != "unknown" {
			if one, err := strconv.ParseFloat(strings.Fields(l)[0], 64); err == nil && one < limit {
				fmt.Printf("quiet     load average %s under %g after %s\n", l, limit, time.Since(start).Round(time.Second))
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
	}
	fmt.Printf("quiet     load average %s still not under %g after an hour: measuring anyway\n", loadAverage(), limit)
}

// loadAverage is the machine's load (1, 5 and 15 minutes) as uptime
// prints it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// historyDiskAllows says whether the database server's disk holds a size
// factor times the last one measured (its database size, with a third
// more for the seeding's own overhead and 10 GiB left for everyone else).
func historyDiskAllows(ctx context.Context, last historySizeResult, factor float64) (bool, string) {
	env, err := newBenchEnv(ctx)
	if err != nil {
		return false, err.Error()
	}
	defer env.close()
	var dir string
	if err := env.Pool.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		return false, "the server's data directory is not readable: " + err.Error()
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false, "the server's data directory is not on this machine: " + err.Error()
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	need := int64(float64(last.DBBytes)*factor*4/3) + 10<<30
	if free < need {
		return false, fmt.Sprintf("needs about %.1f GiB free (%.0fx the %s database of %.1f GiB, a third more, 10 GiB spare), %.1f GiB free",
			gib(need), factor, last.Size.Name, gib(last.DBBytes), gib(free))
	}
	return true, ""
}

func gib(b int64) float64 { return float64(b) / (1 << 30) }

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
// in a fresh database seeded in arrival order; at every size the p50 and
// p99 of every aggregate endpoint and dashboard page next to the events
// page as the flat baseline, and the bytes per row of the firehose tables;
// at M, the time the production retention path takes to remove the oldest
// month.

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

func benchHistory(ctx context.Context, _ *benchEnv) error {
	fraction := historyFraction()
	sizes := []historySize{{"S", 1}, {"M", 10}}
	var results []historySizeResult
	for _, size := range sizes {
		size.Factor *= fraction
		res, err := runHistorySize(ctx, size, size.Name == "M")
		if err != nil {
			return fmt.Errorf("size %s: %w", size.Name, err)
		}
		results = append(results, res)
	}
	if os.Getenv("BENCH_HISTORY_L") == "1" {
		l := historySize{"L", 30 * fraction}
		if ok, why := historyDiskAllows(ctx, results[len(results)-1], 3); !ok {
			fmt.Printf("size L skipped: %s\n", why)
		} else {
			res, err := runHistorySize(ctx, l, false)
			if err != nil {
				return fmt.Errorf("size L: %w", err)
			}
			results = append(results, res)
		}
	} else {
		fmt.Println("size L (30x S) not run: set BENCH_HISTORY_L=1 to run it where the disk allows")
	}
	printHistoryTable(results)
	printHistoryStorage(results)
	return nil
}

// runHistorySize seeds a fresh database at size, measures it, and drops it.
func runHistorySize(ctx context.Context, size historySize, retention bool) (historySizeResult, error) {
	res := historySizeResult{Size: size}
	env, err := newBenchEnv(ctx)
	if err != nil {
		return res, err
	}
	defer env.close()
	srv, err := startHistoryServer(ctx, env)
	if err != nil {
		return res, err
	}
	defer srv.close()
	t0 := time.Now()
	seed, err := seedHistory(ctx, env, srv, size)
	if err != nil {
		return res, err
	}
	res.Seeded, res.Rows = time.Since(t0), seed.Rows
	fmt.Printf("== history %s (%gx S): seeded in %s: %s\n", size.Name, size.Factor, res.Seeded.Round(time.Second), seed.Rows)
	res.LoadBefore = loadAverage()
	if res.Endpoints, err = measureHistoryEndpoints(ctx, srv, seed); err != nil {
		return res, err
	}
	res.LoadAfter = loadAverage()
	if res.Storage, res.DBBytes, err = measureStorage(ctx, env); err != nil {
		return res, err
	}
	printHistorySize(res)
	if retention {
		if res.Retention, err = measureRetention(ctx, env, seed); err != nil {
			return res, err
		}
	}
	return res, nil
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

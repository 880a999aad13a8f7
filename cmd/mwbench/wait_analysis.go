package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dnstest"
)

const (
	waitWorkerAppName = "mwbench-analysis"
	// waitAnalysisDrain bounds the wait for the analyses still queued when
	// the SMTP load ends.
	waitAnalysisDrain = 2 * time.Minute
)

// waitDNSZone is what the analysis of a bench message looks up, served by
// a loopback DNS server: the MAIL FROM and From domain's SPF (passing for
// 127.0.0.1) and DMARC record, the client's PTR name and the HELO name's
// address and SPF. The messages are not DKIM-signed.
const waitDNSZone = `$TTL 300
example.org.             TXT "v=spf1 ip4:127.0.0.1 -all"
_dmarc.example.org.      TXT "v=DMARC1; p=none; rua=mailto:dmarc@example.org"
bench.example.           A   127.0.0.1
bench.example.           TXT "v=spf1 a -all"
1.0.0.127.in-addr.arpa.  PTR bench.example.
`

// ackLog notes when each message's DATA was answered 250, per recipient
// address, in sending order.
type ackLog struct {
	mu  sync.Mutex
	ack map[string][]time.Time
}

func newAckLog() *ackLog { return &ackLog{ack: map[string][]time.Time{}} }

func (l *ackLog) add(addr string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	addr = strings.ToLower(addr)
	l.ack[addr] = append(l.ack[addr], at)
}

// analysisWorker is the `mailwatch worker --queues=analysis` process of the
// wait bench and its loopback DNS server.
type analysisWorker struct {
	Pid  int
	dns  *dnstest.Server
	stop func()
}

// Stop ends the worker (SIGTERM) and its DNS server.
func (w *analysisWorker) Stop() { w.stop() }

// startAnalysisWorker starts bin as `mailwatch worker --queues=analysis`
// against the bench database, as production runs the analysis: its own
// pool (DB_MAX_CONNS 20), WORKER_CONCURRENCY and the per-account bound at
// their defaults, no spam filter, DNS_RESOLVER a loopback server serving
// waitDNSZone (no lookup leaves the machine). It waits for its /readyz.
func startAnalysisWorker(ctx context.Context, bin string, env *benchEnv) (*analysisWorker, error) {
	dns, err := dnstest.NewServer(waitDNSZone)
	if err != nil {
		return nil, err
	}
	opsAddr, err := freeLoopbackAddr()
	if err != nil {
		_ = dns.Close()
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "worker", "--queues=analysis")
	cmd.Env = append(waitProcessEnv(env, waitWorkerAppName),
		"DNS_RESOLVER="+dns.Addr(), "BLOCKLIST_RESOLVER=",
		"SPAMD_ADDR=", "RSPAMD_URL=",
		"DB_MAX_CONNS="+strconv.Itoa(waitPoolSize),
		"METRICS_ADDR="+opsAddr, "REDIS_URL=", "LOG_LEVEL=warn", "LOG_FORMAT=text",
		"SHUTDOWN_TIMEOUT=5s",
	)
	quiet := &switchWriter{w: os.Stderr}
	cmd.Stdout, cmd.Stderr = quiet, quiet
	if err := cmd.Start(); err != nil {
		_ = dns.Close()
		return nil, fmt.Errorf("error starting mailwatch worker: %w", err)
	}
	stop := func() {
		quiet.off.Store(true)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = dns.Close()
	}
	if err := waitReady(ctx, "http://"+opsAddr+"/readyz"); err != nil {
		stop()
		return nil, fmt.Errorf("the analysis worker: %w", err)
	}
	return &analysisWorker{Pid: cmd.Process.Pid, dns: dns, stop: stop}, nil
}

// analysisRow is one analysed bench message: its receiver's address, its
// arrival number there, and when its analysis job finished (the report
// stored: the job completes after the analysis's transaction commits) and
// started.
type analysisRow struct {
	Address             string
	Seq                 int64
	Finished, Attempted time.Time
}

// analysisResult is the analysis figures of one wait run.
type analysisResult struct {
	Analysed, Unmatched, Pending int
	Rate                         float64 // analyses per second, first 250 to last stored
	Latencies, Runs              []time.Duration
}

// matchAnalyses pairs each analysed message with the 250 of its DATA: the
// n-th message of a receiver (by seq) with the n-th 250 for its address.
// An address whose counts differ (a 250 lost after the message was
// stored) is left out and counted as unmatched. Latencies and run times
// come back sorted; rate is over the first 250 to the last finished job.
func matchAnalyses(acks map[string][]time.Time, rows []analysisRow) analysisResult {
	byAddr := map[string][]analysisRow{}
	for _, r := range rows {
		a := strings.ToLower(r.Address)
		byAddr[a] = append(byAddr[a], r)
	}
	var res analysisResult
	var first, last time.Time
	for addr, rs := range byAddr {
		sent := acks[addr]
		if len(sent) != len(rs) {
			res.Unmatched += len(rs)
			continue
		}
		sort.Slice(rs, func(i, j int) bool { return rs[i].Seq < rs[j].Seq })
		for i, r := range rs {
			res.Latencies = append(res.Latencies, r.Finished.Sub(sent[i]))
			res.Runs = append(res.Runs, r.Finished.Sub(r.Attempted))
			if first.IsZero() || sent[i].Before(first) {
				first = sent[i]
			}
			if r.Finished.After(last) {
				last = r.Finished
			}
		}
	}
	res.Analysed = len(res.Latencies)
	if res.Analysed > 0 && last.After(first) {
		res.Rate = float64(res.Analysed) / last.Sub(first).Seconds()
	}
	sort.Slice(res.Latencies, func(i, j int) bool { return res.Latencies[i] < res.Latencies[j] })
	sort.Slice(res.Runs, func(i, j int) bool { return res.Runs[i] < res.Runs[j] })
	return res
}

// collectAnalyses waits (up to waitAnalysisDrain) until no analysis job
// is left to run, then reads the stored ones after the run (reading them
// during the load would add to it) and matches them with acks.
func collectAnalyses(ctx context.Context, env *benchEnv, acks *ackLog) (analysisResult, error) {
	deadline := time.Now().Add(waitAnalysisDrain)
	var pending int
	for {
		err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'receiver_message_analyze'
			AND state NOT IN ('completed', 'discarded', 'cancelled')`).Scan(&pending)
		if err != nil {
			return analysisResult{}, err
		}
		if pending == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	rows, err := env.Pool.Query(ctx, `SELECT r.address, m.seq, j.finalized_at, j.attempted_at
		FROM river_job j
		JOIN receiver_messages m ON m.id = (j.args->>'message_id')::uuid
		JOIN receivers r ON r.id = m.receiver_id
		WHERE j.kind = 'receiver_message_analyze' AND j.state = 'completed' AND m.analysis IS NOT NULL`)
	if err != nil {
		return analysisResult{}, err
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (analysisRow, error) {
		var a analysisRow
		err := r.Scan(&a.Address, &a.Seq, &a.Finished, &a.Attempted)
		return a, err
	})
	if err != nil {
		return analysisResult{}, err
	}
	acks.mu.Lock()
	res := matchAnalyses(acks.ack, got)
	acks.mu.Unlock()
	res.Pending = pending
	return res, nil
}

// metOrNot says whether a wait run met the wake targets.
func metOrNot(p50, p99 time.Duration) string {
	if p50 < 20*time.Millisecond && p99 < 100*time.Millisecond {
		return "met"
	}
	return "not met"
}

package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/webhook"
)

// minimalPushArgs is the baseline's job: the event id only, as a delivery
// job carries the delivery id.
type minimalPushArgs struct {
	EventID uuid.UUID `json:"event_id"`
}

func (minimalPushArgs) Kind() string { return "bench_minimal_push" }

// minimalPushWorker sends the same signed push a delivery sends (same
// client, payload shape, Standard Webhooks signature, receiver) and does
// nothing else: no rows read, no attempt or outcome recorded. It is the
// ceiling of a River worker that pushes webhooks.
type minimalPushWorker struct {
	river.WorkerDefaults[minimalPushArgs]
	client *http.Client
	url    string
	secret string
}

func (w *minimalPushWorker) Work(ctx context.Context, job *river.Job[minimalPushArgs]) error {
	body, err := webhook.Payload("receiver_message_received", job.CreatedAt, map[string]any{
		"id": job.Args.EventID, "receiver_id": job.Args.EventID, "message_id": job.Args.EventID, "channel": "email", "subject": "benchmark",
	})
	if err != nil {
		return err
	}
	a := webhook.Send(ctx, w.client, webhook.Request{URL: w.url, MsgID: job.Args.EventID.String(), Body: body, Secret: w.secret})
	if !a.Delivered {
		return errors.New(a.Error)
	}
	return nil
}

// benchMinimalPush drains n queued minimal pushes with one River client
// configured as the delivery worker is (same MaxWorkers, cooldown, pool
// size): the baseline deliveries/s are compared with.
func benchMinimalPush(ctx context.Context, env *benchEnv, rc *benchReceiver, client *http.Client, n int) (flowResult, error) {
	pool, err := dbutil.NewPool(ctx, env.URL, benchWorkerConns())
	if err != nil {
		return flowResult{}, err
	}
	defer pool.Close()
	workers := river.NewWorkers()
	river.AddWorker(workers, &minimalPushWorker{client: client, url: rc.url, secret: webhook.GenerateSecret()})
	worker, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger: env.Logger, Workers: workers, FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 200 * time.Millisecond,
		Queues: map[string]river.QueueConfig{"bench_minimal": {MaxWorkers: benchWebhookWorkers}},
	})
	if err != nil {
		return flowResult{}, err
	}
	producer, err := river.NewClient(riverpgxv5.New(env.Pool), &river.Config{Logger: env.Logger})
	if err != nil {
		return flowResult{}, err
	}
	ids := make([]uuid.UUID, 0, n)
	for len(ids) < n {
		batch := make([]river.InsertManyParams, min(1000, n-len(ids)))
		for i := range batch {
			id := uuid.New()
			ids = append(ids, id)
			batch[i] = river.InsertManyParams{Args: minimalPushArgs{EventID: id}, InsertOpts: &river.InsertOpts{Queue: "bench_minimal"}}
		}
		if _, err := producer.InsertMany(ctx, batch); err != nil {
			return flowResult{}, err
		}
	}
	if err := rc.settle(ctx); err != nil {
		return flowResult{}, err
	}
	t0 := time.Now()
	if err := worker.Start(ctx); err != nil {
		return flowResult{}, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = worker.Stop(stopCtx)
	}()
	var first, last time.Time
	for _, id := range ids {
		select {
		case at := <-rc.expect(id):
			if at.After(last) {
				last = at
			}
			if first.IsZero() || at.Before(first) {
				first = at
			}
		case <-time.After(2 * time.Minute):
			return flowResult{}, fmt.Errorf("minimal push %s never arrived", id)
		}
	}
	return flowResult{n: n, start: t0, lastDone: last, firstDone: first}, nil
}

// benchWorkerProcesses drains n queued deliveries with k `mailwatch worker
// --queues=webhooks` processes of the built binary (MAILWATCH_BIN, which
// scripts/bench builds), started once the events are queued and stopped
// with SIGTERM after the last push. The processes' start-up is left out by
// timing from the first push to arrive (rateFromFirst).
func benchWorkerProcesses(ctx context.Context, env *benchEnv, rc *benchReceiver, emit emitFunc, k, n int) (flowResult, error) {
	stop := func() {}
	defer func() { stop() }()
	return rc.runDrain(ctx, n, emit, func() error {
		var err error
		stop, err = startWorkerProcesses(ctx, env, k)
		return err
	})
}

// startWorkerProcesses starts k `mailwatch worker --queues=webhooks`
// processes of the built binary (MAILWATCH_BIN, which scripts/bench
// builds), each with extraEnv added to benchWorkerCmd's; stop sends them
// SIGTERM, waits up to 15 s for each and prints the log of any that failed.
func startWorkerProcesses(ctx context.Context, env *benchEnv, k int, extraEnv ...string) (stop func(), err error) {
	bin := os.Getenv("MAILWATCH_BIN")
	if bin == "" {
		bin = "bin/mailwatch"
	}
	var procs []*exec.Cmd
	var logs []*bytes.Buffer
	stop = func() {
		for i, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- p.Wait() }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = p.Process.Kill()
				<-done
			}
			if p.ProcessState != nil && !p.ProcessState.Success() && logs[i].Len() > 0 {
				fmt.Fprintf(os.Stderr, "worker process %d:\n%s", i+1, logs[i])
			}
		}
		procs = nil
	}
	for range k {
		cmd := benchWorkerCmd(ctx, env, bin)
		cmd.Env = append(cmd.Env, extraEnv...)
		var buf bytes.Buffer
		cmd.Stderr = &buf
		if err := cmd.Start(); err != nil {
			return stop, fmt.Errorf("error starting %s worker (scripts/bench builds it; MAILWATCH_BIN overrides): %w", bin, err)
		}
		procs = append(procs, cmd)
		logs = append(logs, &buf)
	}
	return stop, nil
}

// benchWorkerCmd is one `mailwatch worker --queues=webhooks` process of the
// built binary bin, configured for the bench's database, keyring and
// loopback receivers (WEBHOOK_CONCURRENCY 200; other settings, such as the
// fairness bounds, from the bench's own environment or their defaults).
func benchWorkerCmd(ctx context.Context, env *benchEnv, bin string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, bin, "worker", "--queues=webhooks")
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+env.URL,
		"MAILWATCH_SECRET_KEY="+base64.StdEncoding.EncodeToString(make([]byte, 32)), // the bench keyring's
		"WEBHOOK_ALLOWED_CIDRS=127.0.0.1/32,::1/128",
		"WEBHOOK_CONCURRENCY="+strconv.Itoa(benchWebhookWorkers),
		"DB_MAX_CONNS="+strconv.Itoa(benchWorkerConns()),
		"METRICS_ADDR=127.0.0.1:0", "REDIS_URL=", "LOG_LEVEL=warn", "LOG_FORMAT=text",
	)
	return cmd
}

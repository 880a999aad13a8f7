package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
	var last time.Time
	for _, id := range ids {
		select {
		case at := <-rc.expect(id):
			if at.After(last) {
				last = at
			}
		case <-time.After(2 * time.Minute):
			return flowResult{}, fmt.Errorf("minimal push %s never arrived", id)
		}
	}
	return flowResult{n: n, start: t0, lastDone: last}, nil
}

// benchTwoWorkers drains n queued deliveries with two delivery worker
// clients, each with its own pool as two `mailwatch worker` processes
// would have (in this one process: they share its CPU and Go runtime).
func benchTwoWorkers(ctx context.Context, env *benchEnv, rc *benchReceiver, emit emitFunc, newWorker func() (*river.Client[pgx.Tx], func(), error), n int) (flowResult, error) {
	var stops []func()
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	return rc.runDrain(ctx, n, emit, func() error {
		for range 2 {
			w, stop, err := newWorker()
			if err != nil {
				return err
			}
			stops = append(stops, stop)
			if err := w.Start(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

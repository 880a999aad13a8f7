package jobs

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailwatch/mailwatch/internal/queues"
)

// UnreadyAfter is the documented bound on a worker's readiness: its /readyz
// answers 503 once its River client has stopped, or once it has not
// reached Postgres, or a queue it works has neither fetched nor had a job
// running, for this long. Readiness returns with the first successful
// check after the database is back.
const UnreadyAfter = 10 * time.Second

// observeInterval is how often the observer checks the database and the
// leadership.
const observeInterval = time.Second

// rescueError is the error River's rescuer records on a job whose process
// stopped working it.
const rescueError = "Stuck job rescued by JobRescuer"

// Observer watches a worker process's River client: whether it runs, fetches
// and reaches the database (for /readyz), whether it is the leader (logged
// at info on every change, and exported as mailwatch_river_leader), and
// the job counters River reports through its event subscription.
type Observer struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	now    func() time.Time
	bound  time.Duration

	mu        sync.Mutex
	clientID  string
	started   time.Time // zero until Run starts
	stopped   bool
	dbOK      time.Time // last successful check of the database
	dbErr     error     // last failed check, nil after a success
	dbDownLog bool      // the outage was logged; log the recovery once
	leader    bool
	queues    map[string]*queueState

	leaderGauge prometheus.Gauge
	completions *prometheus.CounterVec
	errorsTotal *prometheus.CounterVec
	discards    *prometheus.CounterVec
	rescues     *prometheus.CounterVec
	cancels     *prometheus.CounterVec
	dropped     prometheus.Counter
}

type queueState struct {
	lastFetch time.Time
	running   int
	capacity  int
}

// NewObserver returns an observer of the queues a worker will work,
// registering its metrics and the per-state job gauges in reg (which may be
// nil).
func NewObserver(pool *pgxpool.Pool, logger *slog.Logger, reg *prometheus.Registry) *Observer {
	o := &Observer{
		pool: pool, logger: logger, now: time.Now, bound: UnreadyAfter,
		queues: map[string]*queueState{},
		leaderGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mailwatch_river_leader",
			Help: "1 while this worker is River's elected leader (runs periodic jobs, the rescuer and the cleaners), else 0.",
		}),
		completions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailwatch_river_job_completions_total",
			Help: "Jobs this worker completed, per queue and kind.",
		}, []string{"queue", "kind"}),
		errorsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailwatch_river_job_errors_total",
			Help: "Job runs on this worker that returned an error or panicked (retried or discarded), per queue and kind.",
		}, []string{"queue", "kind"}),
		discards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailwatch_river_job_discards_total",
			Help: "Jobs this worker discarded after their last attempt failed, per queue and kind.",
		}, []string{"queue", "kind"}),
		rescues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailwatch_river_job_rescues_total",
			Help: "Jobs this worker started again after River's rescuer found them stuck (their previous process died or overran the rescue window), per queue and kind.",
		}, []string{"queue", "kind"}),
		cancels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailwatch_river_job_cancels_total",
			Help: "Jobs this worker cancelled (by the job itself or an operator), per queue and kind.",
		}, []string{"queue", "kind"}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mailwatch_river_events_dropped_total",
			Help: "River job events the metrics subscription missed because its buffer was full (the job counters undercount by this much).",
		}),
	}
	if reg != nil {
		o.leaderGauge = register(reg, o.leaderGauge)
		o.completions = register(reg, o.completions)
		o.errorsTotal = register(reg, o.errorsTotal)
		o.discards = register(reg, o.discards)
		o.rescues = register(reg, o.rescues)
		o.cancels = register(reg, o.cancels)
		o.dropped = register(reg, o.dropped)
		register[prometheus.Collector](reg, &jobStateCollector{pool: pool})
		register[prometheus.Collector](reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mailwatch_worker_ready",
			Help: "1 while this worker's /readyz would answer 200 (River running, fetching, reaching Postgres), else 0.",
		}, func() float64 {
			if o.Health().Ready {
				return 1
			}
			return 0
		}))
	}
	return o
}

// configure installs the observer's fetch hook and work middleware in a
// River configuration (NewClient calls it).
func (o *Observer) configure(cfg *river.Config) {
	o.mu.Lock()
	for q, qc := range cfg.Queues {
		o.queues[q] = &queueState{capacity: qc.MaxWorkers}
	}
	o.mu.Unlock()
	cfg.Hooks = append(cfg.Hooks, river.HookMetricEmitFunc(o.metricEmit))
	cfg.Middleware = append(cfg.Middleware, &observerMiddleware{o: o})
}

// metricEmit receives River's fetch metrics: each one follows a successful
// fetch from a queue.
func (o *Observer) metricEmit(_ context.Context, params *rivertype.HookMetricEmitParams) {
	m, ok := params.Metric.(*rivertype.JobGetAvailableDurationMetric)
	if !ok {
		return
	}
	o.mu.Lock()
	if q := o.queues[m.Queue]; q != nil {
		q.lastFetch = o.now()
	}
	o.mu.Unlock()
}

type observerMiddleware struct {
	river.MiddlewareDefaults
	o *Observer
}

// Work counts the jobs running per queue (a queue whose every slot is busy
// does not fetch, and is not stalled) and rescued jobs as they run again.
func (m *observerMiddleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	m.o.touch(job.Queue, job.Kind)
	if n := len(job.Errors); n > 0 && job.Errors[n-1].Error == rescueError {
		m.o.rescues.WithLabelValues(job.Queue, job.Kind).Inc()
	}
	m.o.mu.Lock()
	q := m.o.queues[job.Queue]
	if q != nil {
		q.running++
	}
	m.o.mu.Unlock()
	defer func() {
		m.o.mu.Lock()
		if q != nil {
			q.running--
			q.lastFetch = m.o.now() // a finished job frees a slot: not stalled
		}
		m.o.mu.Unlock()
	}()
	return doInner(ctx)
}

// touch creates a queue and kind's counters at zero, so that dashboards and
// alert rules see every kind that has run rather than no series.
func (o *Observer) touch(queue, kind string) {
	for _, c := range []*prometheus.CounterVec{o.completions, o.errorsTotal, o.discards, o.rescues, o.cancels} {
		c.WithLabelValues(queue, kind)
	}
}

// Run watches client until ctx ends: the job event subscription for the
// counters, and a check of the database and the leadership every second.
func (o *Observer) Run(ctx context.Context, client *river.Client[pgx.Tx]) {
	o.mu.Lock()
	o.clientID = client.ID()
	o.started = o.now()
	o.dbOK = o.started
	for _, q := range o.queues {
		q.lastFetch = o.started
	}
	o.mu.Unlock()

	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: 10_000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancel()
	tick := time.NewTicker(observeInterval)
	defer tick.Stop()
	o.check(ctx)
	for {
		select {
		case <-ctx.Done():
			o.setLeader(false)
			return
		case <-client.Stopped():
			o.mu.Lock()
			o.stopped = true
			o.mu.Unlock()
			o.setLeader(false)
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			o.count(ev)
		case <-tick.C:
			o.check(ctx)
		}
	}
}

func (o *Observer) count(ev *river.Event) {
	if ev.Job == nil {
		return
	}
	q, k := ev.Job.Queue, ev.Job.Kind
	switch ev.Kind {
	case river.EventKindJobCompleted:
		o.completions.WithLabelValues(q, k).Inc()
	case river.EventKindJobCancelled:
		o.cancels.WithLabelValues(q, k).Inc()
	case river.EventKindJobFailed:
		o.errorsTotal.WithLabelValues(q, k).Inc()
		if ev.Job.State == rivertype.JobStateDiscarded {
			o.discards.WithLabelValues(q, k).Inc()
		}
	}
}

// check reads the current leader, which doubles as the database check.
func (o *Observer) check(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, min(o.bound/2, 2*time.Second))
	defer cancel()
	var leaderID string
	err := o.pool.QueryRow(qctx, "SELECT leader_id FROM river_leader WHERE expires_at > now()").Scan(&leaderID)
	if errors.Is(err, pgx.ErrNoRows) {
		err = nil
	}
	if ctx.Err() != nil {
		return
	}
	o.mu.Lock()
	id := o.clientID
	if err != nil {
		o.dbErr = err
		down := o.now().Sub(o.dbOK)
		logIt := !o.dbDownLog && down >= o.bound
		if logIt {
			o.dbDownLog = true
		}
		o.mu.Unlock()
		if logIt {
			o.logger.Warn("worker lost the database; /readyz answers 503 until it is back",
				slog.Duration("for", down.Round(time.Millisecond)), slog.Any("error", err))
		}
		return
	}
	o.dbErr = nil
	down := o.now().Sub(o.dbOK)
	o.dbOK = o.now()
	recovered := o.dbDownLog
	o.dbDownLog = false
	o.mu.Unlock()
	if recovered {
		o.logger.Info("worker reaches the database again", slog.Duration("after", down.Round(time.Millisecond)))
	}
	o.setLeader(leaderID == id)
}

func (o *Observer) setLeader(leader bool) {
	o.mu.Lock()
	changed := leader != o.leader
	o.leader = leader
	id := o.clientID
	o.mu.Unlock()
	if leader {
		o.leaderGauge.Set(1)
	} else {
		o.leaderGauge.Set(0)
	}
	if !changed {
		return
	}
	if leader {
		o.logger.Info("this worker is now River's leader (periodic jobs, rescuer, cleaners)", slog.String("client_id", id))
	} else {
		o.logger.Info("this worker is no longer River's leader", slog.String("client_id", id))
	}
}

// QueueHealth is one queue's part of a worker's readiness.
type QueueHealth struct {
	SinceFetchSeconds float64 `json:"since_fetch_seconds"`
	Running           int     `json:"running"`
	Capacity          int     `json:"capacity"`
	OK                bool    `json:"ok"`
}

// Health is a worker's readiness as /readyz reports it.
type Health struct {
	Ready                bool                   `json:"ready"`
	Detail               string                 `json:"detail,omitempty"`
	Running              bool                   `json:"running"`
	Leader               bool                   `json:"leader"`
	ClientID             string                 `json:"client_id"`
	SinceDatabaseSeconds float64                `json:"since_database_seconds"`
	UnreadyAfterSeconds  float64                `json:"unready_after_seconds"`
	Queues               map[string]QueueHealth `json:"queues"`
}

// Health reports whether the worker is ready: its River client has started
// and not stopped, it reached the database within UnreadyAfter, and every
// queue it works fetched (or had a job running) within UnreadyAfter.
func (o *Observer) Health() Health {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	h := Health{
		Running:             !o.started.IsZero() && !o.stopped,
		Leader:              o.leader,
		ClientID:            o.clientID,
		UnreadyAfterSeconds: o.bound.Seconds(),
		Queues:              map[string]QueueHealth{},
	}
	var problems []string
	switch {
	case o.started.IsZero():
		problems = append(problems, "River has not started")
	case o.stopped:
		problems = append(problems, "River has stopped")
	}
	if !o.started.IsZero() {
		h.SinceDatabaseSeconds = now.Sub(o.dbOK).Seconds()
		if now.Sub(o.dbOK) > o.bound {
			problems = append(problems, "database unreachable")
		}
	}
	names := make([]string, 0, len(o.queues))
	for name := range o.queues {
		names = append(names, name)
	}
	sort.Strings(names)
	var stalled []string
	for _, name := range names {
		q := o.queues[name]
		qh := QueueHealth{Running: q.running, Capacity: q.capacity, OK: true}
		if !o.started.IsZero() {
			qh.SinceFetchSeconds = now.Sub(q.lastFetch).Seconds()
			if q.running == 0 && now.Sub(q.lastFetch) > o.bound {
				qh.OK = false
				stalled = append(stalled, name)
			}
		}
		h.Queues[name] = qh
	}
	if len(stalled) > 0 {
		problems = append(problems, "not fetching from "+strings.Join(stalled, ", "))
	}
	h.Ready = len(problems) == 0
	h.Detail = strings.Join(problems, "; ")
	return h
}

// jobStateCollector reports River's job table per queue, kind and state at
// scrape time: what is waiting, running and scheduled across the fleet (every
// worker reports the same numbers; alert on max).
type jobStateCollector struct {
	pool *pgxpool.Pool
}

var (
	jobStateDesc = prometheus.NewDesc("mailwatch_river_jobs",
		"River jobs per queue, kind and state (available, running, scheduled, retryable), across the fleet.",
		[]string{"queue", "kind", "state"}, nil)
	oldestAvailableDesc = prometheus.NewDesc("mailwatch_river_oldest_available_job_age_seconds",
		"Age of the oldest job available to run (since it became runnable), per queue and kind; 0 when none waits.",
		[]string{"queue", "kind"}, nil)
	oldestRunningDesc = prometheus.NewDesc("mailwatch_river_oldest_running_job_seconds",
		"How long the longest-running job has been running, per queue and kind (stuck jobs grow it towards JOB_RESCUE_AFTER).",
		[]string{"queue", "kind"}, nil)
	jobStateUpDesc = prometheus.NewDesc("mailwatch_river_jobs_scrape_ok",
		"1 when the River job counts above were read from the database at this scrape, 0 when the query failed.", nil, nil)
)

func (c *jobStateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobStateDesc
	ch <- oldestAvailableDesc
	ch <- oldestRunningDesc
	ch <- jobStateUpDesc
}

func (c *jobStateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := c.pool.Query(ctx, `
SELECT queue, kind, state::text, count(*),
       coalesce(extract(epoch FROM now() - min(scheduled_at) FILTER (WHERE state = 'available')), 0)::float8,
       coalesce(extract(epoch FROM now() - min(attempted_at) FILTER (WHERE state = 'running')), 0)::float8
FROM river_job
WHERE state IN ('available', 'running', 'scheduled', 'retryable')
GROUP BY queue, kind, state`)
	ok := 1.0
	if err == nil {
		for rows.Next() {
			var queue, kind, state string
			var n int64
			var oldestAvail, oldestRun float64
			if err = rows.Scan(&queue, &kind, &state, &n, &oldestAvail, &oldestRun); err != nil {
				break
			}
			ch <- prometheus.MustNewConstMetric(jobStateDesc, prometheus.GaugeValue, float64(n), queue, kind, state)
			switch state {
			case "available":
				ch <- prometheus.MustNewConstMetric(oldestAvailableDesc, prometheus.GaugeValue, max(oldestAvail, 0), queue, kind)
			case "running":
				ch <- prometheus.MustNewConstMetric(oldestRunningDesc, prometheus.GaugeValue, max(oldestRun, 0), queue, kind)
			}
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		ok = 0
	}
	// Every queue also reports zeros under kind="", so that alert rules and
	// dashboards see a zero rather than no series when nothing waits.
	for _, q := range queues.All {
		for _, state := range []string{"available", "running", "scheduled", "retryable"} {
			ch <- prometheus.MustNewConstMetric(jobStateDesc, prometheus.GaugeValue, 0, q, "", state)
		}
		ch <- prometheus.MustNewConstMetric(oldestAvailableDesc, prometheus.GaugeValue, 0, q, "")
		ch <- prometheus.MustNewConstMetric(oldestRunningDesc, prometheus.GaugeValue, 0, q, "")
	}
	ch <- prometheus.MustNewConstMetric(jobStateUpDesc, prometheus.GaugeValue, ok)
}

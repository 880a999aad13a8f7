package api

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/readreplica"
)

// registerPageCache counts the event listing cache's lookups and reports
// its size.
func registerPageCache(reg *prometheus.Registry, c *events.FirstPages) {
	lookups := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mailwatch_events_page_cache_lookups_total",
		Help: "First-page event listings by whether the cached page could be served (hit) or was read from Postgres (miss).",
	}, []string{"result"})
	hit, miss := lookups.WithLabelValues("hit"), lookups.WithLabelValues("miss")
	c.Observe = func(ok bool) {
		if ok {
			hit.Inc()
		} else {
			miss.Inc()
		}
	}
	size := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mailwatch_events_page_cache_bytes",
		Help: "Bytes of events held by the first-page cache of event listings.",
	}, func() float64 { return float64(c.Bytes()) })
	reg.MustRegister(lookups, size)
}

// registerReplicaMetrics reports whether reads use the replica and how far
// behind it is.
func registerReplicaMetrics(reg *prometheus.Registry, r *readreplica.Router) {
	fresh := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mailwatch_db_read_replica_in_use",
		Help: "1 while read-only routes read DATABASE_READ_URL, 0 while they read the primary (replica stale or unreachable).",
	}, func() float64 {
		if r.Fresh() {
			return 1
		}
		return 0
	})
	lag := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "mailwatch_db_read_replica_lag_seconds",
		Help: "The read replica's measured staleness bound; -1 when unknown (unreachable, or behind every sample of DATABASE_READ_MAX_LAG).",
	}, func() float64 {
		d, ok := r.Lag()
		if !ok {
			return -1
		}
		return d.Seconds()
	})
	reg.MustRegister(fresh, lag)
}

type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newHTTPMetrics(reg *prometheus.Registry, pool *pgxpool.Pool) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailwatch_http_requests_total",
			Help: "API requests by method, route pattern and status code.",
		}, []string{"method", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mailwatch_http_request_duration_seconds",
			Help:    "API request latency by method and route pattern.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"method", "route"}),
	}
	reg.MustRegister(m.requests, m.latency)
	registerRuntime(reg)
	if pool != nil {
		reg.MustRegister(NewPoolCollector(pool))
	}
	return m
}

// registerRuntime adds the Go and process collectors once per registry.
func registerRuntime(reg *prometheus.Registry) {
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := reg.Register(c); err != nil {
			if _, dup := err.(prometheus.AlreadyRegisteredError); !dup {
				panic(err)
			}
		}
	}
}

// PoolCollector exports pgxpool statistics.
type PoolCollector struct {
	pool                                    *pgxpool.Pool
	total, idle, acquired, max              *prometheus.Desc
	acquireCount, acquireWait, emptyAcquire *prometheus.Desc
}

// NewPoolCollector returns a collector for pool.
func NewPoolCollector(pool *pgxpool.Pool) *PoolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("mailwatch_db_pool_"+name, help, nil, nil)
	}
	return &PoolCollector{
		pool:         pool,
		total:        d("connections", "Open connections in the pool."),
		idle:         d("idle_connections", "Idle connections in the pool."),
		acquired:     d("acquired_connections", "Connections currently in use."),
		max:          d("max_connections", "Pool size limit."),
		acquireCount: d("acquires_total", "Connections acquired from the pool."),
		acquireWait:  d("acquire_wait_seconds_total", "Time spent waiting for a connection."),
		emptyAcquire: d("empty_acquires_total", "Acquires that had to wait because the pool was empty."),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.total, c.idle, c.acquired, c.max, c.acquireCount, c.acquireWait, c.emptyAcquire} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.TotalConns()))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.IdleConns()))
	ch <- prometheus.MustNewConstMetric(c.acquired, prometheus.GaugeValue, float64(s.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.acquireCount, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.acquireWait, prometheus.CounterValue, s.AcquireDuration().Seconds())
	ch <- prometheus.MustNewConstMetric(c.emptyAcquire, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
}

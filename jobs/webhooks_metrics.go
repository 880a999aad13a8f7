package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailwatch/mailwatch/internal/queues"
)

// webhookMetrics are the push worker's metrics. With no registry they are
// created but never exported.
type webhookMetrics struct {
	deliveries *prometheus.CounterVec
	latency    prometheus.Histogram
}

func newWebhookMetrics(deps Deps) *webhookMetrics {
	m := &webhookMetrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailwatch_webhook_deliveries_total",
			Help: "Webhook delivery runs by outcome: delivered, retrying, failed, snoozed (429/503 Retry-After), cancelled, interrupted, waiting (over WEBHOOK_ACCOUNT_CONCURRENCY or WEBHOOK_HOST_CONCURRENCY; nothing sent).",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mailwatch_webhook_attempt_duration_seconds",
			Help:    "Duration of webhook push attempts, request sent to bounded response body read.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15},
		}),
	}
	if deps.Registry == nil {
		return m
	}
	m.deliveries = register(deps.Registry, m.deliveries)
	m.latency = register(deps.Registry, m.latency)
	if deps.Pool != nil {
		register[prometheus.Collector](deps.Registry, &queueDepthCollector{deps: deps})
	}
	return m
}

// register registers c, or returns the collector already registered under
// the same name (several River clients of one process share a registry).
func register[C prometheus.Collector](reg *prometheus.Registry, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

func (m *webhookMetrics) observe(outcome string, d time.Duration) {
	m.deliveries.WithLabelValues(outcome).Inc()
	if outcome != "interrupted" && outcome != "waiting" {
		m.latency.Observe(d.Seconds())
	}
}

// queueDepthCollector reports the jobs waiting to run per queue, read from
// River's table at scrape time.
type queueDepthCollector struct {
	deps Deps
}

var queueDepthDesc = prometheus.NewDesc("mailwatch_river_queue_available_jobs",
	"River jobs available to run now, per queue (the backlog workers have not picked up).", []string{"queue"}, nil)

func (c *queueDepthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- queueDepthDesc }

func (c *queueDepthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts := map[string]float64{}
	for _, q := range queues.All {
		counts[q] = 0
	}
	rows, err := c.deps.Pool.Query(ctx, "SELECT queue, count(*) FROM river_job WHERE state = 'available' GROUP BY queue")
	if err == nil {
		for rows.Next() {
			var (
				q string
				n int64
			)
			if rows.Scan(&q, &n) == nil {
				counts[q] = float64(n)
			}
		}
		rows.Close()
	}
	for q, n := range counts {
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, n, q)
	}
}

package jobs

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mailwatch/mailwatch/internal/dnscheck"
)

// domainMetrics counts the periodic and on-demand DNS checks a worker runs.
type domainMetrics struct {
	results  *prometheus.CounterVec
	duration prometheus.Histogram
	changes  prometheus.Counter
}

func newDomainMetrics(deps Deps) *domainMetrics {
	m := &domainMetrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mailwatch_domain_check_results_total",
			Help: "Results of the DNS checks run by domain check jobs, by check (spf, dmarc, dkim, mx, mta_sts, tls_rpt, bimi, dnssec) and status (pass, warn, fail, none, neutral, temperror, permerror).",
		}, []string{"check", "status"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "mailwatch_domain_check_duration_seconds",
			Help:    "Time to run every DNS check of one domain (the lookups, not the transaction that applies them).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mailwatch_domain_check_changes_total",
			Help: "Record changes found by domain check jobs (each emits dns_record_changed).",
		}),
	}
	if deps.Registry == nil {
		return m
	}
	m.results = register(deps.Registry, m.results)
	m.duration = register(deps.Registry, m.duration)
	m.changes = register(deps.Registry, m.changes)
	return m
}

func (m *domainMetrics) observe(rs *dnscheck.Results, elapsed time.Duration, changes int) {
	for check, r := range rs.Map() {
		m.results.WithLabelValues(check, r.Status).Inc()
	}
	m.duration.Observe(elapsed.Seconds())
	m.changes.Add(float64(changes))
}

// Package domains holds the rules of domain checking: when a domain is
// checked, how one DNS check becomes its stored state (change detection,
// the snapshot, the health score and its history), and the DNS
// recommendations recomputed after it; and an account's domains
// themselves (Create, Get, List, Update, Delete, their health history).
// The REST adapter (api/domains.go) and the River workers
// (jobs/domains.go, jobs/dnsfix.go) call it.
//
// The River job args of this work live here too; the workers that work
// them live in jobs.
package domains

import (
	"errors"
	"time"
)

// Domain checking defaults.
const (
	// DefaultCheckInterval is how often every domain is re-checked when
	// the configuration does not say (DNS_CHECK_INTERVAL).
	DefaultCheckInterval = 15 * time.Minute
	// CheckBudget bounds one domain's checks. They run concurrently, so it
	// bounds the whole dnscheck.CheckAll too.
	CheckBudget = 10 * time.Second
	// DefaultHealthHistoryDays is HEALTH_HISTORY_DAYS's default.
	DefaultHealthHistoryDays = 90
	// ScheduleBatch is how many check jobs a scheduler inserts at once.
	ScheduleBatch = 1000
	// AtRiskBelow is the health score below which a domain counts as at
	// risk (the dashboard's at_risk).
	AtRiskBelow = 50
	// HealthyFrom is the health score from which a domain shows as healthy
	// (between AtRiskBelow and it: fair).
	HealthyFrom = 80
	// MXReverifyInterval is how often pending, verified and lost MX setups
	// are verified again.
	MXReverifyInterval = time.Hour
)

// ErrDomainGone is returned when the domain was deleted while it was
// checked or scored.
var ErrDomainGone = errors.New("domain no longer exists")

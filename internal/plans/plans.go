// Package plans is mailwatch's table of plans and their limits, the one
// place a limit is written down (the README shows this table).
//
// Plans limit counts (monitored domains, live receivers, event
// subscriptions, sending providers) and event retention; they never change
// the per-key request rate limit.
package plans

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Plan names.
const (
	Free     = "free"
	Pro      = "pro"
	Business = "business"
)

// Limit names: the keys of Limits in the API's plan response and the
// words the API's 402 detail uses.
const (
	LimitDomains       = "domains"
	LimitReceivers     = "receivers"
	LimitSubscriptions = "subscriptions"
	LimitProviders     = "providers"
)

// Plan is one plan and its limits.
type Plan struct {
	Name string
	// Rank orders plans: a higher rank is a bigger plan.
	Rank int
	// Domains is how many domains the account may monitor.
	Domains int
	// Receivers is how many receivers may be live (not yet expired) at once.
	Receivers int
	// Subscriptions is how many event subscriptions the account may have.
	Subscriptions int
	// Providers is how many sending providers the account may configure.
	Providers int
	// EventRetentionDays is how long the account's events are kept
	// (EVENT_RETENTION_DAYS caps it for every plan).
	EventRetentionDays int
}

// table is the plan table, smallest first.
var table = []Plan{
	{Name: Free, Rank: 0, Domains: 5, Receivers: 50, Subscriptions: 5, Providers: 5, EventRetentionDays: 7},
	{Name: Pro, Rank: 1, Domains: 50, Receivers: 500, Subscriptions: 25, Providers: 10, EventRetentionDays: 30},
	{Name: Business, Rank: 2, Domains: 1000, Receivers: 10000, Subscriptions: 100, Providers: 50, EventRetentionDays: 90},
}

// All returns every plan, smallest first.
func All() []Plan { return append([]Plan(nil), table...) }

// Names returns the plan names, smallest first.
func Names() []string {
	out := make([]string, len(table))
	for i, p := range table {
		out[i] = p.Name
	}
	return out
}

// Lookup returns the plan called name.
func Lookup(name string) (Plan, bool) {
	for _, p := range table {
		if p.Name == name {
			return p, true
		}
	}
	return Plan{}, false
}

// Get returns the plan called name, or the free plan for a name no longer
// in the table (a row written by an older version keeps working).
func Get(name string) Plan {
	if p, ok := Lookup(name); ok {
		return p
	}
	return table[0]
}

// Limit returns the plan's limit called name (a Limit* constant); ok is
// false for an unknown name.
func (p Plan) Limit(name string) (n int, ok bool) {
	switch name {
	case LimitDomains:
		return p.Domains, true
	case LimitReceivers:
		return p.Receivers, true
	case LimitSubscriptions:
		return p.Subscriptions, true
	case LimitProviders:
		return p.Providers, true
	}
	return 0, false
}

// RetentionDays is the plan's event retention under the operator's
// global maximum (EVENT_RETENTION_DAYS); maxDays <= 0 means no maximum.
func (p Plan) RetentionDays(maxDays int) int {
	if maxDays > 0 && maxDays < p.EventRetentionDays {
		return maxDays
	}
	return p.EventRetentionDays
}

// LimitNoun is how a limit is named to people ("monitored domains").
func LimitNoun(name string) string {
	switch name {
	case LimitDomains:
		return "monitored domains"
	case LimitReceivers:
		return "live receivers"
	case LimitSubscriptions:
		return "event subscriptions"
	case LimitProviders:
		return "sending providers"
	}
	return name
}

// PriceMap maps Stripe price ids to plan names (STRIPE_PRICE_PLANS).
type PriceMap map[string]string

// ParsePriceMap reads "price_abc=pro,price_def=business". Every plan named
// must exist; a price may appear once.
func ParsePriceMap(s string) (PriceMap, error) {
	m := PriceMap{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		price, plan, ok := strings.Cut(part, "=")
		price, plan = strings.TrimSpace(price), strings.TrimSpace(plan)
		if !ok || price == "" || plan == "" {
			return nil, fmt.Errorf("%q is not price_id=plan", part)
		}
		if _, ok := Lookup(plan); !ok {
			return nil, fmt.Errorf("%q names an unknown plan (plans: %s)", part, strings.Join(Names(), ", "))
		}
		if _, dup := m[price]; dup {
			return nil, fmt.Errorf("price %q is mapped twice", price)
		}
		m[price] = plan
	}
	return m, nil
}

// String writes the map back in ParsePriceMap's syntax, sorted.
func (m PriceMap) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

// ErrUnknownPlan is returned for a plan name not in the table.
var ErrUnknownPlan = errors.New("unknown plan")

// MarkdownTable renders the plan table for the README.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| Plan | Monitored domains | Live receivers | Event subscriptions | Sending providers | Event retention (days) |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, p := range table {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d |\n", p.Name, p.Domains, p.Receivers, p.Subscriptions, p.Providers, p.EventRetentionDays)
	}
	return b.String()
}

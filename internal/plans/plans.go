// Package plans is mailwatch's table of plans and their limits, the one
// place a limit is written down (docs/features/plans.md shows this table).
//
// Plans limit counts (monitored domains, live receivers, event
// subscriptions, sending providers) and event retention; they never change
// the per-key request rate limit.
//
// An account that no subscription and no operator placed on a plan is on
// the instance's default plan (DEFAULT_PLAN): free where billing is
// configured, unlimited on a self-hosted instance without billing.
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
	// Unlimited counts nothing and keeps events as long as the server's
	// EVENT_RETENTION_DAYS: the default plan of an instance without billing.
	Unlimited = "unlimited"
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
	// NoLimits marks a plan that limits no count and keeps events for
	// EVENT_RETENTION_DAYS; the numbers above are then unused.
	NoLimits bool
}

// table is the plan table, smallest first.
var table = []Plan{
	{Name: Free, Rank: 0, Domains: 5, Receivers: 50, Subscriptions: 5, Providers: 5, EventRetentionDays: 7},
	{Name: Pro, Rank: 1, Domains: 50, Receivers: 500, Subscriptions: 25, Providers: 10, EventRetentionDays: 30},
	{Name: Business, Rank: 2, Domains: 1000, Receivers: 10000, Subscriptions: 100, Providers: 50, EventRetentionDays: 90},
	{Name: Unlimited, Rank: 3, NoLimits: true},
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

// Default returns the default plan: the one named by setting (the
// DEFAULT_PLAN variable) when it is set, else free where billing is
// configured (plans are then sold) and unlimited where it is not (a team's
// own instance should not stop at a trial's limits).
func Default(setting string, billing bool) (string, error) {
	setting = strings.TrimSpace(setting)
	switch {
	case setting != "":
		if _, ok := Lookup(setting); !ok {
			return "", fmt.Errorf("%q is not a plan (plans: %s)", setting, strings.Join(Names(), ", "))
		}
		return setting, nil
	case billing:
		return Free, nil
	}
	return Unlimited, nil
}

// Effective returns the plan an account is on: the one stored for it (by
// billing or an operator), or def when none is (nil). An empty def is free.
func Effective(stored *string, def string) Plan {
	if stored != nil {
		return Get(*stored)
	}
	if def == "" {
		def = Free
	}
	return Get(def)
}

// Limit returns the plan's limit called name (a Limit* constant); ok is
// false for an unknown name, and limited false on a plan without limits.
func (p Plan) Limit(name string) (n int, limited, ok bool) {
	if p.NoLimits {
		_, _, ok = table[0].Limit(name)
		return 0, false, ok
	}
	switch name {
	case LimitDomains:
		return p.Domains, true, true
	case LimitReceivers:
		return p.Receivers, true, true
	case LimitSubscriptions:
		return p.Subscriptions, true, true
	case LimitProviders:
		return p.Providers, true, true
	}
	return 0, false, false
}

// RetentionDays is the plan's event retention under the operator's
// global maximum (EVENT_RETENTION_DAYS); maxDays <= 0 means no maximum.
func (p Plan) RetentionDays(maxDays int) int {
	if p.NoLimits {
		return maxDays
	}
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

// MarkdownTable renders the plan table for docs/features/plans.md.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| Plan | Monitored domains | Live receivers | Event subscriptions | Sending providers | Event retention (days) |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, p := range table {
		if p.NoLimits {
			fmt.Fprintf(&b, "| %s | no limit | no limit | no limit | no limit | EVENT_RETENTION_DAYS |\n", p.Name)
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d |\n", p.Name, p.Domains, p.Receivers, p.Subscriptions, p.Providers, p.EventRetentionDays)
	}
	return b.String()
}

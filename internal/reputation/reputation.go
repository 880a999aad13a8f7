package reputation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
)

// Windows, intervals and thresholds; doc.go explains them.
const (
	// WatchWindow is how far back a source IP of the domain's DMARC reports
	// is watched.
	WatchWindow = 14 * 24 * time.Hour
	// ShareWindow is the window of the share of mail an IP carried.
	ShareWindow = 7 * 24 * time.Hour
	// MaxWatchedIPs bounds the IPs watched per domain, busiest first.
	MaxWatchedIPs = 500
	// DefaultInterval is how long an answer is trusted when the list gives
	// no TTL (every "not listed" answer) and the longest a TTL is trusted.
	DefaultInterval = 6 * time.Hour
	// MinCache is the shortest time an answer is cached, whatever its TTL.
	MinCache = 15 * time.Minute
	// HealthInterval is how long a list's health verdict is reused.
	HealthInterval = 30 * time.Minute
	// CriticalShare is the share of the domain's last 7 days of mail that
	// the listed IPs must carry for blocklist_listed to be critical.
	CriticalShare = 0.10
)

// Target kinds and origins, as stored.
const (
	KindIP     = "ip"
	KindDomain = "domain"

	OriginReport     = "report"
	OriginPinned     = "pinned"
	OriginDomain     = "domain"
	OriginSender     = "sender"
	OriginAuthDomain = "auth_domain"
)

// ErrDomainNotFound is returned for a domain that does not exist (or not in
// the account asked about).
var ErrDomainNotFound = errors.New("reputation: domain not found")

// Checker checks domains' watched targets against the configured lists.
// One Checker is shared by the workers of a process: it keeps the lists'
// health verdicts. Its methods are safe for concurrent use.
type Checker struct {
	// Resolver sends the DNSBL queries (BLOCKLIST_RESOLVER or DNS_RESOLVER).
	Resolver blocklist.Resolver
	// Lists are the lists checked (blocklist.Lists of BLOCKLIST_ZONES).
	Lists []blocklist.List
	// Limiter paces the queries per list; nil means no pacing.
	Limiter *blocklist.Limiter
	// Emitter emits the events; nil means &events.Emitter{} (River client
	// from the context).
	Emitter *events.Emitter
	// Interval overrides DefaultInterval when positive.
	Interval time.Duration

	mu     sync.Mutex
	health map[string]healthVerdict
}

type healthVerdict struct {
	healthy bool
	reason  string
	at      time.Time
}

// Code is a stored meaning of a listing's answer.
type Code struct {
	Code          string `json:"code"`
	Name          string `json:"name"`
	Meaning       string `json:"meaning"`
	Informational bool   `json:"informational"`
}

// Outcome is what one check did.
type Outcome struct {
	// Targets is the number of targets watched.
	Targets int
	// Lookups counts the DNS lookups sent (cache misses); Cached the pairs
	// answered from the shared cache.
	Lookups, Cached int
	// Undecided counts the pairs whose answer was an error or no answer:
	// they changed nothing.
	Undecided int
	// Skipped lists the zones skipped as unhealthy (or of unknown health).
	Skipped []string
	// Listed and Delisted count the transitions (and so the events).
	Listed, Delisted int
	// ListedShare is the share of the domain's mail carried by currently
	// listed IPs (informational listings left out).
	ListedShare float64
}

func (c *Checker) interval() time.Duration {
	if c.Interval > 0 {
		return c.Interval
	}
	return DefaultInterval
}

func (c *Checker) emitter() *events.Emitter {
	if c.Emitter != nil {
		return c.Emitter
	}
	return &events.Emitter{}
}

// Check refreshes the domain's watch set, looks each (list, target) pair up
// (through the shared cache) on every healthy list, and records listings and
// delistings, emitting blocklist_listed and blocklist_delisted once per
// transition. DNS lookups run outside any transaction; each transition is
// written with its event in one transaction.
func (c *Checker) Check(ctx context.Context, db dbutil.Executor, domainID uuid.UUID, now time.Time) (Outcome, error) {
	q := dbsqlc.New()
	dom, err := q.ReputationDomain(ctx, db, domainID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Outcome{}, ErrDomainNotFound
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("reading domain %s: %w", domainID, err)
	}
	if err := RefreshWatchSet(ctx, db, dom.AccountID, dom.ID, dom.Name, now); err != nil {
		return Outcome{}, err
	}
	targets, err := q.ReputationTargets(ctx, db, dbsqlc.ReputationTargetsParams{AccountID: dom.AccountID, DomainID: dom.ID})
	if err != nil {
		return Outcome{}, fmt.Errorf("reading targets of %s: %w", dom.Name, err)
	}
	out := Outcome{Targets: len(targets)}
	results, err := c.lookupAll(ctx, db, targets, now, &out)
	if err != nil {
		return out, err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return out, fmt.Errorf("beginning reputation transaction: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if results, err = stillWatched(ctx, tx, dom, results); err != nil {
		return out, err
	}
	if err := c.record(ctx, tx, dom, results, now, &out); err != nil {
		return out, err
	}
	if err := tx.Commit(ctx); err != nil {
		return out, fmt.Errorf("committing reputation of %s: %w", dom.Name, err)
	}
	return out, nil
}

// decided is a (list, target) pair with a deciding answer.
type decided struct {
	list   blocklist.List
	target dbsqlc.ReputationTarget
	entry  dbsqlc.BlocklistLookup
}

// transition is a listing that began (listed) or ended.
type transition struct {
	decided
	listed   bool
	listedAt time.Time
}

// lookupAll answers every (healthy list, target of its kind) pair; the
// pairs without a deciding answer are counted and left out.
func (c *Checker) lookupAll(ctx context.Context, db dbutil.Executor, targets []dbsqlc.ReputationTarget, now time.Time, out *Outcome) ([]decided, error) {
	var results []decided
	for _, l := range c.Lists {
		if !c.healthy(ctx, l, now) {
			out.Skipped = append(out.Skipped, l.Zone)
			continue
		}
		for _, t := range targets {
			if string(l.Kind) != t.Kind {
				continue
			}
			entry, looked, ok, err := c.lookup(ctx, db, l, t.Target, now)
			if err != nil {
				return nil, err
			}
			if looked {
				out.Lookups++
			} else if ok {
				out.Cached++
			}
			if !ok {
				out.Undecided++
				continue
			}
			results = append(results, decided{list: l, target: t, entry: entry})
		}
	}
	return results, nil
}

// record writes the listing state of the decided pairs in tx, emits one
// event per transition and marks the targets checked.
func (c *Checker) record(ctx context.Context, tx pgx.Tx, dom dbsqlc.ReputationDomainRow, results []decided, now time.Time, out *Outcome) error {
	q := dbsqlc.New()
	var changes []transition
	checked := map[string]bool{}
	for _, r := range results {
		checked[r.target.Target] = true
		if r.entry.Status == string(blocklist.Listed) {
			isNew, err := q.ReputationListed(ctx, tx, dbsqlc.ReputationListedParams{AccountID: dom.AccountID, DomainID: dom.ID,
				Zone: r.list.Zone, Target: r.target.Target, Codes: r.entry.Codes, Reason: r.entry.Reason, At: now})
			if err != nil {
				return fmt.Errorf("recording listing of %s on %s: %w", r.target.Target, r.list.Zone, err)
			}
			if isNew {
				changes = append(changes, transition{decided: r, listed: true})
			}
			continue
		}
		ended, err := q.ReputationDelisted(ctx, tx, dbsqlc.ReputationDelistedParams{At: now, AccountID: dom.AccountID, DomainID: dom.ID,
			Zone: r.list.Zone, Target: r.target.Target})
		if err != nil {
			return fmt.Errorf("recording delisting of %s on %s: %w", r.target.Target, r.list.Zone, err)
		}
		if len(ended) > 0 {
			changes = append(changes, transition{decided: r, listedAt: ended[0]})
		}
	}
	share, err := c.listedShare(ctx, tx, dom.AccountID, dom.ID)
	if err != nil {
		return err
	}
	out.ListedShare = share
	for _, ch := range changes {
		ev := transitionEvent(dom, ch, share, now)
		if ch.listed {
			out.Listed++
		} else {
			out.Delisted++
		}
		if _, err := c.emitter().Emit(ctx, tx, ev); err != nil {
			return fmt.Errorf("emitting %s: %w", ev.Type, err)
		}
	}
	names := make([]string, 0, len(checked))
	for t := range checked {
		names = append(names, t)
	}
	if err := q.ReputationTargetsChecked(ctx, tx, dbsqlc.ReputationTargetsCheckedParams{CheckedAt: now, AccountID: dom.AccountID,
		DomainID: dom.ID, Targets: names}); err != nil {
		return fmt.Errorf("marking targets checked: %w", err)
	}
	return nil
}

// stillWatched takes the domain's watch lock in tx and keeps the results
// whose target is still watched: a pin removed while the lists were asked
// took its addresses, and their listings, away; recording one would bring a
// listing back for an address nobody watches.
func stillWatched(ctx context.Context, tx pgx.Tx, dom dbsqlc.ReputationDomainRow, results []decided) ([]decided, error) {
	q := dbsqlc.New()
	if err := q.ReputationWatchLock(ctx, tx, dom.ID.String()); err != nil {
		return nil, fmt.Errorf("locking the watch set of %s: %w", dom.Name, err)
	}
	targets, err := q.ReputationTargets(ctx, tx, dbsqlc.ReputationTargetsParams{AccountID: dom.AccountID, DomainID: dom.ID})
	if err != nil {
		return nil, fmt.Errorf("reading targets of %s: %w", dom.Name, err)
	}
	watched := make(map[string]bool, len(targets))
	for _, t := range targets {
		watched[t.Target] = true
	}
	kept := results[:0]
	for _, r := range results {
		if watched[r.target.Target] {
			kept = append(kept, r)
		}
	}
	return kept, nil
}

// transitionEvent is the event of a transition; share is the domain's
// listed share after it.
func transitionEvent(dom dbsqlc.ReputationDomainRow, ch transition, share float64, now time.Time) events.Event {
	ev := events.Event{AccountID: dom.AccountID, Domain: dom.Name, At: now}
	if !ch.listed {
		ev.Type = events.TypeBlocklistDelisted
		ev.Payload = delistedPayload{Domain: dom.Name, List: ch.list.Name, Zone: ch.list.Zone, Kind: ch.target.Kind,
			Target: ch.target.Target, Share: ch.target.Share, ListedAt: ch.listedAt.UTC(), ListedShare: share}
		return ev
	}
	var codes []Code
	_ = json.Unmarshal(ch.entry.Codes, &codes)
	informational := isInformational(ch.list, codes)
	ev.Type = events.TypeBlocklistListed
	ev.Severity = listedSeverity(informational, share)
	ev.Payload = listedPayload{Domain: dom.Name, List: ch.list.Name, Zone: ch.list.Zone, Kind: ch.target.Kind,
		Target: ch.target.Target, Codes: nonNil(codes), Reason: ch.entry.Reason, Share: ch.target.Share,
		ListedShare: share, CriticalShare: CriticalShare, Informational: informational, DelistURL: ch.list.DelistURL}
	return ev
}

func nonNil(c []Code) []Code {
	if c == nil {
		return []Code{}
	}
	return c
}

// listedSeverity: info for an informational listing, critical when the
// listed IPs carry at least CriticalShare of the mail, warning otherwise.
func listedSeverity(informational bool, share float64) events.Severity {
	switch {
	case informational:
		return events.SeverityInfo
	case share >= CriticalShare:
		return events.SeverityCritical
	}
	return events.SeverityWarning
}

func isInformational(l blocklist.List, codes []Code) bool {
	if l.Informational {
		return true
	}
	for _, c := range codes {
		if !c.Informational {
			return false
		}
	}
	return len(codes) > 0
}

type listedPayload struct {
	Domain        string  `json:"domain"`
	List          string  `json:"list"`
	Zone          string  `json:"zone"`
	Kind          string  `json:"kind"`
	Target        string  `json:"target"`
	Codes         []Code  `json:"codes"`
	Reason        string  `json:"reason"`
	Share         float64 `json:"share"`
	ListedShare   float64 `json:"listed_share"`
	CriticalShare float64 `json:"critical_share"`
	Informational bool    `json:"informational"`
	DelistURL     string  `json:"delist_url"`
}

type delistedPayload struct {
	Domain      string    `json:"domain"`
	List        string    `json:"list"`
	Zone        string    `json:"zone"`
	Kind        string    `json:"kind"`
	Target      string    `json:"target"`
	Share       float64   `json:"share"`
	ListedAt    time.Time `json:"listed_at"`
	ListedShare float64   `json:"listed_share"`
}

// healthy reports whether l may be trusted now: a verdict younger than
// HealthInterval is reused; an unknown health keeps the previous verdict,
// and a list never judged is skipped until it is.
func (c *Checker) healthy(ctx context.Context, l blocklist.List, now time.Time) bool {
	c.mu.Lock()
	v, ok := c.health[l.Zone]
	c.mu.Unlock()
	if ok && now.Sub(v.at) < HealthInterval && now.Sub(v.at) >= 0 {
		return v.healthy
	}
	if c.Limiter != nil {
		if err := c.Limiter.Wait(ctx, l.Zone); err != nil {
			return ok && v.healthy
		}
	}
	h := blocklist.Health(ctx, c.Resolver, l)
	if h.Status == blocklist.HealthUnknown {
		return ok && v.healthy
	}
	c.mu.Lock()
	if c.health == nil {
		c.health = map[string]healthVerdict{}
	}
	c.health[l.Zone] = healthVerdict{healthy: h.Status == blocklist.Healthy, reason: h.Reason, at: now}
	c.mu.Unlock()
	return h.Status == blocklist.Healthy
}

// ListHealth is a list's last health verdict.
type ListHealth struct {
	Zone    string
	Healthy bool
	Known   bool
	Reason  string
}

// Health returns the last health verdict of each configured list.
func (c *Checker) Health() []ListHealth {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ListHealth, 0, len(c.Lists))
	for _, l := range c.Lists {
		v, ok := c.health[l.Zone]
		out = append(out, ListHealth{Zone: l.Zone, Healthy: v.healthy, Known: ok, Reason: v.reason})
	}
	return out
}

// lookup answers (l, target) from the shared cache or, when the cached
// answer expired, from the list. The pair is locked (a transaction-scoped
// advisory lock) while it is looked up, so that concurrent checks of
// domains sharing it wait for one lookup instead of sending their own.
// looked reports a DNS lookup; ok is false when the answer decided nothing
// (ListError, Temporary), which is not cached.
func (c *Checker) lookup(ctx context.Context, db dbutil.Executor, l blocklist.List, target string, now time.Time) (entry dbsqlc.BlocklistLookup, looked, ok bool, err error) {
	q := dbsqlc.New()
	key := dbsqlc.BlocklistLookupGetParams{Zone: l.Zone, Target: target}
	entry, err = q.BlocklistLookupGet(ctx, db, key)
	if err == nil && entry.ExpiresAt.After(now) {
		return entry, false, true, nil
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return entry, false, false, fmt.Errorf("reading cached %s on %s: %w", target, l.Zone, err)
	}
	// Paced before the transaction: a lookup waiting its list's turn holds
	// no connection and no lock (a token is spent for nothing when another
	// check fills the cache meanwhile).
	if c.Limiter != nil {
		if err := c.Limiter.Wait(ctx, l.Zone); err != nil {
			return entry, false, false, err
		}
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return entry, false, false, fmt.Errorf("beginning lookup of %s on %s: %w", target, l.Zone, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 41))`, l.Zone+" "+target); err != nil {
		return entry, false, false, fmt.Errorf("locking %s on %s: %w", target, l.Zone, err)
	}
	entry, err = q.BlocklistLookupGet(ctx, tx, key)
	if err == nil && entry.ExpiresAt.After(now) {
		return entry, false, true, nil
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return entry, false, false, fmt.Errorf("reading cached %s on %s: %w", target, l.Zone, err)
	}
	res, err := blocklist.Lookup(ctx, c.Resolver, l, target)
	if err != nil {
		// A target the list cannot take (an address of the wrong family
		// for a list, say) decides nothing.
		return entry, true, false, nil //nolint:nilerr // a caller mistake on one pair is not the check's failure
	}
	if res.Status != blocklist.Listed && res.Status != blocklist.NotListed {
		return entry, true, false, nil
	}
	codes := make([]Code, 0, len(res.Codes))
	for i, cd := range res.Codes {
		code := ""
		if i < len(res.Answers) {
			code = res.Answers[i].String()
		}
		codes = append(codes, Code{Code: code, Name: cd.Name, Meaning: cd.Meaning, Informational: cd.Informational})
	}
	codesJSON, err := json.Marshal(codes)
	if err != nil {
		return entry, true, false, fmt.Errorf("encoding codes: %w", err)
	}
	ttl := c.interval()
	if res.Status == blocklist.Listed && res.TTL > 0 {
		ttl = min(max(res.TTL, MinCache), c.interval())
	}
	store := dbsqlc.BlocklistLookupStoreParams{Zone: l.Zone, Target: target, Status: string(res.Status), Codes: codesJSON,
		Reason: res.Reason, CheckedAt: now, ExpiresAt: now.Add(ttl)}
	if err := q.BlocklistLookupStore(ctx, tx, store); err != nil {
		return entry, true, false, fmt.Errorf("caching %s on %s: %w", target, l.Zone, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return entry, true, false, fmt.Errorf("committing lookup of %s on %s: %w", target, l.Zone, err)
	}
	return dbsqlc.BlocklistLookup(store), true, true, nil
}

// listedShare sums the shares of the domain's IP targets with a current,
// non-informational listing.
func (c *Checker) listedShare(ctx context.Context, db dbsqlc.DBTX, account, domain uuid.UUID) (float64, error) {
	q := dbsqlc.New()
	listings, err := q.ReputationListings(ctx, db, dbsqlc.ReputationListingsParams{AccountID: account, DomainID: domain})
	if err != nil {
		return 0, fmt.Errorf("reading listings: %w", err)
	}
	targets, err := q.ReputationTargets(ctx, db, dbsqlc.ReputationTargetsParams{AccountID: account, DomainID: domain})
	if err != nil {
		return 0, fmt.Errorf("reading targets: %w", err)
	}
	return sumListedShare(c.Lists, listings, targets), nil
}

func sumListedShare(lists []blocklist.List, listings []dbsqlc.ReputationListing, targets []dbsqlc.ReputationTarget) float64 {
	listed := map[string]bool{}
	for _, li := range listings {
		if li.DelistedAt != nil {
			continue
		}
		var codes []Code
		_ = json.Unmarshal(li.Codes, &codes)
		l := blocklist.List{Zone: li.Zone}
		for _, cl := range lists {
			if cl.Zone == li.Zone {
				l = cl
			}
		}
		if !isInformational(l, codes) {
			listed[li.Target] = true
		}
	}
	share := 0.0
	for _, t := range targets {
		if t.Kind == KindIP && listed[t.Target] {
			share += t.Share
		}
	}
	return min(share, 1)
}

// Listing is a current listing of a watched target.
type Listing struct {
	Zone          string    `json:"zone"`
	List          string    `json:"list"`
	Codes         []Code    `json:"codes"`
	Reason        string    `json:"reason"`
	ListedAt      time.Time `json:"listed_at"`
	Informational bool      `json:"informational"`
	DelistURL     string    `json:"delist_url"`
}

// Watched is a watched target with its current listings.
type Watched struct {
	Target    string     `json:"target"`
	Kind      string     `json:"kind"`
	Origin    string     `json:"origin"`
	Messages  int64      `json:"messages"`
	Share     float64    `json:"share"`
	CheckedAt *time.Time `json:"checked_at"`
	Listings  []Listing  `json:"listings"`
}

// Status is a domain's blocklist state.
type Status struct {
	Targets     []Watched `json:"targets"`
	ListedShare float64   `json:"listed_share"`
	// Pins are the IP ranges pinned on the domain, oldest first.
	Pins []Pin `json:"pins"`
}

// Read returns the domain's watched targets and their current listings,
// most mail first. lists give the names and delisting pages.
func Read(ctx context.Context, db dbsqlc.DBTX, lists []blocklist.List, account, domain uuid.UUID) (Status, error) {
	q := dbsqlc.New()
	targets, err := q.ReputationTargets(ctx, db, dbsqlc.ReputationTargetsParams{AccountID: account, DomainID: domain})
	if err != nil {
		return Status{}, fmt.Errorf("reading targets: %w", err)
	}
	listings, err := q.ReputationListings(ctx, db, dbsqlc.ReputationListingsParams{AccountID: account, DomainID: domain})
	if err != nil {
		return Status{}, fmt.Errorf("reading listings: %w", err)
	}
	byTarget := map[string][]Listing{}
	for _, li := range listings {
		if li.DelistedAt != nil {
			continue
		}
		l := blocklist.List{Zone: li.Zone, Name: li.Zone}
		for _, cl := range lists {
			if cl.Zone == li.Zone {
				l = cl
			}
		}
		var codes []Code
		_ = json.Unmarshal(li.Codes, &codes)
		byTarget[li.Target] = append(byTarget[li.Target], Listing{Zone: li.Zone, List: l.Name, Codes: nonNil(codes),
			Reason: li.Reason, ListedAt: li.ListedAt.UTC(), Informational: isInformational(l, codes), DelistURL: l.DelistURL})
	}
	pins, err := Pins(ctx, db, account, domain)
	if err != nil {
		return Status{}, err
	}
	st := Status{Targets: make([]Watched, 0, len(targets)), ListedShare: sumListedShare(lists, listings, targets), Pins: pins}
	for _, t := range targets {
		ls := byTarget[t.Target]
		if ls == nil {
			ls = []Listing{}
		}
		sort.Slice(ls, func(i, j int) bool { return ls[i].Zone < ls[j].Zone })
		st.Targets = append(st.Targets, Watched{Target: t.Target, Kind: t.Kind, Origin: t.Origin, Messages: t.Messages,
			Share: t.Share, CheckedAt: t.CheckedAt, Listings: ls})
	}
	return st, nil
}

// ListedShare is the share of the domain's last 7 days of mail carried by
// its IPs currently listed (informational listings left out), for the
// health score's cap (health.BlocklistCap). List metadata comes from the
// catalog, which is what a zone of BLOCKLIST_ZONES known to it keeps.
func ListedShare(ctx context.Context, db dbsqlc.DBTX, account, domain uuid.UUID) (float64, error) {
	return (&Checker{Lists: blocklist.Catalog()}).listedShare(ctx, db, account, domain)
}

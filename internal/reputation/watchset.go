package reputation

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/domainname"
	"github.com/mailwatch/mailwatch/internal/reports"
)

// Bounds of the computed part of the watch set; doc.go explains them.
const (
	// MaxAuthDomains bounds the return-path and DKIM signing domains
	// watched per domain on the domain lists, busiest first.
	MaxAuthDomains = 20
	// maxSenderCandidates bounds the failing source IPs with a reverse DNS
	// name read per refresh to find the known senders among them.
	maxSenderCandidates = 4 * MaxWatchedIPs
)

// watched is one target of a computed watch set.
type watched struct {
	target, kind, origin string
	messages             int64
	share                float64
}

// RefreshWatchSet computes the domain's watch set and stores it, in one
// transaction holding the domain's watch lock (which pins added or removed
// take too). See doc.go for what is watched.
func RefreshWatchSet(ctx context.Context, db dbutil.Executor, account, domain uuid.UUID, name string, now time.Time) error {
	return dbutil.WithTx(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		if err := dbsqlc.New().ReputationWatchLock(ctx, tx, domain.String()); err != nil {
			return fmt.Errorf("locking the watch set of %s: %w", name, err)
		}
		return refreshLocked(ctx, tx, account, domain, name, now)
	})
}

// refreshLocked computes and stores the watch set in tx, which holds the
// domain's watch lock. Targets no longer in the set are dropped; the
// current listings of dropped pinned addresses end without an event.
func refreshLocked(ctx context.Context, tx pgx.Tx, account, domain uuid.UUID, name string, now time.Time) error {
	set, err := watchSet(ctx, tx, account, domain, name, now)
	if err != nil {
		return err
	}
	q := dbsqlc.New()
	p := dbsqlc.ReputationTargetUpsertManyParams{AccountID: account, DomainID: domain}
	for _, w := range set {
		p.Targets = append(p.Targets, w.target)
		p.Kinds = append(p.Kinds, w.kind)
		p.Origins = append(p.Origins, w.origin)
		p.Messages = append(p.Messages, w.messages)
		p.Shares = append(p.Shares, w.share)
	}
	if err := q.ReputationTargetUpsertMany(ctx, tx, p); err != nil {
		return fmt.Errorf("storing watch set of %s: %w", name, err)
	}
	dropped, err := q.ReputationTargetsPrune(ctx, tx, dbsqlc.ReputationTargetsPruneParams{AccountID: account, DomainID: domain,
		Keep: p.Targets})
	if err != nil {
		return fmt.Errorf("pruning watch set of %s: %w", name, err)
	}
	var unpinned []string
	for _, d := range dropped {
		if d.Origin == OriginPinned {
			unpinned = append(unpinned, d.Target)
		}
	}
	if len(unpinned) > 0 {
		if err := q.ReputationListingsEnd(ctx, tx, dbsqlc.ReputationListingsEndParams{At: now, AccountID: account,
			DomainID: domain, Targets: unpinned}); err != nil {
			return fmt.Errorf("ending the listings of unpinned addresses of %s: %w", name, err)
		}
	}
	return nil
}

// watchSet computes the domain's watch set: its IPs (watchedIPs), the
// addresses of its pins, the domain itself and its busiest authenticated
// domains. A pinned address that is also a source keeps origin "pinned".
func watchSet(ctx context.Context, db dbsqlc.DBTX, account, domain uuid.UUID, name string, now time.Time) ([]watched, error) {
	q := dbsqlc.New()
	day := now.UTC().Truncate(24 * time.Hour)
	since, shareSince := day.Add(-WatchWindow), day.Add(-ShareWindow)
	total, err := q.ReputationDomainMessages(ctx, db, dbsqlc.ReputationDomainMessagesParams{DomainID: domain, Since: shareSince})
	if err != nil {
		return nil, fmt.Errorf("reading the mail volume of %s: %w", name, err)
	}
	shareOf := func(n int64) float64 {
		if total <= 0 {
			return 0
		}
		return min(float64(n)/float64(total), 1)
	}
	ips, err := watchedIPs(ctx, db, domain, name, since, shareSince)
	if err != nil {
		return nil, err
	}
	pinned, err := pinnedTargets(ctx, db, account, domain, shareSince)
	if err != nil {
		return nil, err
	}
	set := []watched{{target: name, kind: KindDomain, origin: OriginDomain}}
	for _, w := range pinned {
		w.share = shareOf(w.messages)
		set = append(set, w)
	}
	isPinned := make(map[string]bool, len(pinned))
	for _, w := range pinned {
		isPinned[w.target] = true
	}
	for _, w := range ips {
		if !isPinned[w.target] {
			w.share = shareOf(w.messages)
			set = append(set, w)
		}
	}
	auth, err := q.ReputationAuthDomains(ctx, db, dbsqlc.ReputationAuthDomainsParams{ShareSince: shareSince, DomainID: domain,
		Since: since, Name: name, MaxRows: 2 * MaxAuthDomains})
	if err != nil {
		return nil, fmt.Errorf("reading the authenticated domains of %s: %w", name, err)
	}
	kept := 0
	for _, a := range auth {
		// Stored names are normalised at ingest; a name that no longer
		// reads as a domain (or is the domain) is not looked up.
		if n, err := domainname.Normalize(a.AuthDomain); err != nil || n != a.AuthDomain || n == name || kept == MaxAuthDomains {
			continue
		}
		kept++
		set = append(set, watched{target: a.AuthDomain, kind: KindDomain, origin: OriginAuthDomain, messages: a.RecentMessages,
			share: shareOf(a.RecentMessages)})
	}
	return set, nil
}

// watchedIPs are the domain's source IPs over the watch window: those of
// its compliant or forwarded mail (origin "report") and its known senders'
// whose mail all failed DMARC (origin "sender"), at most MaxWatchedIPs,
// busiest first, with their messages over the share window.
func watchedIPs(ctx context.Context, db dbsqlc.DBTX, domain uuid.UUID, name string, since, shareSince time.Time) ([]watched, error) {
	q := dbsqlc.New()
	sources, err := q.ReputationSourceIPs(ctx, db, dbsqlc.ReputationSourceIPsParams{ShareSince: shareSince, DomainID: domain,
		Since: since, MaxIps: MaxWatchedIPs})
	if err != nil {
		return nil, fmt.Errorf("reading source IPs of %s: %w", name, err)
	}
	candidates, err := q.ReputationSenderCandidates(ctx, db, dbsqlc.ReputationSenderCandidatesParams{ShareSince: shareSince,
		DomainID: domain, Since: since, MaxRows: maxSenderCandidates})
	if err != nil {
		return nil, fmt.Errorf("reading the known senders of %s: %w", name, err)
	}
	var out []watched
	seen := map[string]bool{}
	add := func(ip, origin string, messages int64) {
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			return // stored reports hold what reporters sent; skip what is not an address
		}
		if t := addr.Unmap().String(); !seen[t] {
			seen[t] = true
			out = append(out, watched{target: t, kind: KindIP, origin: origin, messages: messages})
		}
	}
	for _, s := range sources {
		add(s.SourceIp, OriginReport, s.RecentMessages)
	}
	for _, c := range candidates {
		if _, ok := reports.KnownSender(c.Ptr); ok {
			add(c.SourceIp, OriginSender, c.RecentMessages)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].messages > out[j].messages })
	return out[:min(len(out), MaxWatchedIPs)], nil
}

// pinnedTargets are the addresses of the domain's pins with their messages
// over the share window (zero for an address the reports never named).
func pinnedTargets(ctx context.Context, db dbsqlc.DBTX, account, domain uuid.UUID, shareSince time.Time) ([]watched, error) {
	q := dbsqlc.New()
	pins, err := q.ReputationPins(ctx, db, dbsqlc.ReputationPinsParams{AccountID: account, DomainID: domain})
	if err != nil {
		return nil, fmt.Errorf("reading pins: %w", err)
	}
	if len(pins) == 0 {
		return nil, nil
	}
	addrs := pinnedAddresses(pins)
	counts, err := q.ReputationIPMessages(ctx, db, dbsqlc.ReputationIPMessagesParams{DomainID: domain, Since: shareSince, Ips: addrs})
	if err != nil {
		return nil, fmt.Errorf("reading the mail of pinned addresses: %w", err)
	}
	byIP := make(map[string]int64, len(counts))
	for _, c := range counts {
		byIP[c.SourceIp] = c.Messages
	}
	out := make([]watched, len(addrs))
	for i, a := range addrs {
		out[i] = watched{target: a, kind: KindIP, origin: OriginPinned, messages: byIP[a]}
	}
	return out, nil
}

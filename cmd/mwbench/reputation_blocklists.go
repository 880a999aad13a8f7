package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/reputation"
)

const (
	repBenchAccounts    = 20
	repBenchDomains     = 200 // 10 per account
	repBenchIPsPerDom   = 50  // 10,000 watched (domain, IP) pairs
	repBenchDistinctIPs = 5000
	repBenchLists       = 5
	repBenchConcurrency = 16
)

// benchRepCheck is `mwbench reputation`: its blocklist half is below, its
// MX transport half in reputation_transport.go.
func benchRepCheck(ctx context.Context, env *benchEnv) error {
	if err := benchReputationBlocklists(ctx, env); err != nil {
		return err
	}
	return benchTransportProbes(ctx)
}

// benchReputationBlocklists checks 10,000 watched IPs (200 domains of 20
// accounts, 50 source IPs each, drawn from 5,000 distinct IPs so that each
// is watched by two domains) on 5 IP lists served by a loopback DNS server,
// 1% of the IPs listed. It prints the lookups per second, and the DNS
// queries sent against lists x distinct IPs, which the shared cache makes
// the ceiling whatever the number of domains watching an IP. No per-list
// pacing: the limiter would make the run last (5,000 / 3) s per list.
func benchReputationBlocklists(ctx context.Context, env *benchEnv) error {
	var zone strings.Builder
	lists := make([]string, repBenchLists)
	for l := range repBenchLists {
		lists[l] = fmt.Sprintf("bl%d.bench", l)
		fmt.Fprintf(&zone, "2.0.0.127.%s. 300 A 127.0.0.2\n", lists[l])
		for i := 0; i < repBenchDistinctIPs; i += 100 {
			ip := repBenchIP(i)
			fmt.Fprintf(&zone, "%d.%d.%d.%d.%s. 300 A 127.0.0.2\n", ip[3], ip[2], ip[1], ip[0], lists[l])
		}
	}
	srv, err := dnstest.NewServer(zone.String())
	if err != nil {
		return err
	}
	defer srv.Close()
	parsed, err := blocklist.ParseZones(strings.Join(lists, ","))
	if err != nil {
		return err
	}

	domainIDs := make([]uuid.UUID, 0, repBenchDomains)
	for a := range repBenchAccounts {
		account := uuid.Must(uuid.NewV7())
		if _, err := env.Pool.Exec(ctx, `INSERT INTO accounts (id, email, password_hash) VALUES ($1, $2, 'x')`,
			account, fmt.Sprintf("rep-%d-%s@example.com", a, account)); err != nil {
			return fmt.Errorf("creating account: %w", err)
		}
		for d := range repBenchDomains / repBenchAccounts {
			id := uuid.Must(uuid.NewV7())
			n := len(domainIDs)
			if _, err := env.Pool.Exec(ctx, `INSERT INTO domains (id, account_id, name) VALUES ($1, $2, $3)`,
				id, account, fmt.Sprintf("d%d-%d.rep.bench", a, d)); err != nil {
				return fmt.Errorf("creating domain: %w", err)
			}
			// Domain n watches IPs [n*25, n*25+50) mod 5,000: each IP is
			// watched by two domains, mostly of different accounts.
			if _, err := env.Pool.Exec(ctx, `INSERT INTO dmarc_source_days (domain_id, day, source_ip, messages, dkim_aligned,
				spf_aligned, compliant, forwarded, failing)
				SELECT $1, current_date - 1, '10.' || (k / 65536) || '.' || (k / 256 % 256) || '.' || (k % 256), 10, 10, 10, 10, 0, 0
				FROM generate_series(0, $2 - 1) AS g(i), LATERAL (SELECT ($3 + g.i) % $4 AS k) AS s`,
				id, repBenchIPsPerDom, n*repBenchIPsPerDom/2, repBenchDistinctIPs); err != nil {
				return fmt.Errorf("storing report rows: %w", err)
			}
			domainIDs = append(domainIDs, id)
		}
	}

	c := &reputation.Checker{Resolver: dnscheck.NewClient(srv.Addr(), 2*time.Second), Lists: parsed, Emitter: &events.Emitter{}}
	work := make(chan uuid.UUID)
	var lookups, cached, listed atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	now := time.Now()
	q0 := srv.Queries()
	start := time.Now()
	for range repBenchConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				out, err := c.Check(ctx, env.Pool, id, now)
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					continue
				}
				lookups.Add(int64(out.Lookups))
				cached.Add(int64(out.Cached))
				listed.Add(int64(out.Listed))
			}
		}()
	}
	for _, id := range domainIDs {
		work <- id
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return firstErr
	}
	queries := srv.Queries() - q0
	pairs := repBenchLists * repBenchDistinctIPs
	fmt.Printf("blocklists: %d domains x %d IPs = %d watched, %d distinct IPs, %d lists, %d checks at a time\n",
		repBenchDomains, repBenchIPsPerDom, repBenchDomains*repBenchIPsPerDom, repBenchDistinctIPs, repBenchLists, repBenchConcurrency)
	fmt.Printf("  %.2f s: %7.0f (list, IP) pairs answered/s, %7.0f DNS lookups/s\n", elapsed.Seconds(),
		float64(lookups.Load()+cached.Load())/elapsed.Seconds(), float64(lookups.Load())/elapsed.Seconds())
	fmt.Printf("  lookups sent %d, answered from the shared cache %d; lists x distinct IPs = %d\n", lookups.Load(), cached.Load(), pairs)
	fmt.Printf("  DNS queries %d (an A query per lookup, a TXT query per listing, the lists' health checks); listings recorded %d\n", queries, listed.Load())
	return nil
}

// repBenchIP is the k-th bench IP, 10.x.y.z.
func repBenchIP(k int) [4]int { return [4]int{10, k / 65536, k / 256 % 256, k % 256} }

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

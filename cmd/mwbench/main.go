// Command mwbench runs mailwatch's macro benchmarks against a real Postgres
// on this machine and prints their figures; scripts/bench is its front end.
//
//	mwbench auth       authenticated GET vs a bare one-query Fiber handler
//	mwbench events     event and alert listing over 1,000,000 events
//	mwbench webhooks   10,000 events pushed to one local receiver
//	mwbench fairness   another tenant's push latency beside a tenant whose endpoint never answers
//	mwbench wait       5,000 long-poll waiters woken by SMTP deliveries
//	mwbench wait-filtered  the same with matching waits (from, subject_contains, body_contains, header)
//	mwbench dns        1,000 domains checked against a local DNS server
//	mwbench providers  signed ESP webhooks in, normalised by a worker; suppression checks at 1,000,000 entries
//	mwbench signup     peak RSS of `mailwatch api` under 100 concurrent sign-ups
//	mwbench data-api   /rest/v1/events (JWT + RLS) vs the REST event listing
//	mwbench dmarc      aggregate report parsing next to mox's parser; 1,000 reports over SMTP
//	mwbench dmarc-wide peak RSS of parsing a 50,000-source x 31-day report next to a 1,000-record one
//	mwbench bomb       peak RSS of `mailwatch api` under request decompression bombs
//	mwbench capacity   provider webhooks, pushes and domain checks together at shares of their solo rates summing to 0.7, then 1.0
//	mwbench history    aggregate endpoints, dashboard pages, storage and retention at 1x, 10x (and 30x) of history
//	mwbench reputation 10,000 watched IPs checked on 5 blocklists served by a local DNS server,
//	                   then 1,000 MX probes of loopback SMTP servers
//
// Each benchmark creates its own database from DATABASE_URL's server and
// drops it afterwards.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"sort"
	"syscall"
)

type benchmark func(ctx context.Context, env *benchEnv) error

var benchmarks = map[string]benchmark{
	"auth":          benchAuth,         // auth.go
	"events":        benchEvents,       // events.go
	"webhooks":      benchWebhooks,     // webhooks.go
	"fairness":      benchFairness,     // fairness.go
	"wait":          benchWait,         // wait.go
	"wait-filtered": benchWaitFiltered, // wait.go
	"dns":           benchDNS,          // dns.go
	"providers":     benchProviders,    // providers.go
	"signup":        benchSignup,       // signup.go
	"data-api":      benchDataAPI,      // dataapi.go
	"dmarc":         benchDMARC,        // dmarc.go
	"dmarc-wide":    benchDMARCWide,    // dmarc_wide.go
	"bomb":          benchBomb,         // bomb.go
	"history":       benchHistory,      // history.go
	"capacity":      benchCapacity,     // capacity.go
	"reputation":    benchRepCheck,     // reputation_blocklists.go
}

func main() {
	if kind := os.Getenv(childEnv); kind != "" {
		os.Exit(runChild(kind)) // dmarc_wide.go
	}
	if len(os.Args) < 2 {
		names := make([]string, 0, len(benchmarks))
		for n := range benchmarks {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: mwbench <%s>\n", joinNames(names))
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	env, err := newBenchEnv(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mwbench:", err)
		os.Exit(1)
	}
	defer env.close()
	if path := os.Getenv("BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	for _, name := range os.Args[1:] {
		b, ok := benchmarks[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "mwbench: unknown benchmark %q\n", name)
			os.Exit(2)
		}
		fmt.Printf("== %s\n", name)
		if err := b(ctx, env); err != nil {
			fmt.Fprintf(os.Stderr, "mwbench %s: %v\n", name, err)
			os.Exit(1)
		}
	}
}

func joinNames(names []string) string {
	out := ""
	for i, n := range names {
		if i > 0 {
			out += "|"
		}
		out += n
	}
	return out
}

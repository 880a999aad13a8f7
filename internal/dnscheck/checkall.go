package dnscheck

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/mailwatch/mailwatch/internal/dmarc"
)

// DefaultCheckTimeout is the time budget of each check when Options has
// none. The checks run concurrently, so it also bounds CheckAll.
const DefaultCheckTimeout = 10 * time.Second

// Options configure CheckAll.
type Options struct {
	// Resolver answers the DNS queries; required.
	Resolver Resolver
	// HTTPClient fetches MTA-STS policies; nil means NewHTTPClient(Resolver,
	// CheckTimeout).
	HTTPClient *http.Client
	// CheckTimeout is each check's time budget; zero means
	// DefaultCheckTimeout.
	CheckTimeout time.Duration
	// DKIMSelectors are the domain's known selectors: configured on the
	// domain and learned from reports.
	DKIMSelectors []string
	// SkipSelectorProbe turns off the probe of CommonDKIMSelectors.
	SkipSelectorProbe bool
	// ReportAddress is the domain's mailwatch DMARC reporting address
	// (dmarc+<token>@<inbound domain>), used in DMARC instructions.
	ReportAddress string
}

// CheckAll runs every check of domain concurrently, each within
// opts.CheckTimeout, and returns when all have finished. domain must already
// be normalised (see package domainname). A check that runs out of time
// reports temperror. Answers are shared between checks, so each name and
// type is queried at most once (temporary failures are retried).
func CheckAll(ctx context.Context, domain string, opts Options) *Results {
	budget := opts.CheckTimeout
	if budget <= 0 {
		budget = DefaultCheckTimeout
	}
	r := newCache(opts.Resolver)
	client := opts.HTTPClient
	if client == nil {
		client = NewHTTPClient(r, budget)
	}

	rs := &Results{Domain: domain}
	var wg sync.WaitGroup
	run := func(name string, check func(ctx context.Context) *Result) {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, budget)
			defer cancel()
			res := check(cctx)
			if res.Status == StatusTemperror && errors.Is(cctx.Err(), context.DeadlineExceeded) {
				res.Errors = append(res.Errors, fmt.Sprintf("the %s check did not finish within its %s budget", name, budget))
			}
		})
	}
	run(NameSPF, func(ctx context.Context) *Result {
		rs.SPF = CheckSPF(ctx, r, domain)
		return &rs.SPF.Result
	})
	run(NameDMARC, func(ctx context.Context) *Result {
		rs.DMARC = CheckDMARC(ctx, r, domain, opts.ReportAddress)
		return &rs.DMARC.Result
	})
	run(NameDKIM, func(ctx context.Context) *Result {
		rs.DKIM = CheckDKIM(ctx, r, domain, opts.DKIMSelectors, !opts.SkipSelectorProbe)
		return &rs.DKIM.Result
	})
	run(NameMX, func(ctx context.Context) *Result {
		rs.MX = CheckMX(ctx, r, domain)
		return &rs.MX.Result
	})
	run(NameMTASTS, func(ctx context.Context) *Result {
		rs.MTASTS = CheckMTASTS(ctx, r, client, domain)
		return &rs.MTASTS.Result
	})
	run(NameTLSRPT, func(ctx context.Context) *Result {
		rs.TLSRPT = CheckTLSRPT(ctx, r, domain)
		return &rs.TLSRPT.Result
	})
	run(NameBIMI, func(ctx context.Context) *Result {
		rs.BIMI = CheckBIMI(ctx, r, domain)
		return &rs.BIMI.Result
	})
	run(NameDNSSEC, func(ctx context.Context) *Result {
		rs.DNSSEC = CheckDNSSEC(ctx, r, domain)
		return &rs.DNSSEC.Result
	})
	wg.Wait()

	// SPF asked for the apex's TXT records, so this is answered from the
	// cache unless that query failed.
	actx, cancel := context.WithTimeout(ctx, budget)
	_, err := r.Query(actx, domain, dns.TypeTXT)
	cancel()
	if IsNXDOMAIN(err) {
		markNXDOMAIN(rs)
		return rs
	}
	crossCheck(rs)
	return rs
}

// markNXDOMAIN replaces every check's result of a domain that does not
// exist: whatever a check concluded about records it could not find, the
// plain fact is that no record can exist under a name that does not (RFC
// 8020), and SPF and DMARC call that none (RFC 7208 section 4.3, RFC 7489
// section 6.6.3).
func markNXDOMAIN(rs *Results) {
	rs.NXDomain = true
	msg := fmt.Sprintf("the domain %s does not exist in DNS (the resolver answered NXDOMAIN), so it has no records at all", rs.Domain)
	instr := fmt.Sprintf("Check the spelling of %s; if it is right, register the domain or publish its zone, then check again.", rs.Domain)
	for _, r := range rs.results() {
		*r = Result{Status: StatusNone, Errors: []string{msg}, Instructions: []string{instr}}
		r.finish()
	}
}

// crossCheck adds findings that need two checks' results.
func crossCheck(rs *Results) {
	// BIMI requires DMARC at enforcement (draft-brand-indicators section
	// 4.4 / 7.3): quarantine or reject, and no pct below 100.
	if b := rs.BIMI; b != nil && (b.Status == StatusPass || b.Status == StatusWarn) && b.Logo != "" && rs.DMARC != nil && rs.DMARC.Status != StatusTemperror {
		enforcing := (rs.DMARC.Status == StatusPass || rs.DMARC.Status == StatusWarn) &&
			(rs.DMARC.Policy == dmarc.PolicyQuarantine || rs.DMARC.Policy == dmarc.PolicyReject) &&
			(rs.DMARC.Parsed == nil || rs.DMARC.Parsed.Percent == 100)
		if !enforcing {
			b.warnf("BIMI logos are only shown when DMARC is at p=quarantine or p=reject with pct=100")
			b.Status = StatusWarn
		}
	}
}

package dnscheck

import (
	"context"
	"fmt"

	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/spf"
)

// SPFResult is the SPF check's result with the evaluation detail.
type SPFResult struct {
	Result
	// Default is the result for senders no mechanism matches (RFC 7208
	// section 2.6 words), e.g. "fail" for -all.
	Default string `json:"default,omitempty"`
	// Lookups and VoidLookups are the counts against the limits of 10 and 2.
	Lookups     int `json:"lookups"`
	VoidLookups int `json:"void_lookups"`
	// Trace is the per-term lookup trace.
	Trace []spf.Step `json:"trace"`
}

// CheckSPF checks the domain's SPF record (RFC 7208). Status: pass, warn,
// none, permerror or temperror.
func CheckSPF(ctx context.Context, r Resolver, domain string) *SPFResult {
	ev := spf.Evaluate(ctx, r, domain)
	res := &SPFResult{
		Result:      Result{Status: string(ev.Status), Records: ev.Records, Errors: ev.Errors, Warnings: ev.Warnings},
		Default:     string(ev.Default),
		Lookups:     ev.Lookups,
		VoidLookups: ev.VoidLookups,
		Trace:       ev.Trace,
	}
	if res.Trace == nil {
		res.Trace = []spf.Step{}
	}
	switch ev.Status {
	case spf.None:
		res.errorf("no SPF record at %s", domain)
		res.instructf("Publish a TXT record at %s listing the servers that send your mail, for example \"v=spf1 include:<your provider's SPF domain> -all\".", domain)
	case spf.Permerror:
		if ev.Lookups > spf.MaxLookups {
			res.instructf("Reduce the DNS lookups to %d or fewer: replace include, a and mx terms with ip4/ip6 ranges, or remove providers you no longer use.", spf.MaxLookups)
		}
		if len(ev.Records) > 1 {
			res.instructf("Merge the %d SPF records at %s into one.", len(ev.Records), domain)
		}
	}
	switch ev.Default {
	case spf.Pass:
		res.instructf("Replace \"+all\" with \"-all\" (or \"~all\" while you verify your senders).")
	case spf.Neutral:
		if ev.Status == spf.Pass {
			res.instructf("End the record with \"-all\" or \"~all\" so unlisted senders fail SPF.")
		}
	}
	res.finish()
	return res
}

// DMARCResult is the DMARC check's result with the record's detail.
type DMARCResult struct {
	Result
	// RecordDomain is where the applicable record was found; Inherited is
	// true when that is the organizational domain.
	RecordDomain string `json:"record_domain,omitempty"`
	Inherited    bool   `json:"inherited"`
	// Policy is the policy applied to the domain's mail (p, or sp when
	// inherited): none, quarantine or reject.
	Policy string `json:"policy,omitempty"`
	// Parsed is the record's tags.
	Parsed *dmarc.Record `json:"parsed,omitempty"`
	// External is the authorisation of report destinations outside the
	// domain (RFC 7489 section 7.1).
	External []dmarc.External `json:"external,omitempty"`
}

// CheckDMARC checks the DMARC record that applies to the domain (RFC 7489).
// reportAddress, if set, is the signed mailwatch rua address the record
// should include. Status: pass, warn, none, permerror or temperror.
func CheckDMARC(ctx context.Context, r Resolver, domain, reportAddress string) *DMARCResult {
	ev := dmarc.Evaluate(ctx, r, domain, dmarc.Options{ReportAddress: reportAddress})
	res := &DMARCResult{
		Result:       Result{Status: string(ev.Status), Records: ev.Records, Errors: ev.Errors, Warnings: ev.Warnings, Instructions: ev.Instructions},
		RecordDomain: ev.RecordDomain,
		Inherited:    ev.Inherited,
		Policy:       ev.EffectivePolicy,
		Parsed:       ev.Record,
		External:     ev.External,
	}
	if ev.Inherited {
		for i, rec := range res.Records {
			res.Records[i] = fmt.Sprintf("%s (from _dmarc.%s)", rec, ev.RecordDomain)
		}
	}
	res.finish()
	return res
}

package dnscheck

import (
	"fmt"
	"slices"
	"strings"
)

// Status values; see the package documentation.
const (
	StatusPass      = "pass"
	StatusWarn      = "warn"
	StatusFail      = "fail"
	StatusNone      = "none"
	StatusNeutral   = "neutral"
	StatusTemperror = "temperror"
	StatusPermerror = "permerror"
)

// Check names, the keys of Results.Map and of stored snapshots.
const (
	NameSPF    = "spf"
	NameDMARC  = "dmarc"
	NameDKIM   = "dkim"
	NameMX     = "mx"
	NameMTASTS = "mta_sts"
	NameTLSRPT = "tls_rpt"
	NameBIMI   = "bimi"
	NameDNSSEC = "dnssec"
)

// Names returns the check names in display order.
func Names() []string {
	return []string{NameSPF, NameDMARC, NameDKIM, NameMX, NameMTASTS, NameTLSRPT, NameBIMI, NameDNSSEC}
}

// Title is a check's name for people ("MTA-STS" for mta_sts); an unknown
// name is returned as it is.
func Title(name string) string {
	switch name {
	case NameMTASTS:
		return "MTA-STS"
	case NameTLSRPT:
		return "TLS-RPT"
	case NameSPF, NameDMARC, NameDKIM, NameMX, NameBIMI, NameDNSSEC:
		return strings.ToUpper(name)
	}
	return name
}

// Result is the part every check returns.
type Result struct {
	// Status is one of the Status* values.
	Status string `json:"status"`
	// Records are the DNS records (or policy lines) the check found, as
	// text; change detection compares them.
	Records []string `json:"records"`
	// Errors explain a fail, permerror, none or temperror status.
	Errors []string `json:"errors"`
	// Warnings are problems that do not stop the record from working.
	Warnings []string `json:"warnings"`
	// Instructions tell the user what to publish or change.
	Instructions []string `json:"instructions"`
}

// finish turns pass into warn when there are warnings and replaces nil
// slices with empty ones so JSON has [] rather than null.
func (r *Result) finish() {
	if r.Status == StatusPass && len(r.Warnings) > 0 {
		r.Status = StatusWarn
	}
	for _, p := range []*[]string{&r.Records, &r.Errors, &r.Warnings, &r.Instructions} {
		if *p == nil {
			*p = []string{}
		}
	}
}

func (r *Result) errorf(format string, args ...any) {
	r.Errors = append(r.Errors, fmt.Sprintf(format, args...))
}

func (r *Result) warnf(format string, args ...any) {
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
}

func (r *Result) instructf(format string, args ...any) {
	r.Instructions = append(r.Instructions, fmt.Sprintf(format, args...))
}

// Results are the outcomes of all checks of one domain, as CheckAll returns
// them and as a snapshot is stored.
type Results struct {
	Domain string `json:"domain"`
	// NXDomain is true when the domain's own name does not exist in DNS
	// (the resolver answered NXDOMAIN): every check then has status none
	// and says so, and the health score is 0 (see package health).
	NXDomain bool          `json:"nxdomain"`
	SPF      *SPFResult    `json:"spf"`
	DMARC    *DMARCResult  `json:"dmarc"`
	DKIM     *DKIMResult   `json:"dkim"`
	MX       *MXResult     `json:"mx"`
	MTASTS   *MTASTSResult `json:"mta_sts"`
	TLSRPT   *TLSRPTResult `json:"tls_rpt"`
	BIMI     *BIMIResult   `json:"bimi"`
	DNSSEC   *DNSSECResult `json:"dnssec"`
}

// results returns the common part of every check that ran, in Names order.
func (rs *Results) results() []*Result {
	var out []*Result
	for _, r := range []*Result{
		ptr(rs.SPF, func(x *SPFResult) *Result { return &x.Result }),
		ptr(rs.DMARC, func(x *DMARCResult) *Result { return &x.Result }),
		ptr(rs.DKIM, func(x *DKIMResult) *Result { return &x.Result }),
		ptr(rs.MX, func(x *MXResult) *Result { return &x.Result }),
		ptr(rs.MTASTS, func(x *MTASTSResult) *Result { return &x.Result }),
		ptr(rs.TLSRPT, func(x *TLSRPTResult) *Result { return &x.Result }),
		ptr(rs.BIMI, func(x *BIMIResult) *Result { return &x.Result }),
		ptr(rs.DNSSEC, func(x *DNSSECResult) *Result { return &x.Result }),
	} {
		if r != nil {
			out = append(out, r)
		}
	}
	return out
}

func ptr[T any](x *T, f func(*T) *Result) *Result {
	if x == nil {
		return nil
	}
	return f(x)
}

// Map returns the common part of each check's result keyed by check name.
// Checks that were not run are absent.
func (rs *Results) Map() map[string]Result {
	m := map[string]Result{}
	add := func(name string, r *Result) {
		if r != nil {
			m[name] = *r
		}
	}
	if rs.SPF != nil {
		add(NameSPF, &rs.SPF.Result)
	}
	if rs.DMARC != nil {
		add(NameDMARC, &rs.DMARC.Result)
	}
	if rs.DKIM != nil {
		add(NameDKIM, &rs.DKIM.Result)
	}
	if rs.MX != nil {
		add(NameMX, &rs.MX.Result)
	}
	if rs.MTASTS != nil {
		add(NameMTASTS, &rs.MTASTS.Result)
	}
	if rs.TLSRPT != nil {
		add(NameTLSRPT, &rs.TLSRPT.Result)
	}
	if rs.BIMI != nil {
		add(NameBIMI, &rs.BIMI.Result)
	}
	if rs.DNSSEC != nil {
		add(NameDNSSEC, &rs.DNSSEC.Result)
	}
	return m
}

// Change is a difference between two snapshots of one check, for the
// dns_record_changed event.
type Change struct {
	Check  string `json:"check"`
	Before Result `json:"before"`
	After  Result `json:"after"`
	// Critical is true when a check that was passing (pass or warn) now
	// fails or is missing (fail, none or permerror).
	Critical bool `json:"critical"`
}

// Compare returns the checks whose status or record set differs between two
// snapshots, in Names order. A temperror on either side is not a change:
// the answer was unknown, so callers should compare the next result with
// the last known one. A check present on one side only is compared with an
// empty result of status none.
func Compare(before, after map[string]Result) []Change {
	var changes []Change
	for _, name := range Names() {
		b, bok := before[name]
		a, aok := after[name]
		if !bok && !aok {
			continue
		}
		if !bok {
			b = Result{Status: StatusNone}
		}
		if !aok {
			a = Result{Status: StatusNone}
		}
		if b.Status == StatusTemperror || a.Status == StatusTemperror {
			continue
		}
		if b.Status == a.Status && sameSet(b.Records, a.Records) {
			continue
		}
		passing := b.Status == StatusPass || b.Status == StatusWarn
		broken := a.Status == StatusFail || a.Status == StatusNone || a.Status == StatusPermerror
		changes = append(changes, Change{Check: name, Before: b, After: a, Critical: passing && broken})
	}
	return changes
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

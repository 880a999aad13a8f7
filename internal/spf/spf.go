// Package spf parses Sender Policy Framework records and evaluates a
// domain's SPF posture, per RFC 7208.
//
// Evaluate runs check_host (RFC 7208 section 4) without a connecting client:
// instead of stopping at the first mechanism that matches an IP address, it
// walks the whole mechanism tree (includes and redirect), doing every DNS
// lookup a receiver might do, and enforces the processing limits of section
// 4.6.4: at most 10 terms that cause DNS lookups (include, a, mx, ptr,
// exists and redirect; exp is not counted), at most 2 void lookups (answers
// with NXDOMAIN or no records), and at most 10 MX hosts per mx mechanism.
//
// # Status of a posture evaluation
//
// Evaluation.Status uses the result words of RFC 7208 section 2.6, with the
// meaning they have for a domain rather than for one message:
//
//   - none: the domain publishes no SPF record (or does not exist). Receivers
//     get "none" for every message.
//   - pass: exactly one SPF record is published, it parses, and every
//     include, redirect and lookup resolved within the limits. Receivers can
//     evaluate it. It does not mean every sender passes: see Default.
//   - permerror: receivers get "permerror" for some or all messages: several
//     SPF records, a syntax error, more than 10 lookups or 2 void lookups, an
//     mx with more than 10 hosts, an include or redirect to a domain without
//     SPF record, or an include loop.
//   - temperror: a DNS lookup timed out or the resolver answered SERVFAIL;
//     the posture is unknown, which is never reported as "none".
//
// Evaluation.Default is the result a sender that matches no mechanism gets:
// the qualifier of "all" (fail for -all, softfail for ~all, neutral for ?all,
// pass for +all), the default of the redirect target, or neutral when the
// record has neither (section 4.7).
package spf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// Status is an SPF result (RFC 7208 section 2.6).
type Status string

// Results defined in RFC 7208 section 2.6.
const (
	None      Status = "none"
	Neutral   Status = "neutral"
	Pass      Status = "pass"
	Fail      Status = "fail"
	Softfail  Status = "softfail"
	Temperror Status = "temperror"
	Permerror Status = "permerror"
)

// Limits from RFC 7208 section 4.6.4.
const (
	MaxLookups     = 10
	MaxVoidLookups = 2
	MaxMXHosts     = 10
	MaxPTRNames    = 10
	// maxTotalLookups stops an evaluation that keeps going past MaxLookups
	// (to report how many lookups a record really needs) from running away.
	maxTotalLookups = 40
	// nearLimit is the lookup count from which a warning is given.
	nearLimit = 9
)

// Resolver is the DNS interface Evaluate needs. *net.Resolver satisfies it,
// as does the mailwatch DNS client. Errors must be *net.DNSError values:
// IsNotFound for NXDOMAIN and NODATA, anything else is a temperror.
type Resolver interface {
	LookupTXT(ctx context.Context, name string) ([]string, error)
	LookupMX(ctx context.Context, name string) ([]*net.MX, error)
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Step results in a Trace.
const (
	StepOK        = "ok"        // looked up, records found
	StepVoid      = "void"      // NXDOMAIN or no records: a void lookup
	StepTemperror = "temperror" // timeout or SERVFAIL
	StepPermerror = "permerror" // a limit exceeded, a loop, a missing record
	StepSkipped   = "skipped"   // not evaluated (see Detail)
)

// Step is one term of the record tree in the evaluation trace.
type Step struct {
	// Depth is 0 for the domain's own record, 1 inside its includes, etc.
	Depth int `json:"depth"`
	// Domain is the domain whose record contains the term.
	Domain string `json:"domain"`
	// Term is the mechanism or modifier as written, e.g. "include:_spf.example.net".
	Term string `json:"term"`
	// Mechanism is the mechanism or modifier name, e.g. "include".
	Mechanism string `json:"mechanism"`
	// Target is the domain looked up, after macro expansion.
	Target string `json:"target,omitempty"`
	// Lookups is 1 if the term counts against the 10-lookup limit, else 0.
	Lookups int `json:"lookups"`
	// Total is the running count of lookups after this term.
	Total int `json:"total"`
	// Result is one of the Step* values.
	Result string `json:"result"`
	// Detail explains the result, e.g. "2 MX hosts, 3 addresses".
	Detail string `json:"detail,omitempty"`
}

// Evaluation is the SPF posture of a domain.
type Evaluation struct {
	Domain string `json:"domain"`
	// Status is none, pass, permerror or temperror; see the package doc.
	Status Status `json:"status"`
	// Record is the domain's SPF record text, if exactly one was found.
	Record string `json:"record,omitempty"`
	// Records are all SPF records found at the domain (more than one is a
	// permerror).
	Records []string `json:"records,omitempty"`
	// Default is the result for a sender that matches no mechanism.
	Default Status `json:"default,omitempty"`
	// Lookups is the number of terms that caused DNS lookups (limit 10). When
	// the limit is exceeded, evaluation continues to show the full count.
	Lookups int `json:"lookups"`
	// VoidLookups is the number of lookups that returned no records (limit 2).
	VoidLookups int `json:"void_lookups"`
	// Trace is every term evaluated, in order, depth first.
	Trace []Step `json:"trace"`
	// Errors explain a permerror or temperror.
	Errors []string `json:"errors,omitempty"`
	// Warnings are problems that do not make the record fail.
	Warnings []string `json:"warnings,omitempty"`
}

type evaluator struct {
	r        Resolver
	ev       *Evaluation
	stack    []string // domains being evaluated, to detect loops
	warnSeen map[string]bool
}

// Evaluate evaluates the SPF record tree of domain. It never returns an
// error: failures are in the Evaluation's Status and Errors. Cancelling ctx
// makes pending lookups fail as temperror.
func Evaluate(ctx context.Context, r Resolver, domain string) *Evaluation {
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	e := &evaluator{r: r, ev: &Evaluation{Domain: domain, Status: Pass}, warnSeen: map[string]bool{}}

	txt, records, status, err := e.lookupRecord(ctx, domain)
	e.ev.Records = records
	switch status {
	case None:
		e.ev.Status = None
		e.ev.Errors = nil
		if err != nil {
			e.ev.Errors = append(e.ev.Errors, err.Error())
		}
		return e.ev
	case Temperror, Permerror:
		e.fail(status, err.Error())
		return e.ev
	}
	e.ev.Record = txt
	def, _ := e.evalRecord(ctx, domain, txt, 0)
	e.ev.Default = def

	if e.ev.Lookups > MaxLookups {
		e.fail(Permerror, fmt.Sprintf("the record needs %d DNS lookups; RFC 7208 section 4.6.4 allows at most %d", e.ev.Lookups, MaxLookups))
	} else if e.ev.Lookups >= nearLimit && e.ev.Status == Pass {
		e.warn(fmt.Sprintf("the record uses %d of the %d DNS lookups allowed; one more include can break it", e.ev.Lookups, MaxLookups))
	}
	if e.ev.VoidLookups > MaxVoidLookups {
		e.fail(Permerror, fmt.Sprintf("%d lookups returned no records; RFC 7208 section 4.6.4 allows at most %d void lookups", e.ev.VoidLookups, MaxVoidLookups))
	}
	return e.ev
}

// lookupRecord finds the single SPF record of domain (RFC 7208 section 4.4
// and 4.5).
func (e *evaluator) lookupRecord(ctx context.Context, domain string) (string, []string, Status, error) {
	return lookupSPF(ctx, e.r, domain)
}

// evalRecord evaluates one record and returns its default result (the
// result for a sender no mechanism matches) and whether it passes every
// sender ("+all", or an include of a record that does).
func (e *evaluator) evalRecord(ctx context.Context, domain, txt string, depth int) (Status, bool) {
	rec, err := ParseRecord(txt)
	if err != nil {
		e.fail(Permerror, fmt.Sprintf("SPF record of %s: %v", domain, err))
		return Permerror, false
	}
	e.stack = append(e.stack, domain)
	defer func() { e.stack = e.stack[:len(e.stack)-1] }()

	st := recordState{def: Neutral}
	for _, d := range rec.Directives {
		if e.ev.Lookups >= maxTotalLookups {
			e.fail(Permerror, fmt.Sprintf("stopped after %d DNS lookups", maxTotalLookups))
			return Permerror, st.passAll
		}
		e.evalDirective(ctx, d, domain, depth, &st)
	}
	e.noteModifiers(rec, domain, depth)

	if rec.Redirect != "" {
		return e.evalRedirect(ctx, rec.Redirect, domain, depth, st)
	}
	if depth == 0 && !st.hasAll {
		e.warn(fmt.Sprintf("%s: the record has no \"all\" mechanism, so unlisted senders get neutral; end it with \"-all\" or \"~all\"", domain))
	}
	return st.def, st.passAll
}

// recordState is what a record's directives decided so far: its default
// result, whether it has "all", and whether it passes every sender.
type recordState struct {
	def             Status
	hasAll, passAll bool
}

// evalDirective evaluates one directive of domain's record: it counts its
// lookup, adds its step to the trace (include adds its own) and updates st.
func (e *evaluator) evalDirective(ctx context.Context, d Directive, domain string, depth int, st *recordState) {
	step := Step{Depth: depth, Domain: domain, Term: d.Raw, Mechanism: d.Mechanism, Result: StepOK}
	if d.LooksUpDNS() {
		step.Lookups = 1
		e.ev.Lookups++
	}
	step.Total = e.ev.Lookups

	target := domain
	if d.DomainSpec != "" {
		t, ok := expandDomainSpec(d.DomainSpec, domain)
		if !ok {
			step.Target = d.DomainSpec
			step.Result = StepSkipped
			step.Detail = "uses a macro that depends on the sender or client; not evaluated"
			e.ev.Trace = append(e.ev.Trace, step)
			return
		}
		target = t
	}

	switch d.Mechanism {
	case "all":
		st.hasAll = true
		st.def = d.Result()
		switch d.Qualifier {
		case QualifierPass:
			st.passAll = true
			e.warn(fmt.Sprintf("%s: \"+all\" passes mail from every server on the internet; use \"-all\" or \"~all\"", domain))
		case QualifierNeutral:
			if depth == 0 {
				e.warn(fmt.Sprintf("%s: \"?all\" gives unlisted senders neutral, which protects nothing; use \"~all\" or \"-all\"", domain))
			}
		}
		step.Detail = "default result " + string(st.def)
	case "ip4", "ip6":
		step.Target = d.Network.String()
	case "include":
		step.Target = target
		if e.include(ctx, step, target, depth) && d.Qualifier == QualifierPass {
			st.passAll = true
		}
		return
	case "a":
		step.Target = target
		e.lookupAddrs(ctx, &step, target)
	case "mx":
		step.Target = target
		e.lookupMX(ctx, &step, target)
	case "ptr":
		step.Target = target
		step.Result = StepSkipped
		step.Detail = "needs the client's address; counted but not evaluated"
		e.warn(fmt.Sprintf("%s: the ptr mechanism is slow and unreliable and SHOULD NOT be used (RFC 7208 section 5.5)", domain))
	case "exists":
		step.Target = target
		e.lookupAddrs(ctx, &step, target)
	}
	e.ev.Trace = append(e.ev.Trace, step)
}

// noteModifiers traces the record's exp= modifier (never fetched) and
// warns of unknown modifiers.
func (e *evaluator) noteModifiers(rec *Record, domain string, depth int) {
	if rec.Explanation != "" {
		// RFC 7208 section 6.2: exp is only fetched for a fail result and does
		// not count against the lookup limit.
		e.ev.Trace = append(e.ev.Trace, Step{
			Depth: depth, Domain: domain, Term: "exp=" + rec.Explanation, Mechanism: "exp",
			Target: rec.Explanation, Total: e.ev.Lookups, Result: StepSkipped,
			Detail: "fetched only for a fail result; not counted against the lookup limit",
		})
	}
	for _, m := range rec.Unknown {
		e.warn(fmt.Sprintf("%s: unknown modifier %q is ignored", domain, m.Name))
	}
}

// evalRedirect follows the record's redirect= modifier, unless the record
// has "all" (then st decides), and returns the record's result as
// evalRecord does.
func (e *evaluator) evalRedirect(ctx context.Context, redirect, domain string, depth int, st recordState) (Status, bool) {
	step := Step{Depth: depth, Domain: domain, Term: "redirect=" + redirect, Mechanism: "redirect"}
	if st.hasAll {
		// RFC 7208 section 6.1: redirect is ignored when "all" is present.
		step.Result = StepSkipped
		step.Total = e.ev.Lookups
		step.Detail = "ignored because the record has an \"all\" mechanism"
		e.ev.Trace = append(e.ev.Trace, step)
		e.warn(fmt.Sprintf("%s: redirect is ignored because the record also has \"all\"", domain))
		return st.def, st.passAll
	}
	step.Lookups = 1
	e.ev.Lookups++
	step.Total = e.ev.Lookups
	target, ok := expandDomainSpec(redirect, domain)
	if !ok {
		step.Target = redirect
		step.Result = StepSkipped
		step.Detail = "uses a macro that depends on the sender or client; not evaluated"
		e.ev.Trace = append(e.ev.Trace, step)
		return Neutral, false
	}
	step.Target = target
	return e.redirect(ctx, &step, target, depth)
}

// include evaluates include:target (RFC 7208 section 5.2) and appends its
// step to the trace, before the steps of the included record. It returns
// whether the included record passes every sender.
func (e *evaluator) include(ctx context.Context, step Step, target string, depth int) bool {
	if e.inStack(target) {
		chain := strings.Join(append(slices.Clone(e.stack), target), " -> ")
		step.Result = StepPermerror
		step.Detail = "include loop: " + chain
		e.ev.Trace = append(e.ev.Trace, step)
		e.fail(Permerror, "include loop: "+chain)
		return false
	}
	txt, _, status, err := e.lookupRecord(ctx, target)
	switch status {
	case None:
		// Section 5.2: an include of a domain without SPF record is a
		// permerror. The empty answer is also a void lookup.
		e.ev.VoidLookups++
		step.Result = StepPermerror
		step.Detail = "no SPF record at " + target
		e.ev.Trace = append(e.ev.Trace, step)
		e.fail(Permerror, fmt.Sprintf("include:%s: %s has no SPF record (RFC 7208 section 5.2 makes this a permerror)", target, target))
		return false
	case Temperror, Permerror:
		step.Result = string(status)
		step.Detail = err.Error()
		e.ev.Trace = append(e.ev.Trace, step)
		e.fail(status, err.Error())
		return false
	}
	e.ev.Trace = append(e.ev.Trace, step)
	n := len(e.ev.Trace) - 1
	before := e.ev.Lookups
	_, passAll := e.evalRecord(ctx, target, txt, depth+1)
	e.ev.Trace[n].Detail = fmt.Sprintf("lookups inside the included record: %d", e.ev.Lookups-before)
	if passAll {
		e.warn(fmt.Sprintf("include:%s passes every sender because its record passes all", target))
	}
	return passAll
}

// redirect evaluates redirect=target (RFC 7208 section 6.1).
func (e *evaluator) redirect(ctx context.Context, step *Step, target string, depth int) (Status, bool) {
	if e.inStack(target) {
		step.Result = StepPermerror
		step.Detail = "redirect loop"
		e.ev.Trace = append(e.ev.Trace, *step)
		e.fail(Permerror, "redirect loop: "+strings.Join(append(slices.Clone(e.stack), target), " -> "))
		return Permerror, false
	}
	txt, _, status, err := e.lookupRecord(ctx, target)
	switch status {
	case None:
		e.ev.VoidLookups++
		step.Result = StepPermerror
		step.Detail = "no SPF record at " + target
		e.ev.Trace = append(e.ev.Trace, *step)
		e.fail(Permerror, fmt.Sprintf("redirect=%s: %s has no SPF record (RFC 7208 section 6.1 makes this a permerror)", target, target))
		return Permerror, false
	case Temperror, Permerror:
		step.Result = string(status)
		step.Detail = err.Error()
		e.ev.Trace = append(e.ev.Trace, *step)
		e.fail(status, err.Error())
		return status, false
	}
	e.ev.Trace = append(e.ev.Trace, *step)
	// The redirect target replaces the current record, so it is evaluated at
	// the same depth for the "missing all" warning's purposes.
	return e.evalRecord(ctx, target, txt, depth)
}

// lookupAddrs does the A/AAAA lookup of the a and exists mechanisms (RFC
// 7208 sections 5.3 and 5.7). A posture check has no client address family,
// so both types are asked; the lookup is void only if neither has records.
func (e *evaluator) lookupAddrs(ctx context.Context, step *Step, target string) {
	network := "ip"
	if step.Mechanism == "exists" {
		network = "ip4" // section 5.7: exists always uses an A query
	}
	addrs, err := e.r.LookupNetIP(ctx, network, target)
	switch {
	case err == nil:
		step.Detail = fmt.Sprintf("%d addresses", len(addrs))
	case isNotFound(err):
		e.void(step, "no address records")
	default:
		step.Result = StepTemperror
		step.Detail = err.Error()
		e.fail(Temperror, fmt.Sprintf("%s: %v", step.Term, err))
	}
}

// lookupMX does the lookups of the mx mechanism (RFC 7208 section 5.4): the
// MX records, then the addresses of at most 10 hosts.
func (e *evaluator) lookupMX(ctx context.Context, step *Step, target string) {
	mxs, err := e.r.LookupMX(ctx, target)
	switch {
	case err == nil:
	case isNotFound(err):
		e.void(step, "no MX records")
		return
	default:
		step.Result = StepTemperror
		step.Detail = err.Error()
		e.fail(Temperror, fmt.Sprintf("%s: %v", step.Term, err))
		return
	}
	if len(mxs) == 1 && mxs[0].Host == "." {
		// A null MX (RFC 7505) has no hosts to look up.
		step.Detail = "null MX: no hosts"
		return
	}
	if len(mxs) > MaxMXHosts {
		step.Result = StepPermerror
		step.Detail = fmt.Sprintf("%d MX hosts; at most %d may be looked up", len(mxs), MaxMXHosts)
		e.fail(Permerror, fmt.Sprintf("%s: %s has %d MX hosts; RFC 7208 section 4.6.4 makes an mx mechanism with more than %d hosts a permerror", step.Term, target, len(mxs), MaxMXHosts))
		return
	}
	naddrs, unresolved := 0, 0
	for _, mx := range mxs {
		addrs, err := e.r.LookupNetIP(ctx, "ip", mx.Host)
		switch {
		case err == nil:
			naddrs += len(addrs)
		case isNotFound(err):
			unresolved++
		default:
			step.Result = StepTemperror
			step.Detail = err.Error()
			e.fail(Temperror, fmt.Sprintf("%s: MX host %s: %v", step.Term, mx.Host, err))
			return
		}
	}
	step.Detail = fmt.Sprintf("%d MX hosts, %d addresses", len(mxs), naddrs)
	if unresolved > 0 {
		step.Detail += fmt.Sprintf(", %d hosts without addresses", unresolved)
	}
}

func (e *evaluator) void(step *Step, detail string) {
	e.ev.VoidLookups++
	step.Result = StepVoid
	step.Detail = fmt.Sprintf("%s (void lookup %d of %d allowed)", detail, e.ev.VoidLookups, MaxVoidLookups)
}

func (e *evaluator) inStack(domain string) bool {
	return slices.Contains(e.stack, domain)
}

// fail records an error. permerror wins over temperror: a record that is
// broken stays broken whatever the DNS does.
func (e *evaluator) fail(status Status, msg string) {
	if !slices.Contains(e.ev.Errors, msg) {
		e.ev.Errors = append(e.ev.Errors, msg)
	}
	if e.ev.Status != Permerror {
		e.ev.Status = status
	}
}

func (e *evaluator) warn(msg string) {
	if !e.warnSeen[msg] {
		e.warnSeen[msg] = true
		e.ev.Warnings = append(e.ev.Warnings, msg)
	}
}

func isNotFound(err error) bool {
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr) && dnsErr.IsNotFound
}

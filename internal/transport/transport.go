package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/health"
	"github.com/mailwatch/mailwatch/internal/mxprobe"
)

// hostConcurrency bounds the MX hosts of one domain probed at once (each
// probes up to four addresses at a time itself).
const hostConcurrency = 4

// Service probes domains' MX hosts and stores the results.
type Service struct {
	// Prober probes one MX host; its Config.AllowAddr guards the dials.
	Prober *mxprobe.Prober
	// Emitter writes the events; a zero Emitter takes the River client
	// from the context (inside a worker).
	Emitter *events.Emitter
	// Now is the clock of probed_at and notices; time.Now when nil. The
	// prober has its own clock for certificate validity.
	Now func() time.Time
	// AfterStore, when set, runs in the transaction that stored a domain's
	// conclusive results: they move the transport cap of its health score,
	// which the caller recomputes (the workers queue the domain's health
	// job) rather than waiting for the domain's next DNS check.
	AfterStore func(ctx context.Context, tx pgx.Tx, domainID uuid.UUID) error
}

// Policy is what the domain's stored MTA-STS check says.
type Policy struct {
	// Mode is the policy's mode ("enforce", "testing", "none"), "" when no
	// policy was fetched.
	Mode string `json:"mode"`
	// MX are the policy's mx patterns.
	MX []string `json:"mx"`
}

// Targets are a domain's MX hosts and MTA-STS policy, read from its stored
// DNS check results.
type Targets struct {
	Hosts  []string
	Policy Policy
	// Conclusive is set when the stored MX check answered (pass, warn,
	// fail, none, neutral): the host list may then drop old hosts' rows.
	Conclusive bool
}

// TargetsFrom reads the MX hosts and MTA-STS policy from a domain's stored
// check results (domains.results); nil or unparsable results have none.
func TargetsFrom(results []byte) Targets {
	var t Targets
	if len(results) == 0 {
		return t
	}
	var rs dnscheck.Results
	if err := json.Unmarshal(results, &rs); err != nil {
		return t
	}
	if rs.MTASTS != nil && rs.MTASTS.Policy != nil {
		t.Policy = Policy{Mode: rs.MTASTS.Policy.Mode, MX: append([]string{}, rs.MTASTS.Policy.MX...)}
	}
	if rs.MX == nil {
		return t
	}
	t.Conclusive = rs.MX.Status != dnscheck.StatusTemperror
	if rs.MX.NullMX {
		return t
	}
	for _, h := range rs.MX.Hosts {
		host := strings.ToLower(strings.TrimSuffix(h.Host, "."))
		if host != "" && host != "." && !slices.Contains(t.Hosts, host) {
			t.Hosts = append(t.Hosts, host)
		}
	}
	return t
}

// patterns are the mx patterns Probe checks hosts against: none when the
// policy is absent or withdrawn.
func (p Policy) patterns() []string {
	if p.Mode == "" || p.Mode == "none" {
		return nil
	}
	return p.MX
}

// Outcome is what one ProbeDomain did.
type Outcome struct {
	Domain string
	// Results are the probes, one per MX host, in MX order.
	Results []mxprobe.HostResult
	// Stored counts the hosts whose rows were replaced; Temporary hosts
	// are skipped.
	Stored int
	// Events are the types emitted, in order.
	Events []string
}

// ErrNotFound is returned for a domain that does not exist.
var ErrNotFound = errors.New("transport: domain not found")

// ProbeDomain probes every MX host of the domain (outside any
// transaction: a probe may take minutes) and then applies the conclusive
// results in one transaction (see the package comment).
func (s *Service) ProbeDomain(ctx context.Context, db dbutil.Executor, domainID uuid.UUID) (Outcome, error) {
	q := dbsqlc.New()
	d, err := q.DomainGetByID(ctx, db, domainID)
	if dbutil.IsNotFound(err) {
		return Outcome{}, ErrNotFound
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("error reading domain: %w", err)
	}
	targets := TargetsFrom(d.Results)
	out := Outcome{Domain: d.Name, Results: s.probeAll(ctx, targets)}
	if err := ctx.Err(); err != nil {
		// A cancelled probe is inconclusive everywhere: store nothing.
		return out, err
	}
	err = dbutil.WithTx(ctx, db, func(ctx context.Context, tx pgx.Tx) error {
		out.Stored, out.Events = 0, nil
		// The domain's row lock serialises the probes of one domain, also
		// for a host that has no stored row yet to lock.
		if _, err := q.DomainGetByIDForUpdate(ctx, tx, d.ID); dbutil.IsNotFound(err) {
			return ErrNotFound
		} else if err != nil {
			return fmt.Errorf("error locking domain: %w", err)
		}
		if targets.Conclusive {
			if err := q.TransportDeleteOtherHosts(ctx, tx, dbsqlc.TransportDeleteOtherHostsParams{
				AccountID: d.AccountID, DomainID: d.ID, Hosts: append([]string{}, targets.Hosts...),
			}); err != nil {
				return fmt.Errorf("error dropping old MX hosts: %w", err)
			}
		}
		for _, r := range out.Results {
			if r.Verdict == mxprobe.VerdictTemporary {
				continue
			}
			evs, err := s.apply(ctx, tx, d, targets.Policy, r)
			if err != nil {
				return err
			}
			out.Stored++
			out.Events = append(out.Events, evs...)
		}
		if out.Stored > 0 && s.AfterStore != nil {
			return s.AfterStore(ctx, tx, d.ID)
		}
		return nil
	})
	return out, err
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) probeAll(ctx context.Context, t Targets) []mxprobe.HostResult {
	out := make([]mxprobe.HostResult, len(t.Hosts))
	sem := make(chan struct{}, hostConcurrency)
	var wg sync.WaitGroup
	for i, h := range t.Hosts {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = s.Prober.Probe(ctx, h, t.Policy.patterns())
		})
	}
	wg.Wait()
	return out
}

// apply replaces one conclusive host's rows and emits what changed.
func (s *Service) apply(ctx context.Context, tx pgx.Tx, d dbsqlc.Domain, pol Policy, r mxprobe.HostResult) ([]string, error) {
	q := dbsqlc.New()
	prev, err := q.TransportResultsByHostForUpdate(ctx, tx, dbsqlc.TransportResultsByHostForUpdateParams{
		AccountID: d.AccountID, DomainID: d.ID, MxHost: r.Host,
	})
	if err != nil {
		return nil, fmt.Errorf("error reading %s's previous probe: %w", r.Host, err)
	}
	prevFailing := slices.ContainsFunc(prev, func(p dbsqlc.MxProbeResult) bool { return p.HostVerdict != string(mxprobe.VerdictOK) })
	prevMismatch := slices.ContainsFunc(prev, func(p dbsqlc.MxProbeResult) bool { return p.DaneStatus == string(mxprobe.DANEMismatch) })
	if err := q.TransportDeleteHost(ctx, tx, dbsqlc.TransportDeleteHostParams{AccountID: d.AccountID, DomainID: d.ID, MxHost: r.Host}); err != nil {
		return nil, fmt.Errorf("error replacing %s's probe: %w", r.Host, err)
	}
	at := s.now().UTC()
	for _, p := range Rows(d.AccountID, d.ID, r, at) {
		if err := q.TransportInsert(ctx, tx, p); err != nil {
			return nil, fmt.Errorf("error storing %s's probe: %w", r.Host, err)
		}
	}

	var emitted []string
	emit := func(typ string, sev events.Severity, payload any) error {
		if _, err := s.Emitter.Emit(ctx, tx, events.Event{AccountID: d.AccountID, Type: typ, Severity: sev, Payload: payload,
			Domain: d.Name, Tags: d.Tags}); err != nil {
			return fmt.Errorf("error emitting %s: %w", typ, err)
		}
		emitted = append(emitted, typ)
		return nil
	}
	failing := r.Verdict == mxprobe.VerdictTLSFailing || r.Verdict == mxprobe.VerdictSMTPFailing
	if failing && !prevFailing {
		sev := events.SeverityWarning
		if pol.Mode == "enforce" || r.TLSA.Published() {
			sev = events.SeverityCritical
		}
		if err := emit(events.TypeMXTLSFailing, sev, TLSFailingPayload{
			Domain: d.Name, MXHost: r.Host, Verdict: string(r.Verdict), Problems: codes(r.Problems),
			MTASTSMode: pol.Mode, DANE: r.TLSA.Published(), Addresses: addrs(r, nil),
		}); err != nil {
			return nil, err
		}
	}
	mismatched := addrs(r, func(a mxprobe.AddrResult) bool { return a.DANE != nil && a.DANE.Status == mxprobe.DANEMismatch })
	if len(mismatched) > 0 && !prevMismatch {
		recs := make([]string, 0, len(r.TLSA.Records))
		for _, rec := range r.TLSA.Records {
			recs = append(recs, rec.String())
		}
		if err := emit(events.TypeDANEMismatch, "", DANEMismatchPayload{Domain: d.Name, MXHost: r.Host, Addresses: mismatched, Records: recs}); err != nil {
			return nil, err
		}
	}
	for _, a := range r.Addresses {
		if a.TLS == nil || a.TLS.Fingerprint == "" {
			continue
		}
		threshold, sev, ok := mxprobe.ExpiryThreshold(a.TLS.DaysLeft)
		if !ok {
			continue
		}
		n, err := q.TransportNoticeInsert(ctx, tx, dbsqlc.TransportNoticeInsertParams{
			AccountID: d.AccountID, DomainID: d.ID, Fingerprint: a.TLS.Fingerprint, Threshold: int32(threshold),
			MxHost: r.Host, NotAfter: a.TLS.NotAfter, SentAt: at,
		})
		if err != nil {
			return nil, fmt.Errorf("error recording an expiry notice: %w", err)
		}
		if n == 0 {
			continue
		}
		if err := emit(events.TypeCertificateExpiring, events.Severity(sev), ExpiringPayload{
			Domain: d.Name, MXHost: r.Host, Fingerprint: a.TLS.Fingerprint, NotAfter: a.TLS.NotAfter.UTC(),
			DaysLeft: a.TLS.DaysLeft, Threshold: threshold,
		}); err != nil {
			return nil, err
		}
	}
	return emitted, nil
}

// TLSFailingPayload is the payload of mx_tls_failing.
type TLSFailingPayload struct {
	Domain     string   `json:"domain"`
	MXHost     string   `json:"mx_host"`
	Verdict    string   `json:"verdict"`
	Problems   []string `json:"problems"`
	MTASTSMode string   `json:"mta_sts_mode"`
	DANE       bool     `json:"dane"`
	Addresses  []string `json:"addresses"`
}

// ExpiringPayload is the payload of certificate_expiring.
type ExpiringPayload struct {
	Domain      string    `json:"domain"`
	MXHost      string    `json:"mx_host"`
	Fingerprint string    `json:"fingerprint"`
	NotAfter    time.Time `json:"not_after"`
	DaysLeft    int       `json:"days_left"`
	Threshold   int       `json:"threshold"`
}

// DANEMismatchPayload is the payload of dane_mismatch.
type DANEMismatchPayload struct {
	Domain    string   `json:"domain"`
	MXHost    string   `json:"mx_host"`
	Addresses []string `json:"addresses"`
	Records   []string `json:"records"`
}

func codes(ps []mxprobe.Problem) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if !slices.Contains(out, string(p.Code)) {
			out = append(out, string(p.Code))
		}
	}
	return out
}

// addrs lists the addresses of r that keep returns true for (all when nil).
func addrs(r mxprobe.HostResult, keep func(mxprobe.AddrResult) bool) []string {
	out := []string{}
	for _, a := range r.Addresses {
		if keep == nil || keep(a) {
			out = append(out, a.Addr.String())
		}
	}
	return out
}

// Rows are the rows a conclusive host result is stored as: one per
// address, or one with address "" for a host without any.
func Rows(accountID, domainID uuid.UUID, r mxprobe.HostResult, at time.Time) []dbsqlc.TransportInsertParams {
	base := dbsqlc.TransportInsertParams{
		AccountID: accountID, DomainID: domainID, MxHost: r.Host, Port: int32(r.Port), HostVerdict: string(r.Verdict),
		MatchesPolicy: r.MatchesPolicy, ProbedAt: at,
	}
	if len(r.Addresses) == 0 {
		p := base
		p.Verdict = string(r.Verdict)
		p.Problems = mustJSON(nonNil(r.Problems))
		return []dbsqlc.TransportInsertParams{p}
	}
	// Host-level problems (the MTA-STS pattern, the TLSA lookup) are in
	// no address's list: each address row carries them too, so a stored
	// row says why its host fails.
	seen := map[mxprobe.Code]bool{}
	for _, a := range r.Addresses {
		for _, p := range a.Problems {
			seen[p.Code] = true
		}
	}
	var hostOnly []mxprobe.Problem
	for _, p := range r.Problems {
		if !seen[p.Code] {
			hostOnly = append(hostOnly, p)
		}
	}
	out := make([]dbsqlc.TransportInsertParams, 0, len(r.Addresses))
	for _, a := range r.Addresses {
		p := base
		p.Address = a.Addr.String()
		p.Verdict = string(a.Verdict)
		p.Problems = mustJSON(append(append([]mxprobe.Problem{}, a.Problems...), hostOnly...))
		p.Starttls = a.StartTLS
		if t := a.TLS; t != nil {
			na, days := t.NotAfter.UTC(), int32(t.DaysLeft)
			p.TlsVersion, p.CipherSuite, p.Verified, p.NameMatches = &t.Version, &t.CipherSuite, &t.Verified, &t.NameMatches
			p.NotAfter, p.DaysLeft, p.Fingerprint = &na, &days, &t.Fingerprint
		}
		if a.DANE != nil {
			p.DaneStatus, p.DaneRollover = string(a.DANE.Status), a.DANE.Rollover
		}
		p.Fcrdns = a.ReverseDNS.Confirmed
		p.Ptr = a.ReverseDNS.ConfirmedName
		if p.Ptr == "" && len(a.ReverseDNS.Names) > 0 {
			p.Ptr = a.ReverseDNS.Names[0]
		}
		out = append(out, p)
	}
	return out
}

func nonNil(ps []mxprobe.Problem) []mxprobe.Problem {
	if ps == nil {
		return []mxprobe.Problem{}
	}
	return ps
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // problems are plain strings
	}
	return b
}

// Host is a domain's stored probe of one MX host, for the API and the
// dashboard.
type Host struct {
	Host    string
	Verdict string
	// TLSRPTFailures is the failed sessions TLS reports of the last
	// TLSRPTWindow name this host as the receiving MX.
	TLSRPTFailures int64
	Addresses      []dbsqlc.MxProbeResult
}

// View is a domain's stored transport state.
type View struct {
	Hosts []Host
	// Policy is the stored MTA-STS policy.
	Policy Policy
	// SafeToEnforce is set when the policy's mode is not enforce yet and
	// every MX host's stored probe passes what an MTA-STS sender checks
	// (mxprobe.SafeToEnforce over the stored facts); Reasons say what
	// stands in the way otherwise.
	SafeToEnforce bool
	Reasons       []string
	ProbedAt      *time.Time
}

// TLSRPTWindow is how far back TLS-RPT failures are counted per MX.
const TLSRPTWindow = 30 * 24 * time.Hour

// Load reads a domain's stored transport state. results are the domain's
// stored check results (for the policy).
func Load(ctx context.Context, db dbsqlc.DBTX, d dbsqlc.Domain, now time.Time) (View, error) {
	q := dbsqlc.New()
	rows, err := q.TransportResultsByDomain(ctx, db, dbsqlc.TransportResultsByDomainParams{AccountID: d.AccountID, DomainID: d.ID})
	if err != nil {
		return View{}, fmt.Errorf("error reading transport results: %w", err)
	}
	fails, err := q.TransportTLSRPTFailures(ctx, db, dbsqlc.TransportTLSRPTFailuresParams{DomainID: d.ID, Since: now.Add(-TLSRPTWindow)})
	if err != nil {
		return View{}, fmt.Errorf("error counting TLS-RPT failures: %w", err)
	}
	perMX := map[string]int64{}
	for _, f := range fails {
		perMX[f.MxHost] = f.Failures
	}
	targets := TargetsFrom(d.Results)
	v := View{Hosts: []Host{}, Policy: targets.Policy}
	if v.Policy.MX == nil {
		v.Policy.MX = []string{}
	}
	idx := map[string]int{}
	for _, r := range rows {
		i, ok := idx[r.MxHost]
		if !ok {
			i = len(v.Hosts)
			idx[r.MxHost] = i
			v.Hosts = append(v.Hosts, Host{Host: r.MxHost, Verdict: r.HostVerdict, TLSRPTFailures: perMX[r.MxHost]})
		}
		v.Hosts[i].Addresses = append(v.Hosts[i].Addresses, r)
		if v.ProbedAt == nil || r.ProbedAt.After(*v.ProbedAt) {
			at := r.ProbedAt.UTC()
			v.ProbedAt = &at
		}
	}
	// MX order: the stored check's order, then any other stored host.
	sort.SliceStable(v.Hosts, func(i, j int) bool {
		return order(targets.Hosts, v.Hosts[i].Host) < order(targets.Hosts, v.Hosts[j].Host)
	})
	v.SafeToEnforce, v.Reasons = safeToEnforce(targets, rows)
	if v.Reasons == nil {
		v.Reasons = []string{}
	}
	return v, nil
}

func order(hosts []string, h string) int {
	if i := slices.Index(hosts, h); i >= 0 {
		return i
	}
	return len(hosts)
}

// safeToEnforce applies mxprobe.SafeToEnforce to the stored rows: it
// rebuilds each host's facts (addresses, TLS verified, name, expiry) from
// them. Only a domain with a testing policy gets the advice.
func safeToEnforce(t Targets, rows []dbsqlc.MxProbeResult) (bool, []string) {
	if t.Policy.Mode != "testing" {
		return false, nil
	}
	if len(t.Hosts) == 0 {
		return false, []string{"the domain has no MX hosts to probe"}
	}
	byHost := map[string]*mxprobe.HostResult{}
	for _, r := range rows {
		h := byHost[r.MxHost]
		if h == nil {
			h = &mxprobe.HostResult{Host: r.MxHost, Verdict: mxprobe.Verdict(r.HostVerdict)}
			byHost[r.MxHost] = h
		}
		if r.Address == "" {
			continue
		}
		a := mxprobe.AddrResult{Verdict: mxprobe.Verdict(r.Verdict), StartTLS: r.Starttls}
		if addr, err := parseAddr(r.Address); err == nil {
			a.Addr = addr
		}
		if r.TlsVersion != nil {
			a.TLS = &mxprobe.TLSInfo{Version: *r.TlsVersion, Verified: deref(r.Verified), NameMatches: deref(r.NameMatches)}
			if r.DaysLeft != nil {
				a.TLS.DaysLeft = int(*r.DaysLeft)
			}
			if r.NotAfter != nil {
				a.TLS.NotAfter = *r.NotAfter
			}
		}
		h.Addresses = append(h.Addresses, a)
	}
	var results []mxprobe.HostResult
	var reasons []string
	for _, host := range t.Hosts {
		h, ok := byHost[host]
		if !ok {
			reasons = append(reasons, host+": not probed yet")
			continue
		}
		results = append(results, *h)
	}
	safe, more := mxprobe.SafeToEnforce(results, t.Policy.MX)
	reasons = append(reasons, more...)
	return safe && len(reasons) == 0, reasons
}

func deref(b *bool) bool { return b != nil && *b }

// HealthCap is the domain's transport cap on the health score
// (health.TransportCap): the MX hosts whose stored probe fails while the
// stored MTA-STS policy enforces or the host publishes DANE.
func HealthCap(ctx context.Context, db dbsqlc.DBTX, d *dbsqlc.Domain) (health.Cap, bool, error) {
	n, err := dbsqlc.New().TransportFailingEnforced(ctx, db, dbsqlc.TransportFailingEnforcedParams{
		AccountID: d.AccountID, DomainID: d.ID, Enforced: TargetsFrom(d.Results).Policy.Mode == "enforce",
	})
	if err != nil {
		return health.Cap{}, false, fmt.Errorf("error reading failing MX hosts: %w", err)
	}
	c, ok := health.TransportCap(int(n))
	return c, ok, nil
}

func parseAddr(s string) (netip.Addr, error) { return netip.ParseAddr(s) }

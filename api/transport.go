package api

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/transport"
)

// Transport is a domain's MX transport: the stored probe of every MX host.
type Transport struct {
	Domain       string          `json:"domain" validate:"required"`
	ProbeEnabled bool            `json:"probe_enabled" validate:"required" description:"SMTP_PROBE: false when this server probes nothing (many clouds block outbound port 25)."`
	ProbedAt     *time.Time      `json:"probed_at" validate:"required" description:"The latest stored probe; null before the first conclusive one."`
	MTASTS       TransportPolicy `json:"mta_sts" validate:"required"`
	Hosts        []TransportHost `json:"hosts" validate:"required" description:"The MX hosts with a stored probe, in MX order."`
}

// TransportPolicy is the domain's MTA-STS policy and whether moving it to
// enforce is safe.
type TransportPolicy struct {
	Mode          string   `json:"mode" validate:"required" description:"The stored policy's mode (enforce, testing, none); empty without a policy."`
	MX            []string `json:"mx" validate:"required" description:"The policy's mx patterns."`
	SafeToEnforce bool     `json:"safe_to_enforce" validate:"required" description:"True for a testing policy when every MX host passed a verified TLS handshake with a certificate valid for its name and matching the policy: mode enforce would lose no mail."`
	Reasons       []string `json:"reasons" validate:"required" description:"What stands in the way of enforce."`
}

// TransportHost is one MX host's stored probe.
type TransportHost struct {
	MXHost         string             `json:"mx_host" validate:"required"`
	Verdict        string             `json:"verdict" validate:"required" enum:"ok,tls_failing,smtp_failing"`
	TLSRPTFailures int64              `json:"tls_rpt_failures" validate:"required" description:"Failed TLS sessions that TLS reports (RFC 8460) of the last 30 days name this host as the receiving MX for."`
	Addresses      []TransportAddress `json:"addresses" validate:"required"`
}

// TransportAddress is the probe of one address of an MX host (a host with
// no address has one entry with address "").
type TransportAddress struct {
	MXHost        string             `json:"mx_host" validate:"required"`
	Address       string             `json:"address" validate:"required"`
	Port          int32              `json:"port" validate:"required"`
	Verdict       string             `json:"verdict" validate:"required" enum:"ok,temporary,tls_failing,smtp_failing"`
	HostVerdict   string             `json:"host_verdict" validate:"required" enum:"ok,tls_failing,smtp_failing"`
	Problems      []TransportProblem `json:"problems" validate:"required"`
	StartTLS      bool               `json:"starttls" validate:"required" description:"Whether EHLO offered STARTTLS."`
	TLSVersion    *string            `json:"tls_version" validate:"required"`
	CipherSuite   *string            `json:"cipher_suite" validate:"required"`
	Verified      *bool              `json:"verified" validate:"required" description:"The chain verifies against the system roots (and SMTP_PROBE_CA_FILE)."`
	NameMatches   *bool              `json:"name_matches" validate:"required" description:"The certificate is valid for the MX host name."`
	MatchesPolicy *bool              `json:"matches_policy" validate:"required" description:"The MX host matches the MTA-STS policy's mx patterns; null without a policy."`
	NotAfter      *time.Time         `json:"not_after" validate:"required"`
	DaysLeft      *int32             `json:"days_left" validate:"required"`
	Fingerprint   *string            `json:"fingerprint" validate:"required" description:"SHA-256 of the leaf certificate, hex."`
	DANEStatus    string             `json:"dane_status" validate:"required" description:"Empty when no TLSA record is published under a DNSSEC-validated answer; else matched, mismatch, no_tls or unusable."`
	DANERollover  bool               `json:"dane_rollover" validate:"required"`
	FCrDNS        bool               `json:"fcrdns" validate:"required" description:"The address's PTR name resolves back to it."`
	PTR           string             `json:"ptr" validate:"required"`
	ProbedAt      time.Time          `json:"probed_at" validate:"required"`
}

// TransportProblem is one finding of a probe, with a stable code.
type TransportProblem struct {
	Code   string `json:"code" validate:"required" description:"e.g. starttls_not_offered, certificate_expired, name_mismatch, dane_mismatch."`
	Kind   string `json:"kind" validate:"required" enum:"temporary,smtp,tls"`
	Detail string `json:"detail,omitempty"`
}

// TransportCheck is the answer of POST .../transport/check.
type TransportCheck struct {
	Domain string `json:"domain" validate:"required"`
	JobID  int64  `json:"job_id" validate:"required" description:"The River job that probes the domain's MX hosts."`
}

func (s *Server) transportRoutes() {
	const base = "/api/accounts/me/domains/{domain}/transport"
	const tag = "domains"
	s.ops.GetDomainTransport = Handle(s.router, Endpoint[DomainPath, Transport]{
		Method: "GET", Path: base, OperationID: "getDomainTransport", Tag: tag, Errors: []int{404},
		Summary: "The stored probes of the domain's MX hosts",
		Description: "Per MX host and address: STARTTLS, TLS version and cipher, certificate trust, name and expiry, DANE, " +
			"forward-confirmed reverse DNS, with TLS-RPT failures per host and whether the MTA-STS policy can move to enforce.",
		Call: s.getTransport,
	})
	Handle(s.router, Endpoint[DomainPath, TransportCheck]{
		Method: "POST", Path: base + "/check", Status: 202, OperationID: "checkDomainTransport", Tag: tag, Errors: []int{404, 409},
		Summary: "Probe the domain's MX hosts now",
		Description: "Queues a probe of every MX host (never MAIL FROM or RCPT TO). An inconclusive probe (port 25 unreachable, " +
			"a timeout) changes nothing. 409 when this server has SMTP_PROBE=off.",
		Call: s.checkTransport,
	})
}

// getTransport serves GET /api/accounts/me/domains/{domain}/transport: the stored probes of the domain's MX hosts.
func (s *Server) getTransport(ctx context.Context, req *DomainPath) (*Transport, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	v, err := transport.Load(ctx, s.db, d, s.now())
	if err != nil {
		return nil, err
	}
	out := &Transport{Domain: d.Name, ProbeEnabled: s.deps.SMTPProbe, ProbedAt: v.ProbedAt, Hosts: []TransportHost{},
		MTASTS: TransportPolicy{Mode: v.Policy.Mode, MX: v.Policy.MX, SafeToEnforce: v.SafeToEnforce, Reasons: v.Reasons}}
	for _, h := range v.Hosts {
		th := TransportHost{MXHost: h.Host, Verdict: h.Verdict, TLSRPTFailures: h.TLSRPTFailures, Addresses: []TransportAddress{}}
		for _, r := range h.Addresses {
			th.Addresses = append(th.Addresses, transportAddress(r))
		}
		out.Hosts = append(out.Hosts, th)
	}
	return out, nil
}

func transportAddress(r dbsqlc.MxProbeResult) TransportAddress {
	problems := []TransportProblem{}
	_ = json.Unmarshal(r.Problems, &problems) // written by transport.Rows
	if problems == nil {
		problems = []TransportProblem{}
	}
	return TransportAddress{
		MXHost: r.MxHost, Address: r.Address, Port: r.Port, Verdict: r.Verdict, HostVerdict: r.HostVerdict, Problems: problems,
		StartTLS: r.Starttls, TLSVersion: r.TlsVersion, CipherSuite: r.CipherSuite, Verified: r.Verified, NameMatches: r.NameMatches,
		MatchesPolicy: r.MatchesPolicy, NotAfter: whUTC(r.NotAfter), DaysLeft: r.DaysLeft, Fingerprint: r.Fingerprint,
		DANEStatus: r.DaneStatus, DANERollover: r.DaneRollover, FCrDNS: r.Fcrdns, PTR: r.Ptr, ProbedAt: r.ProbedAt.UTC(),
	}
}

// checkTransport serves POST /api/accounts/me/domains/{domain}/transport/check: probe the domain's MX hosts now.
func (s *Server) checkTransport(ctx context.Context, req *DomainPath) (*TransportCheck, error) {
	d, err := s.getDomain(ctx, s.db, req.Name)
	if err != nil {
		return nil, err
	}
	if !s.deps.SMTPProbe {
		return nil, Conflict("MX probes are off on this server (SMTP_PROBE=off)")
	}
	id, err := transport.QueueProbe(ctx, s.db, s.deps.River, d.ID)
	if err != nil {
		return nil, err
	}
	return &TransportCheck{Domain: d.Name, JobID: id}, nil
}

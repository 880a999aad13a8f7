package reports

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
)

// AuthorizationLookupTimeout bounds the live TXT lookup of the
// external-destination authorization record.
const AuthorizationLookupTimeout = 3 * time.Second

// Instructions say what a domain publishes to receive its reports here.
type Instructions struct {
	Domain string
	// Signed: the current key's addresses were signed (Sign).
	Signed bool
	// KeyID is the current MAILWATCH_SECRET_KEY's id.
	KeyID                       string
	DMARCAddress, TLSRPTAddress string
	// TLSRPTPath is the HTTPS ingress path of TLS reports.
	TLSRPTPath string
	// Addresses are every address still accepted (the minted ones).
	Addresses     []Address
	DMARC         Publishing
	TLSRPT        Publishing
	Authorization AuthorizationRecord
}

// Publishing is one record's instruction: the rua found by the latest DNS
// check and what to publish instead.
type Publishing struct {
	RecordName string
	// CurrentRUA are the destinations found (never nil).
	CurrentRUA []string
	// Value is the DMARC rua value (dnsfix.MergeRUA) or the whole TLS-RPT
	// record (dnscheck.ProposeTLSRPT).
	Value string
	// NamesAddress: a current destination already is one of ours.
	NamesAddress bool
}

// AuthorizationRecord is RFC 7489 section 7.1's external-destination
// record, with whether it is published now.
type AuthorizationRecord struct {
	Name, Type, Value string
	// Published is nil when it was not looked up or the lookup failed.
	Published *bool
	// LookupErr is the failed lookup's error.
	LookupErr error
}

// Instructions builds the publishing instructions of domain d whose minted
// addresses are minted (Shown or Sign), from its latest DNS check results
// and a live lookup of the authorization record (none without a Resolver).
func (s *Service) Instructions(ctx context.Context, d dbsqlc.Domain, minted []Address) *Instructions {
	dmarcLP := s.Signer.Current(KindDMARC, d.AccountID, d.Name)
	tlsLP := s.Signer.Current(KindTLSRPT, d.AccountID, d.Name)
	out := &Instructions{
		Domain: d.Name, KeyID: s.Signer.Keyring.PrimaryKeyID(),
		DMARCAddress: s.Signer.Address(dmarcLP), TLSRPTAddress: s.Signer.Address(tlsLP),
		TLSRPTPath: "/api/webhooks/tlsrpt/" + Token(tlsLP),
		Addresses:  minted,
	}
	if out.Addresses == nil {
		out.Addresses = []Address{}
	}
	ours := map[string]bool{strings.ToLower(out.DMARCAddress): true, strings.ToLower(out.TLSRPTAddress): true}
	for _, a := range minted {
		ours[strings.ToLower(a.Address)] = true
		if a.Current && a.Signed {
			out.Signed = true
		}
	}
	isOurs := func(addr string) bool { return ours[addr] }

	var results dnscheck.Results
	if len(d.Results) > 0 {
		_ = json.Unmarshal(d.Results, &results)
	}
	out.DMARC = Publishing{RecordName: "_dmarc." + d.Name, CurrentRUA: []string{}}
	rua := ""
	if results.DMARC != nil && results.DMARC.Parsed != nil {
		for _, u := range results.DMARC.Parsed.AggregateURIs {
			out.DMARC.CurrentRUA = append(out.DMARC.CurrentRUA, u.Raw)
		}
		rua = strings.Join(out.DMARC.CurrentRUA, ",")
		if len(results.DMARC.Records) == 1 {
			// The destinations as written, size limits included.
			rua, _ = dnsfix.TagValue(results.DMARC.Records[0], "rua")
		}
	}
	out.DMARC.Value, out.DMARC.NamesAddress = dnsfix.MergeRUA(rua, out.DMARCAddress, isOurs)

	out.TLSRPT = Publishing{RecordName: "_smtp._tls." + d.Name, CurrentRUA: []string{}}
	if results.TLSRPT != nil {
		out.TLSRPT.CurrentRUA = append(out.TLSRPT.CurrentRUA, results.TLSRPT.RUA...)
	}
	out.TLSRPT.Value, out.TLSRPT.NamesAddress = dnscheck.ProposeTLSRPT(d.Name, out.TLSRPT.CurrentRUA, out.TLSRPTAddress, isOurs)

	out.Authorization = s.authorization(ctx, d.Name)
	return out
}

// authorization is the external-destination record of domain and whether
// it is published (a live lookup bounded by AuthorizationLookupTimeout).
func (s *Service) authorization(ctx context.Context, domain string) AuthorizationRecord {
	a := AuthorizationRecord{Name: domain + "._report._dmarc." + s.Signer.Domain, Type: "TXT", Value: "v=DMARC1"}
	if s.Resolver == nil {
		return a
	}
	lctx, cancel := context.WithTimeout(ctx, AuthorizationLookupTimeout)
	defer cancel()
	txts, err := s.Resolver.LookupTXT(lctx, a.Name)
	published := false
	switch {
	case err == nil:
		for _, t := range txts {
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(t)), "v=dmarc1") {
				published = true
			}
		}
		a.Published = &published
	case dnscheck.IsNotFound(err):
		a.Published = &published
	default:
		a.LookupErr = fmt.Errorf("looking up %s: %w", a.Name, err)
	}
	return a
}

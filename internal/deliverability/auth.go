package deliverability

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"net/netip"
	"strconv"
	"strings"

	"github.com/mjl-/mox/dkim"

	"github.com/mailwatch/mailwatch/internal/dmarc"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/spf"
)

// authenticate runs the authentication section: SPF for MAIL FROM (scored)
// and HELO, DKIM per signature, DMARC, reverse DNS, ARC and TLS.
func authenticate(ctx context.Context, r *budgetResolver, raw []byte, msg *message, s Session, lim Limits) (Authentication, []Finding) {
	var a Authentication
	var fs []Finding
	client := spf.Client{IP: s.ClientIP, Helo: strings.TrimSuffix(s.Helo, "."), Sender: s.MailFrom}

	a.SPF = spf.CheckMailFrom(ctx, r, client)
	fs = append(fs, spfFindings(a.SPF)...)
	a.HeloSPF = heloSPF(ctx, r, client)
	if a.HeloSPF.Status != spf.Pass {
		fs = append(fs, newFinding("helo_spf", fmt.Sprintf("SPF for the HELO name %q is %s (not scored; the MAIL FROM result is)", client.Helo, a.HeloSPF.Status)))
	}

	a.DKIM = verifyDKIM(ctx, r, raw, msg, lim)
	fs = append(fs, dkimFindings(a.DKIM, msg)...)

	a.DMARC = checkDMARC(ctx, r, msg, a)
	fs = append(fs, dmarcFindings(a.DMARC)...)

	a.ReverseDNS = reverseDNS(ctx, r, s.ClientIP, lim)
	switch a.ReverseDNS.Result {
	case ResultFail:
		fs = append(fs, newFinding("fcrdns_fail", fcrdnsMessage(s.ClientIP, a.ReverseDNS)))
	case ResultTemperror:
		fs = append(fs, newFinding("fcrdns_temperror", "the reverse DNS of "+s.ClientIP.String()+" could not be looked up"))
	}

	a.ARC = arcChain(msg)
	if a.ARC.Present {
		fs = append(fs, newFinding("arc_unverified", fmt.Sprintf("an ARC chain of %d set(s) is present, unverified", a.ARC.Sets)))
	}
	fs = append(fs, tlsFindings(s)...)
	return a, fs
}

// heloSPF checks the HELO identity, unless the HELO is an address literal
// (RFC 7208 section 2.3 checks only names).
func heloSPF(ctx context.Context, r *budgetResolver, c spf.Client) spf.Result {
	if c.Helo == "" || strings.HasPrefix(c.Helo, "[") {
		return spf.Result{Identity: spf.IdentityHelo, Domain: c.Helo, Status: spf.None, Reason: "the HELO is not a domain name"}
	}
	return spf.CheckHelo(ctx, r, c)
}

// spfFindings turns the MAIL FROM result into findings.
func spfFindings(res spf.Result) []Finding {
	id := map[spf.Status]string{
		spf.Fail: "spf_fail", spf.Softfail: "spf_softfail", spf.Neutral: "spf_neutral",
		spf.None: "spf_none", spf.Permerror: "spf_permerror", spf.Temperror: "spf_temperror",
	}[res.Status]
	if id == "" {
		return nil
	}
	msg := fmt.Sprintf("SPF for the MAIL FROM domain %s is %s", res.Domain, res.Status)
	if res.Mechanism != "" {
		msg += " (matched " + res.Mechanism + ")"
	}
	if res.Reason != "" {
		msg += ": " + res.Reason
	}
	return []Finding{newFinding(id, msg)}
}

// verifyDKIM verifies each DKIM-Signature header with mox's verifier, at
// most MaxDKIMSignatures of them.
func verifyDKIM(ctx context.Context, r *budgetResolver, raw []byte, msg *message, lim Limits) (sigs []Signature) {
	present := len(msg.values("DKIM-Signature"))
	if present == 0 {
		return []Signature{}
	}
	if msg.tooLarge {
		return []Signature{{Result: ResultNeutral, Error: "not verified: the message is over the size limit"}}
	}
	defer func() {
		if p := recover(); p != nil {
			sigs = []Signature{{Result: ResultPermerror, Error: fmt.Sprintf("DKIM verifier failed: %v", p)}}
		}
	}()
	n := 0
	policy := func(*dkim.Sig) error {
		n++
		if n > lim.MaxDKIMSignatures {
			return fmt.Errorf("more than %d signatures; not verified", lim.MaxDKIMSignatures)
		}
		return nil
	}
	// ignoreTestMode: a receiver's own verdict, so a key in testing mode
	// (t=y) fails like any other.
	results, err := dkim.Verify(ctx, quiet, moxResolver{r}, true, policy, bytes.NewReader(crlf(raw)), true)
	if err != nil {
		return []Signature{{Result: ResultPermerror, Error: err.Error()}}
	}
	sigs = make([]Signature, 0, len(results))
	for _, res := range results {
		sigs = append(sigs, signature(res))
	}
	return sigs
}

// crlf returns raw with CRLF line endings when it has only bare LFs: SMTP
// carries CRLF and signatures are computed over it (RFC 6376 section 3.4),
// but a message saved to a file or posted to the ingress webhook often lost
// its CRs. A message with any CRLF is left as it is.
func crlf(raw []byte) []byte {
	if bytes.Contains(raw, []byte("\r\n")) || !bytes.Contains(raw, []byte("\n")) {
		return raw
	}
	return bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n"))
}

// signature describes one verifier result.
func signature(res dkim.Result) Signature {
	s := Signature{Result: string(res.Status)}
	if res.Err != nil {
		s.Error = res.Err.Error()
	}
	if sig := res.Sig; sig != nil {
		s.Domain = sig.Domain.ASCII
		s.Selector = sig.Selector.ASCII
		s.Algorithm = strings.ToLower(sig.Algorithm())
		for _, h := range sig.SignedHeaders {
			s.SignedHeaders = append(s.SignedHeaders, strings.ToLower(h))
		}
	}
	if res.Record != nil {
		switch k := res.Record.PublicKey.(type) {
		case *rsa.PublicKey:
			s.KeyBits = k.N.BitLen()
		case ed25519.PublicKey:
			s.KeyBits = 256
		}
	}
	switch {
	case res.Status == dkim.StatusPass:
		s.BodyHash = ResultPass
	case errors.Is(res.Err, dkim.ErrBodyhashMismatch):
		s.BodyHash = ResultFail
	}
	return s
}

// dkimFindings turns the signature results into findings.
func dkimFindings(sigs []Signature, msg *message) []Finding {
	if len(sigs) == 0 {
		return []Finding{newFinding("dkim_none", "the message has no DKIM signature")}
	}
	var fs []Finding
	passed := false
	for _, s := range sigs {
		name := s.Domain
		if s.Selector != "" {
			name = s.Selector + "._domainkey." + s.Domain
		}
		if s.Result == ResultPass {
			passed = true
		} else {
			why := s.Error
			if s.BodyHash == ResultFail {
				why = "the body hash does not match: the body was changed after signing"
			}
			fs = append(fs, newFinding("dkim_signature_failed", fmt.Sprintf("DKIM signature %s: %s: %s", name, s.Result, why)))
		}
		if s.KeyBits > 0 && s.KeyBits < 2048 && strings.HasPrefix(s.Algorithm, "rsa") {
			fs = append(fs, newFinding("dkim_weak_key", fmt.Sprintf("DKIM key %s is %d bits", name, s.KeyBits)))
		}
		if strings.HasSuffix(s.Algorithm, "sha1") {
			fs = append(fs, newFinding("dkim_sha1", "DKIM signature "+name+" uses "+s.Algorithm))
		}
	}
	for _, v := range msg.values("DKIM-Signature") {
		if hasTag(v, "l") {
			fs = append(fs, newFinding("dkim_length_tag", "a DKIM signature signs only part of the body (l= tag)"))
			break
		}
	}
	if !passed {
		fs = append(fs, newFinding("dkim_fail", fmt.Sprintf("none of the %d DKIM signature(s) verifies", len(sigs))))
	}
	return fs
}

// hasTag reports whether a tag=value list (RFC 6376 section 3.2) has tag.
func hasTag(list, tag string) bool {
	for _, t := range strings.Split(list, ";") {
		name, _, ok := strings.Cut(t, "=")
		if ok && strings.TrimSpace(name) == tag {
			return true
		}
	}
	return false
}

// fromDomain returns the domain of the single From address, or "".
func fromDomain(msg *message) string {
	froms := msg.values("From")
	if len(froms) != 1 {
		return ""
	}
	list, err := mail.ParseAddressList(froms[0])
	if err != nil || len(list) != 1 {
		return ""
	}
	at := strings.LastIndexByte(list[0].Address, '@')
	if at < 0 {
		return ""
	}
	return strings.ToLower(list[0].Address[at+1:])
}

// checkDMARC evaluates DMARC for the From domain with the SPF and DKIM
// results.
func checkDMARC(ctx context.Context, r *budgetResolver, msg *message, a Authentication) dmarc.Verdict {
	from := fromDomain(msg)
	if from == "" {
		return dmarc.Verdict{Result: dmarc.ResultNone, Disposition: dmarc.PolicyNone, Reason: "the message has no single valid From address, so no DMARC policy can be found"}
	}
	auth := dmarc.Authentication{SPFPass: a.SPF.Status == spf.Pass, SPFDomain: a.SPF.Domain}
	for _, s := range a.DKIM {
		if s.Result == ResultPass {
			auth.DKIMPassDomains = append(auth.DKIMPassDomains, s.Domain)
		}
	}
	return dmarc.Check(ctx, r, from, auth)
}

// dmarcFindings turns the DMARC verdict into findings.
func dmarcFindings(v dmarc.Verdict) []Finding {
	switch v.Result {
	case dmarc.ResultFail:
		return []Finding{newFinding("dmarc_fail", fmt.Sprintf("DMARC fails for %s: neither SPF nor DKIM passed with a domain aligned to it; its policy would apply %s", v.FromDomain, v.Disposition))}
	case dmarc.ResultNone:
		return []Finding{newFinding("dmarc_none", "no DMARC policy: "+v.Reason)}
	case dmarc.ResultPermerror:
		return []Finding{newFinding("dmarc_permerror", "the DMARC record is unusable: "+v.Reason)}
	case dmarc.ResultTemperror:
		return []Finding{newFinding("dmarc_temperror", "the DMARC record could not be looked up: "+v.Reason)}
	}
	if v.Policy == dmarc.PolicyNone {
		return []Finding{newFinding("dmarc_policy_none", "DMARC passes, but "+v.RecordDomain+" publishes p=none, so spoofed mail is delivered too")}
	}
	return nil
}

// reverseDNS checks that a PTR name of ip resolves back to ip.
func reverseDNS(ctx context.Context, r *budgetResolver, ip netip.Addr, lim Limits) ReverseDNS {
	if !ip.IsValid() {
		return ReverseDNS{Result: ResultFail}
	}
	names, err := r.LookupAddr(ctx, ip)
	switch {
	case err != nil && !dnscheck.IsNotFound(err):
		return ReverseDNS{Result: ResultTemperror}
	case len(names) == 0:
		return ReverseDNS{Result: ResultFail}
	}
	rd := ReverseDNS{Result: ResultFail, Names: names}
	network := "ip6"
	if ip.Is4() {
		network = "ip4"
	}
	temp := false
	for i, name := range names {
		if i == lim.MaxPTRNames {
			break
		}
		addrs, err := r.LookupNetIP(ctx, network, name)
		if err != nil {
			temp = temp || !dnscheck.IsNotFound(err)
			continue
		}
		for _, a := range addrs {
			if a.Unmap() == ip {
				rd.Result, rd.Confirmed = ResultPass, name
				return rd
			}
		}
	}
	if temp {
		rd.Result = ResultTemperror
	}
	return rd
}

func fcrdnsMessage(ip netip.Addr, rd ReverseDNS) string {
	if !ip.IsValid() {
		return "the session has no client IP address"
	}
	if len(rd.Names) == 0 {
		return ip.String() + " has no PTR record"
	}
	return fmt.Sprintf("no PTR name of %s (%s) resolves back to it", ip, strings.Join(rd.Names, ", "))
}

// arcChain reports the ARC header fields (RFC 8617) without verifying them.
func arcChain(msg *message) ARC {
	a := ARC{Result: ResultNone}
	for _, name := range []string{"ARC-Seal", "ARC-Message-Signature", "ARC-Authentication-Results"} {
		for _, v := range msg.values(name) {
			a.Present = true
			for _, t := range strings.Split(v, ";") {
				k, val, ok := strings.Cut(t, "=")
				if ok && strings.TrimSpace(k) == "i" {
					if i, err := strconv.Atoi(strings.TrimSpace(val)); err == nil && i > a.Sets && i <= 50 {
						a.Sets = i
					}
				}
			}
		}
	}
	if a.Present {
		a.Result = "present, unverified"
	}
	return a
}

// tlsFindings judges the session's encryption.
func tlsFindings(s Session) []Finding {
	switch v := strings.ToUpper(strings.TrimSpace(s.TLSVersion)); v {
	case "":
		return []Finding{newFinding("tls_none", "the message was received without TLS")}
	case "TLS 1.0", "TLS 1.1", "SSL 3.0", "TLS1.0", "TLS1.1":
		return []Finding{newFinding("tls_outdated", "the message was received over "+s.TLSVersion)}
	}
	return nil
}

// quiet discards the DKIM verifier's own debug logging.
var quiet = slog.New(slog.DiscardHandler)

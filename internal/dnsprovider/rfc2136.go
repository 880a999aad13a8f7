package dnsprovider

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// RFC2136Config is an rfc2136 connection's configuration.
type RFC2136Config struct {
	// Server is the primary's host:port (port 53 when omitted).
	Server string `json:"server"`
	// TSIGKeyName is the key's name as the server knows it.
	TSIGKeyName string `json:"tsig_key_name"`
	// TSIGAlgorithm is hmac-sha256 (default), hmac-sha384, hmac-sha512,
	// hmac-sha224 or hmac-sha1.
	TSIGAlgorithm string `json:"tsig_algorithm"`
	// TSIGSecret is the key's secret, base64.
	TSIGSecret string `json:"tsig_secret"`
}

var tsigAlgorithms = map[string]string{
	"hmac-sha1":   dns.HmacSHA1,
	"hmac-sha224": dns.HmacSHA224,
	"hmac-sha256": dns.HmacSHA256,
	"hmac-sha384": dns.HmacSHA384,
	"hmac-sha512": dns.HmacSHA512,
}

// TSIGAlgorithms returns the accepted tsig_algorithm words.
func TSIGAlgorithms() []string {
	return []string{"hmac-sha256", "hmac-sha384", "hmac-sha512", "hmac-sha224", "hmac-sha1"}
}

// RFC2136 is an RFC 2136 connection.
type RFC2136 struct {
	server  string
	keyName string
	alg     string
	secret  string
	// Dialer dials the server; its Control may refuse addresses.
	dialer *net.Dialer
	// Timeout bounds one exchange.
	timeout time.Duration
}

// NewRFC2136 checks cfg and returns the connection. dialer may be nil.
func NewRFC2136(cfg RFC2136Config, dialer *net.Dialer) (*RFC2136, error) {
	server := strings.TrimSpace(cfg.Server)
	if server == "" {
		return nil, &FieldError{Field: "server", Message: "is required"}
	}
	if _, _, err := net.SplitHostPort(server); err != nil {
		server = net.JoinHostPort(strings.Trim(server, "[]"), "53")
	}
	host, port, err := net.SplitHostPort(server)
	if err != nil || host == "" || port == "" {
		return nil, &FieldError{Field: "server", Message: "must be a host or host:port"}
	}
	if strings.TrimSpace(cfg.TSIGKeyName) == "" {
		return nil, &FieldError{Field: "tsig_key_name", Message: "is required"}
	}
	if _, ok := dns.IsDomainName(cfg.TSIGKeyName); !ok {
		return nil, &FieldError{Field: "tsig_key_name", Message: "must be a domain name"}
	}
	algName := strings.TrimSuffix(strings.ToLower(cfg.TSIGAlgorithm), ".")
	if algName == "" {
		algName = "hmac-sha256"
	}
	alg, ok := tsigAlgorithms[algName]
	if !ok {
		return nil, &FieldError{Field: "tsig_algorithm", Message: "must be one of " + strings.Join(TSIGAlgorithms(), ", ")}
	}
	if _, err := base64.StdEncoding.DecodeString(cfg.TSIGSecret); err != nil || cfg.TSIGSecret == "" {
		return nil, &FieldError{Field: "tsig_secret", Message: "must be the key's secret in base64"}
	}
	if dialer == nil {
		dialer = &net.Dialer{}
	}
	return &RFC2136{server: server, keyName: dns.CanonicalName(cfg.TSIGKeyName), alg: alg, secret: cfg.TSIGSecret, dialer: dialer, timeout: 10 * time.Second}, nil
}

// FieldError is a configuration field that is missing or malformed.
type FieldError struct {
	Field   string
	Message string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + " " + e.Message }

// Kind implements Provider.
func (p *RFC2136) Kind() string { return KindRFC2136 }

func (p *RFC2136) exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	m.SetTsig(p.keyName, p.alg, 300, time.Now().Unix())
	c := &dns.Client{Net: "tcp", Dialer: p.dialer, Timeout: p.timeout, TsigSecret: map[string]string{p.keyName: p.secret}}
	r, _, err := c.ExchangeContext(ctx, m, p.server)
	if err != nil {
		if r != nil && r.IsTsig() != nil && r.IsTsig().Error != dns.RcodeSuccess {
			return nil, p.tsigError(r.IsTsig().Error)
		}
		if errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrSecret) || errors.Is(err, dns.ErrAuth) {
			return nil, &ProviderError{What: "TSIG key", Message: "the server's answer did not verify with the key " + p.keyName + " (wrong secret or algorithm?)"}
		}
		return nil, fmt.Errorf("error talking to %s: %w", p.server, err)
	}
	if t := r.IsTsig(); t != nil && t.Error != dns.RcodeSuccess {
		return nil, p.tsigError(t.Error)
	}
	if r.Rcode == dns.RcodeNotAuth {
		return nil, &ProviderError{What: "TSIG key", Message: fmt.Sprintf("the server refused the key %s (NOTAUTH)", p.keyName)}
	}
	return r, nil
}

func (p *RFC2136) tsigError(code uint16) error {
	word := dns.RcodeToString[int(code)]
	if word == "" {
		word = fmt.Sprint(code)
	}
	return &ProviderError{What: "TSIG key", Message: fmt.Sprintf("the server refused the key %s (%s): check its name, algorithm and secret", p.keyName, word)}
}

// Verify implements Provider: a TSIG-signed query the server must verify.
// A server that does not know the key, or holds another secret, answers
// with a TSIG error (BADKEY, BADSIG).
func (p *RFC2136) Verify(ctx context.Context) error {
	m := new(dns.Msg)
	m.SetQuestion(".", dns.TypeSOA)
	_, err := p.exchange(ctx, m)
	return err
}

// FindZone implements Provider: the nearest enclosing name the server is
// authoritative for (an SOA in the answer with the AA bit), then an
// update with only a prerequisite (the apex exists), which changes
// nothing but tells whether the key may update the zone.
func (p *RFC2136) FindZone(ctx context.Context, name string) (Zone, error) {
	for _, cand := range parents(name) {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(cand), dns.TypeSOA)
		r, err := p.exchange(ctx, m)
		if err != nil {
			return Zone{}, err
		}
		if r.Rcode != dns.RcodeSuccess || !r.Authoritative {
			continue
		}
		found := false
		for _, rr := range r.Answer {
			if soa, ok := rr.(*dns.SOA); ok && normName(soa.Hdr.Name) == cand {
				found = true
			}
		}
		if !found {
			continue
		}
		u := new(dns.Msg)
		u.SetUpdate(dns.Fqdn(cand))
		u.NameUsed([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: dns.Fqdn(cand), Rrtype: dns.TypeANY, Class: dns.ClassANY}}})
		r, err = p.exchange(ctx, u)
		if err != nil {
			return Zone{}, err
		}
		if r.Rcode != dns.RcodeSuccess {
			return Zone{}, &ProviderError{What: "dynamic update", Message: fmt.Sprintf("the server does not let the key %s update %s (%s)", p.keyName, cand, dns.RcodeToString[r.Rcode])}
		}
		return Zone{Name: cand, ID: cand}, nil
	}
	return Zone{}, ErrZoneNotFound
}

// Read implements Provider, with a signed query to the primary (so the
// answer is the primary's, not a cache's).
func (p *RFC2136) Read(ctx context.Context, zone Zone, name, typ string) (RRset, error) {
	t, ok := dns.StringToType[strings.ToUpper(typ)]
	if !ok {
		return RRset{}, fmt.Errorf("unknown record type %q", typ)
	}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), t)
	r, err := p.exchange(ctx, m)
	if err != nil {
		return RRset{}, err
	}
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return RRset{}, fmt.Errorf("reading %s %s: the server answered %s", name, typ, dns.RcodeToString[r.Rcode])
	}
	out := RRset{Values: []string{}}
	for _, rr := range r.Answer {
		if rr.Header().Rrtype != t || normName(rr.Header().Name) != normName(name) {
			continue
		}
		out.TTL = rr.Header().Ttl
		out.Values = append(out.Values, rdata(rr))
	}
	return out, nil
}

// rdata returns an RR's value as Change uses it.
func rdata(rr dns.RR) string {
	if t, ok := rr.(*dns.TXT); ok {
		return strings.Join(t.Txt, "")
	}
	return strings.TrimPrefix(rr.String(), rr.Header().String())
}

// toRR builds the record of value v.
func toRR(name, typ string, ttl uint32, v string) (dns.RR, error) {
	hdr := dns.RR_Header{Name: dns.Fqdn(name), Class: dns.ClassINET, Ttl: ttl}
	if strings.EqualFold(typ, "TXT") {
		hdr.Rrtype = dns.TypeTXT
		return &dns.TXT{Hdr: hdr, Txt: splitTXT(v)}, nil
	}
	rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", dns.Fqdn(name), ttl, strings.ToUpper(typ), v))
	if err != nil {
		return nil, fmt.Errorf("the value %q is not a valid %s record: %w", v, typ, err)
	}
	if rr == nil {
		return nil, fmt.Errorf("the value %q is empty", v)
	}
	return rr, nil
}

// message builds the update: the compare-and-swap prerequisites, then the
// removals and additions.
func (p *RFC2136) message(zone Zone, c Change) (*dns.Msg, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	t, ok := dns.StringToType[strings.ToUpper(c.Type)]
	if !ok {
		return nil, fmt.Errorf("unknown record type %q", c.Type)
	}
	m := new(dns.Msg)
	m.SetUpdate(dns.Fqdn(zone.Name))
	if len(c.Current) == 0 {
		m.RRsetNotUsed([]dns.RR{&dns.ANY{Hdr: dns.RR_Header{Name: dns.Fqdn(c.Name), Rrtype: t, Class: dns.ClassANY}}})
	} else {
		cur := make([]dns.RR, 0, len(c.Current))
		for _, v := range c.Current {
			// TTL is ignored in value-dependent prerequisites (RFC 2136
			// section 2.4.2 asks for 0).
			rr, err := toRR(c.Name, c.Type, 0, v)
			if err != nil {
				return nil, err
			}
			cur = append(cur, rr)
		}
		m.Used(cur)
	}
	var rm, add []dns.RR
	for _, v := range c.Remove {
		rr, err := toRR(c.Name, c.Type, 0, v)
		if err != nil {
			return nil, err
		}
		rm = append(rm, rr)
	}
	for _, v := range c.Add {
		rr, err := toRR(c.Name, c.Type, c.ttl(), v)
		if err != nil {
			return nil, err
		}
		add = append(add, rr)
	}
	if len(rm) > 0 {
		m.Remove(rm)
	}
	if len(add) > 0 {
		m.Insert(add)
	}
	return m, nil
}

// Plan implements Provider: the update message in dig's text form.
func (p *RFC2136) Plan(zone Zone, c Change) (any, error) {
	m, err := p.message(zone, c)
	if err != nil {
		return nil, err
	}
	return map[string]any{"server": p.server, "tsig_key_name": p.keyName, "message": m.String()}, nil
}

// Apply implements Provider. The server checks the prerequisites and
// answers NXRRSET or YXRRSET when the RRset is no longer the observed one.
func (p *RFC2136) Apply(ctx context.Context, zone Zone, c Change) error {
	m, err := p.message(zone, c)
	if err != nil {
		return err
	}
	r, err := p.exchange(ctx, m)
	if err != nil {
		return err
	}
	switch r.Rcode {
	case dns.RcodeSuccess:
		return nil
	case dns.RcodeNXRrset, dns.RcodeYXRrset, dns.RcodeYXDomain, dns.RcodeNameError:
		cur, err := p.Read(ctx, zone, c.Name, c.Type)
		if err != nil {
			return &ConflictError{}
		}
		return &ConflictError{Current: cur.Values}
	case dns.RcodeRefused:
		return &ProviderError{What: "dynamic update", Message: fmt.Sprintf("the server refused the update of %s with the key %s (REFUSED)", c.Name, p.keyName)}
	case dns.RcodeNotZone:
		return &ProviderError{What: "dynamic update", Message: fmt.Sprintf("%s is not in the zone %s (NOTZONE)", c.Name, zone.Name)}
	default:
		return &ProviderError{What: "dynamic update", Message: fmt.Sprintf("the server answered %s", dns.RcodeToString[r.Rcode])}
	}
}

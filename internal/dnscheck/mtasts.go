package dnscheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/netguard"
)

// Limits for MTA-STS (RFC 8461).
const (
	// maxSTSPolicySize caps the policy body read; RFC 8461 section 3.3 lets
	// senders limit it to 64 KiB.
	maxSTSPolicySize = 64 << 10
	// maxSTSRecordLength caps ParseSTSRecord's input.
	maxSTSRecordLength = 1024
	// maxSTSMaxAge is the largest max_age (RFC 8461 section 3.2: 31557600).
	maxSTSMaxAge = 31557600
	// recommendedSTSMaxAge is one week: section 3.2 recommends weeks.
	recommendedSTSMaxAge = 7 * 24 * 3600
)

// STSRecord is a parsed _mta-sts TXT record (RFC 8461 section 3.1).
type STSRecord struct {
	ID         string   `json:"id"`
	Extensions []string `json:"extensions,omitempty"`
}

// IsSTSRecord reports whether a TXT record is an MTA-STS record: it starts
// with "v=STSv1;" (RFC 8461 section 3.1; others are discarded).
func IsSTSRecord(txt string) bool {
	return strings.HasPrefix(txt, "v=STSv1;") || txt == "v=STSv1"
}

// ParseSTSRecord parses an _mta-sts TXT record.
func ParseSTSRecord(s string) (*STSRecord, error) {
	if len(s) > maxSTSRecordLength {
		return nil, fmt.Errorf("record is longer than %d characters", maxSTSRecordLength)
	}
	fields, err := splitFields(s, "v", "STSv1")
	if err != nil {
		return nil, err
	}
	rec := &STSRecord{}
	for _, f := range fields {
		switch f.name {
		case "id":
			// sts-id = 1*32( ALPHA / DIGIT )
			if f.value == "" || len(f.value) > 32 || strings.TrimFunc(f.value, isAlnum) != "" {
				return nil, fmt.Errorf("id must be 1 to 32 letters and digits, not %q", f.value)
			}
			rec.ID = f.value
		default:
			rec.Extensions = append(rec.Extensions, f.name+"="+f.value)
		}
	}
	if rec.ID == "" {
		return nil, errors.New("the id field is missing")
	}
	return rec, nil
}

// STSPolicy is a parsed MTA-STS policy (RFC 8461 section 3.2).
type STSPolicy struct {
	Mode   string   `json:"mode"`
	MaxAge int      `json:"max_age"`
	MX     []string `json:"mx"`
}

// ParseSTSPolicy parses a policy file: "key: value" lines separated by CRLF
// or LF. Unknown keys are ignored.
func ParseSTSPolicy(body string) (*STSPolicy, error) {
	if len(body) > maxSTSPolicySize {
		return nil, fmt.Errorf("policy is larger than %d bytes", maxSTSPolicySize)
	}
	p := &STSPolicy{MaxAge: -1}
	version := ""
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %q is not \"key: value\"", line)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "version":
			version = v
		case "mode":
			if v != "enforce" && v != "testing" && v != "none" {
				return nil, fmt.Errorf("mode must be enforce, testing or none, not %q", v)
			}
			p.Mode = v
		case "max_age":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > maxSTSMaxAge || len(v) > 10 {
				return nil, fmt.Errorf("max_age must be a number of seconds up to %d, not %q", maxSTSMaxAge, v)
			}
			p.MaxAge = n
		case "mx":
			if v == "" || strings.ContainsAny(v, " \t") {
				return nil, fmt.Errorf("invalid mx pattern %q", v)
			}
			p.MX = append(p.MX, strings.ToLower(strings.TrimSuffix(v, ".")))
		}
	}
	switch {
	case version != "STSv1":
		return nil, errors.New("the policy must have \"version: STSv1\"")
	case p.Mode == "":
		return nil, errors.New("the policy has no mode")
	case p.MaxAge < 0:
		return nil, errors.New("the policy has no max_age")
	case p.Mode != "none" && len(p.MX) == 0:
		return nil, errors.New("the policy has no mx lines")
	}
	return p, nil
}

// Matches reports whether an MX host matches one of the policy's mx
// patterns. A pattern "*.example.com" matches exactly one leftmost label
// (RFC 8461 section 4.1).
func (p *STSPolicy) Matches(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, pat := range p.MX {
		if rest, ok := strings.CutPrefix(pat, "*."); ok {
			if i := strings.IndexByte(host, '.'); i > 0 && host[i+1:] == rest {
				return true
			}
		} else if pat == host {
			return true
		}
	}
	return false
}

// MTASTSResult is the MTA-STS check's result.
type MTASTSResult struct {
	Result
	ID        string     `json:"id,omitempty"`
	PolicyURL string     `json:"policy_url,omitempty"`
	Policy    *STSPolicy `json:"policy,omitempty"`
	// Uncovered are MX hosts the policy's mx patterns do not match.
	Uncovered []string `json:"uncovered,omitempty"`
}

// CheckMTASTS checks the domain's MTA-STS record and policy (RFC 8461): the
// _mta-sts TXT record, the policy fetched over HTTPS from mta-sts.<domain>
// (no redirects, a valid certificate), its mode and max_age, and that its mx
// patterns cover the domain's MX hosts. Status: pass, warn (testing mode, short max_age),
// fail (policy unavailable or invalid, MX not covered in enforce mode), none,
// permerror (bad TXT record), temperror. client fetches the policy; see
// NewHTTPClient.
func CheckMTASTS(ctx context.Context, r Resolver, client *http.Client, domain string) *MTASTSResult {
	res := &MTASTSResult{}
	defer res.finish()
	name := "_mta-sts." + domain
	txts, err := r.LookupTXT(ctx, name)
	if IsTemporary(err) {
		res.Status = StatusTemperror
		res.errorf("looking up %s failed: %v", name, err)
		return res
	}
	for _, t := range txts {
		if IsSTSRecord(t) {
			res.Records = append(res.Records, t)
		}
	}
	switch len(res.Records) {
	case 0:
		res.Status = StatusNone
		res.errorf("no MTA-STS record at %s", name)
		res.instructf("To require TLS for mail to %s, serve a policy at https://mta-sts.%s/.well-known/mta-sts.txt and publish a TXT record at %s: \"v=STSv1; id=<policy version>\".", domain, domain, name)
		return res
	case 1:
	default:
		res.Status = StatusPermerror
		res.errorf("%s has %d MTA-STS records; senders ignore them all (RFC 8461 section 3.1)", name, len(res.Records))
		return res
	}
	rec, err := ParseSTSRecord(res.Records[0])
	if err != nil {
		res.Status = StatusPermerror
		res.errorf("invalid MTA-STS record: %v", err)
		return res
	}
	res.ID = rec.ID

	res.PolicyURL = "https://mta-sts." + domain + "/.well-known/mta-sts.txt"
	body, err := fetchSTSPolicy(ctx, client, res.PolicyURL)
	if err != nil {
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			res.Status = StatusTemperror
		} else {
			res.Status = StatusFail
			res.instructf("Serve the policy over HTTPS with a valid certificate for mta-sts.%s, without redirects, as text/plain.", domain)
		}
		res.errorf("fetching the policy failed: %v", err)
		return res
	}
	policy, err := ParseSTSPolicy(body)
	if err != nil {
		res.Status = StatusFail
		res.errorf("invalid MTA-STS policy: %v", err)
		return res
	}
	res.Policy = policy
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		res.Records = append(res.Records, "policy: "+strings.TrimSpace(line))
	}
	res.Status = StatusPass
	switch policy.Mode {
	case "testing":
		res.warnf("mode is testing: senders report TLS failures but still deliver without TLS")
		res.instructf("Switch the policy to \"mode: enforce\" once TLS reports show no failures, and change the id in the TXT record.")
	case "none":
		res.warnf("mode is none: the policy is withdrawn and gives no protection")
	}
	if policy.MaxAge < recommendedSTSMaxAge && policy.Mode != "none" {
		res.warnf("max_age is %d seconds; RFC 8461 section 3.2 recommends weeks or more (e.g. 604800 or 1209600)", policy.MaxAge)
	}

	if policy.Mode == "none" {
		return res
	}
	mxs, err := r.LookupMX(ctx, domain)
	switch {
	case IsTemporary(err):
		res.warnf("could not look up MX records to check policy coverage: %v", err)
		return res
	case err != nil:
		res.warnf("the domain has no MX records for the policy to cover")
		return res
	}
	for _, mx := range mxs {
		if mx.Host != "." && !policy.Matches(mx.Host) {
			res.Uncovered = append(res.Uncovered, mx.Host)
		}
	}
	if len(res.Uncovered) > 0 {
		msg := fmt.Sprintf("the policy's mx lines do not cover MX host(s) %s", strings.Join(res.Uncovered, ", "))
		if policy.Mode == "enforce" {
			res.Status = StatusFail
			res.errorf("%s; senders enforcing the policy will not deliver to them", msg)
		} else {
			res.warnf("%s", msg)
		}
		res.instructf("Add \"mx: %s\" lines to the policy (wildcards like *.example.com match one label), then change the id in the TXT record.", strings.Join(res.Uncovered, "\", \"mx: "))
	}
	return res
}

func fetchSTSPolicy(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("error creating request: %w", err)
	}
	// RFC 8461 section 3.3: redirects must not be followed. Copy the client
	// so the caller's is not changed.
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s answered HTTP %d, not 200 (redirects are not followed)", url, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "text/plain") {
		return "", fmt.Errorf("the policy is served as %q; RFC 8461 section 3.2 requires text/plain", ct)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSTSPolicySize+1))
	if err != nil {
		return "", fmt.Errorf("error reading the policy: %w", err)
	}
	return string(b), nil
}

// NewHTTPClient returns the client used to fetch MTA-STS policies: host
// names are resolved with r (so the configured resolver is used), addresses
// that are not public (loopback, private, link-local...) are refused so a
// customer's DNS cannot point mailwatch at internal services, and every
// fetch is bounded by timeout.
func NewHTTPClient(r Resolver, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: timeout}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			ips, err := r.LookupNetIP(ctx, "ip", host)
			if err != nil {
				return nil, fmt.Errorf("resolving %s: %w", host, err)
			}
			var lastErr error
			for _, ip := range ips {
				// The same classification as webhook destinations (private,
				// CGNAT, metadata, NAT64/6to4-embedded, reserved...).
				if reason := netguard.Classify(ip.Unmap()); reason != "" {
					lastErr = fmt.Errorf("%s resolves to the non-public address %s (%s)", host, ip, reason)
					continue
				}
				conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
				if err == nil {
					return conn, nil
				}
				lastErr = err
			}
			return nil, lastErr
		},
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConnsPerHost:   1,
		DisableKeepAlives:     true,
	}
	return &http.Client{Transport: transport, Timeout: timeout}
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

type field struct{ name, value string }

// splitFields splits "v=X; a=b; c=d" records (MTA-STS, TLS-RPT and BIMI all
// use this shape), checks that the first field is version=want, and returns
// the other fields. Names are case-sensitive, as in RFC 8461 and RFC 8460.
func splitFields(s, version, want string) ([]field, error) {
	var fields []field
	seen := map[string]bool{}
	for i, part := range strings.Split(s, ";") {
		part = strings.Trim(part, " \t")
		k, v, ok := strings.Cut(part, "=")
		k, v = strings.Trim(k, " \t"), strings.Trim(v, " \t")
		if i == 0 {
			if !ok || k != version || v != want {
				return nil, fmt.Errorf("the record must start with %s=%s", version, want)
			}
			continue
		}
		if part == "" {
			continue
		}
		if !ok {
			return nil, fmt.Errorf("%q is not a name=value field", part)
		}
		if seen[k] {
			return nil, fmt.Errorf("field %q appears more than once", k)
		}
		seen[k] = true
		fields = append(fields, field{k, v})
	}
	return fields, nil
}

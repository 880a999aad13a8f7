// Package dmarcrpt parses DMARC aggregate feedback reports: the XML of
// RFC 7489 appendix C and of RFC 9990 (DMARCbis aggregate reporting, with or
// without its urn:ietf:params:xml:ns:dmarc-2.0 namespace), bare or wrapped in
// gzip, zip or an email (RFC 7489 section 7.2.1.1).
//
// Reporters deviate from the schema in the wild; Parse accepts the quirks
// seen in real reports: an empty org_name, text mixed into elements, the
// report wrapped in an unclosed outer element, invalid UTF-8, unescaped "<"
// in text, result words in upper case, no <version>, a gzip member followed
// by trailing bytes. Result words come out in lower case (the RFCs' words:
// pass, fail, none, softfail, neutral, temperror, permerror, policy) and
// RFC 9990's disposition "pass" is reported as "none" (the policy was not
// applied), the word RFC 7489 uses.
//
// Every entry point is bounded: at most MaxReportBytes of XML, after any
// decompression, and reportmail's bounds for an email.
package dmarcrpt

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
)

// MaxReportBytes is the largest report accepted, after decompression
// (as mox: 20 MB).
const MaxReportBytes = 20 << 20

// maxOuterDepth bounds the elements a report may be wrapped in before
// <feedback> starts.
const maxOuterDepth = 16

var (
	// ErrEmpty is returned for an input with no bytes (or only white space).
	ErrEmpty = errors.New("empty report")
	// ErrTooLarge is returned for a report over MaxReportBytes.
	ErrTooLarge = errors.New("report too large")
	// ErrNoFeedback is returned for XML without a <feedback> element.
	ErrNoFeedback = errors.New("no <feedback> element")
	// ErrInvalid is returned for a report that is XML but not a usable
	// aggregate report (missing domain, unreadable dates or counts).
	ErrInvalid = errors.New("invalid aggregate report")
	// ErrMalformed is returned for input that is not well-formed XML even
	// after the recoveries Parse attempts.
	ErrMalformed = errors.New("malformed XML")
)

// Feedback is one aggregate report.
type Feedback struct {
	// Version is <version> as sent ("1.0", "2.0"), empty when absent.
	Version         string          `json:"version,omitempty"`
	ReportMetadata  ReportMetadata  `json:"report_metadata"`
	PolicyPublished PolicyPublished `json:"policy_published"`
	Records         []Record        `json:"records"`
}

// ReportMetadata is <report_metadata>.
type ReportMetadata struct {
	OrgName          string    `json:"org_name"`
	Email            string    `json:"email,omitempty"`
	ExtraContactInfo string    `json:"extra_contact_info,omitempty"`
	ReportID         string    `json:"report_id"`
	Begin            time.Time `json:"begin"`
	End              time.Time `json:"end"`
	Errors           []string  `json:"errors,omitempty"`
	// Generator is RFC 9990's <generator>.
	Generator string `json:"generator,omitempty"`
}

// PolicyPublished is <policy_published>: the DMARC record the reporter
// found.
type PolicyPublished struct {
	Domain string `json:"domain"`
	ADKIM  string `json:"adkim,omitempty"`
	ASPF   string `json:"aspf,omitempty"`
	P      string `json:"p"`
	SP     string `json:"sp,omitempty"`
	// NP is RFC 9990's policy for non-existent subdomains.
	NP string `json:"np,omitempty"`
	// Pct is RFC 7489's pct; RFC 9990 drops it.
	Pct *int   `json:"pct,omitempty"`
	FO  string `json:"fo,omitempty"`
	// Testing ("y" or "n") and DiscoveryMethod ("psl" or "treewalk") are
	// RFC 9990's.
	Testing         string `json:"testing,omitempty"`
	DiscoveryMethod string `json:"discovery_method,omitempty"`
}

// Record is one <record>: a group of messages from one source with the same
// results.
type Record struct {
	SourceIP     string           `json:"source_ip"`
	Count        int64            `json:"count"`
	Disposition  string           `json:"disposition"`
	DKIM         string           `json:"dkim"`
	SPF          string           `json:"spf"`
	Reasons      []Reason         `json:"reasons,omitempty"`
	EnvelopeTo   string           `json:"envelope_to,omitempty"`
	EnvelopeFrom string           `json:"envelope_from,omitempty"`
	HeaderFrom   string           `json:"header_from"`
	DKIMResults  []DKIMAuthResult `json:"dkim_results,omitempty"`
	SPFResults   []SPFAuthResult  `json:"spf_results,omitempty"`
}

// Reason is a <reason> of policy_evaluated (local_policy, forwarded...).
type Reason struct {
	Type    string `json:"type"`
	Comment string `json:"comment,omitempty"`
}

// DKIMAuthResult is one <dkim> of auth_results.
type DKIMAuthResult struct {
	Domain      string `json:"domain"`
	Selector    string `json:"selector,omitempty"`
	Result      string `json:"result"`
	HumanResult string `json:"human_result,omitempty"`
}

// SPFAuthResult is one <spf> of auth_results.
type SPFAuthResult struct {
	Domain      string `json:"domain"`
	Scope       string `json:"scope,omitempty"`
	Result      string `json:"result"`
	HumanResult string `json:"human_result,omitempty"`
}

// MessageCount is the sum of the records' counts.
func (f *Feedback) MessageCount() int64 {
	var n int64
	for _, r := range f.Records {
		n += r.Count
	}
	return n
}

// The XML shapes, all strings: values are trimmed and checked after
// decoding, so white space and case never fail a report. Tags carry no
// namespace, so RFC 9990's namespaced elements match too.
type xmlFeedback struct {
	Version  string `xml:"version"`
	Metadata struct {
		OrgName          string   `xml:"org_name"`
		Email            string   `xml:"email"`
		ExtraContactInfo string   `xml:"extra_contact_info"`
		ReportID         string   `xml:"report_id"`
		Begin            string   `xml:"date_range>begin"`
		End              string   `xml:"date_range>end"`
		Errors           []string `xml:"error"`
		Generator        string   `xml:"generator"`
	} `xml:"report_metadata"`
	Policy struct {
		Domain          string `xml:"domain"`
		ADKIM           string `xml:"adkim"`
		ASPF            string `xml:"aspf"`
		P               string `xml:"p"`
		SP              string `xml:"sp"`
		NP              string `xml:"np"`
		Pct             string `xml:"pct"`
		FO              string `xml:"fo"`
		Testing         string `xml:"testing"`
		DiscoveryMethod string `xml:"discovery_method"`
	} `xml:"policy_published"`
	Records []struct {
		Row struct {
			SourceIP string `xml:"source_ip"`
			Count    string `xml:"count"`
			Policy   struct {
				Disposition string `xml:"disposition"`
				DKIM        string `xml:"dkim"`
				SPF         string `xml:"spf"`
				Reasons     []struct {
					Type    string `xml:"type"`
					Comment string `xml:"comment"`
				} `xml:"reason"`
			} `xml:"policy_evaluated"`
		} `xml:"row"`
		Identifiers struct {
			EnvelopeTo   string `xml:"envelope_to"`
			EnvelopeFrom string `xml:"envelope_from"`
			HeaderFrom   string `xml:"header_from"`
		} `xml:"identifiers"`
		Auth struct {
			DKIM []struct {
				Domain      string `xml:"domain"`
				Selector    string `xml:"selector"`
				Result      string `xml:"result"`
				HumanResult string `xml:"human_result"`
			} `xml:"dkim"`
			SPF []struct {
				Domain      string `xml:"domain"`
				Scope       string `xml:"scope"`
				Result      string `xml:"result"`
				HumanResult string `xml:"human_result"`
			} `xml:"spf"`
		} `xml:"auth_results"`
	} `xml:"record"`
}

// Parse parses the XML of one aggregate report.
func Parse(data []byte) (*Feedback, error) {
	if len(data) > MaxReportBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), MaxReportBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, ErrEmpty
	}
	raw, err := decode(data)
	if err != nil && !errors.Is(err, ErrNoFeedback) {
		// Recover what lenient parsers recover, then try once more; the
		// first error is the one worth reporting.
		if again, err2 := decode(repair(data)); err2 == nil {
			raw, err = again, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return normalise(raw)
}

// decode finds the first <feedback> element, at most maxOuterDepth
// elements deep, and decodes it; anything after it is ignored.
func decode(data []byte) (*xmlFeedback, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.CharsetReader = charset.NewReaderLabel
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil, ErrNoFeedback
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local == "feedback" {
				var raw xmlFeedback
				if err := d.DecodeElement(&raw, &t); err != nil {
					return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
				}
				return &raw, nil
			}
			depth++
			if depth > maxOuterDepth {
				return nil, fmt.Errorf("%w: nested more than %d elements deep", ErrNoFeedback, maxOuterDepth)
			}
		case xml.EndElement:
			depth--
		}
	}
}

// repair makes the two common kinds of broken XML well-formed: invalid
// UTF-8 becomes U+FFFD, and a "<" that starts no markup becomes "&lt;".
func repair(data []byte) []byte {
	if !utf8.Valid(data) {
		data = bytes.ToValidUTF8(data, []byte("\uFFFD"))
	}
	var out bytes.Buffer
	out.Grow(len(data) + 64)
	for {
		i := bytes.IndexByte(data, '<')
		if i < 0 {
			out.Write(data)
			return out.Bytes()
		}
		out.Write(data[:i])
		if startsMarkup(data[i+1:]) {
			out.WriteByte('<')
		} else {
			out.WriteString("&lt;")
		}
		data = data[i+1:]
	}
}

// startsMarkup reports whether the bytes after a "<" begin a tag, a comment,
// a declaration or a processing instruction: "/"? name, then white space,
// ">" or "/>".
func startsMarkup(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	if b[0] == '?' || b[0] == '!' {
		return true
	}
	if b[0] == '/' {
		b = b[1:]
	}
	n := 0
	for n < len(b) && isNameByte(b[n], n == 0) {
		n++
	}
	if n == 0 || n == len(b) {
		return false
	}
	switch b[n] {
	case ' ', '\t', '\r', '\n', '>':
		return true
	case '/':
		return n+1 < len(b) && b[n+1] == '>'
	}
	return false
}

func isNameByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == ':', c >= 0x80:
		return true
	case !first && (c >= '0' && c <= '9' || c == '-' || c == '.'):
		return true
	}
	return false
}

func normalise(raw *xmlFeedback) (*Feedback, error) {
	f := &Feedback{Version: strings.TrimSpace(raw.Version)}
	m := &raw.Metadata
	f.ReportMetadata = ReportMetadata{
		OrgName:          strings.TrimSpace(m.OrgName),
		Email:            strings.TrimSpace(m.Email),
		ExtraContactInfo: strings.TrimSpace(m.ExtraContactInfo),
		ReportID:         strings.TrimSpace(m.ReportID),
		Generator:        strings.TrimSpace(m.Generator),
	}
	for _, e := range m.Errors {
		if e = strings.TrimSpace(e); e != "" {
			f.ReportMetadata.Errors = append(f.ReportMetadata.Errors, e)
		}
	}
	var err error
	if f.ReportMetadata.Begin, err = unixTime(m.Begin); err != nil {
		return nil, fmt.Errorf("%w: date_range begin: %v", ErrInvalid, err)
	}
	if f.ReportMetadata.End, err = unixTime(m.End); err != nil {
		return nil, fmt.Errorf("%w: date_range end: %v", ErrInvalid, err)
	}

	p := &raw.Policy
	f.PolicyPublished = PolicyPublished{
		Domain:          domain(p.Domain),
		ADKIM:           word(p.ADKIM),
		ASPF:            word(p.ASPF),
		P:               word(p.P),
		SP:              word(p.SP),
		NP:              word(p.NP),
		FO:              strings.TrimSpace(p.FO),
		Testing:         word(p.Testing),
		DiscoveryMethod: word(p.DiscoveryMethod),
	}
	if f.PolicyPublished.Domain == "" {
		return nil, fmt.Errorf("%w: policy_published has no domain", ErrInvalid)
	}
	if s := strings.TrimSpace(p.Pct); s != "" {
		if pct, err := strconv.Atoi(s); err == nil && pct >= 0 && pct <= 100 {
			f.PolicyPublished.Pct = &pct
		}
	}

	f.Records = make([]Record, len(raw.Records))
	for i := range raw.Records {
		x := &raw.Records[i]
		count, err := strconv.ParseInt(strings.TrimSpace(x.Row.Count), 10, 64)
		if err != nil || count < 0 {
			return nil, fmt.Errorf("%w: record %d: count %q is not a number of messages", ErrInvalid, i+1, truncate(x.Row.Count))
		}
		r := Record{
			SourceIP:     strings.TrimSpace(x.Row.SourceIP),
			Count:        count,
			Disposition:  word(x.Row.Policy.Disposition),
			DKIM:         word(x.Row.Policy.DKIM),
			SPF:          word(x.Row.Policy.SPF),
			EnvelopeTo:   domain(x.Identifiers.EnvelopeTo),
			EnvelopeFrom: domain(x.Identifiers.EnvelopeFrom),
			HeaderFrom:   domain(x.Identifiers.HeaderFrom),
		}
		// RFC 9990 section 3.2: "pass" means no policy was applied.
		if r.Disposition == "pass" {
			r.Disposition = "none"
		}
		for _, reason := range x.Row.Policy.Reasons {
			typ := word(reason.Type)
			comment := strings.TrimSpace(reason.Comment)
			if typ == "" && comment == "" {
				continue // empty <reason/> children
			}
			r.Reasons = append(r.Reasons, Reason{Type: typ, Comment: comment})
		}
		for _, d := range x.Auth.DKIM {
			r.DKIMResults = append(r.DKIMResults, DKIMAuthResult{
				Domain: domain(d.Domain), Selector: strings.TrimSpace(d.Selector),
				Result: word(d.Result), HumanResult: strings.TrimSpace(d.HumanResult),
			})
		}
		for _, s := range x.Auth.SPF {
			r.SPFResults = append(r.SPFResults, SPFAuthResult{
				Domain: domain(s.Domain), Scope: word(s.Scope),
				Result: word(s.Result), HumanResult: strings.TrimSpace(s.HumanResult),
			})
		}
		f.Records[i] = r
	}
	return f, nil
}

// word normalises a keyword of the schema: trimmed, lower case.
func word(s string) string {
	s = strings.TrimSpace(s)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// domain normalises a domain: trimmed, lower case, no trailing dot.
func domain(s string) string { return strings.TrimSuffix(word(s), ".") }

// unixTime reads a date_range bound: seconds since the epoch (some
// reporters write a fraction).
func unixTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > 1<<40 {
			return time.Time{}, fmt.Errorf("%d out of range", n)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 1<<40 {
		return time.Time{}, fmt.Errorf("%q is not a Unix time", truncate(s))
	}
	return time.Unix(int64(f), 0).UTC(), nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

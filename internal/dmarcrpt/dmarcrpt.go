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
// pass, fail, none, softfail, neutral, temperror, permerror, policy), each
// as the reporter wrote it: RFC 9990's disposition "pass" stays "pass".
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

// Dispositions of policy_evaluated: what the receiver did with the
// messages of a record. RFC 7489 has none, quarantine and reject, and
// writes none for messages that passed DMARC too; RFC 9990 adds pass for
// them. Neither none nor pass is a policy applied: only quarantine and
// reject are. Whether messages passed DMARC is read from the record's DKIM
// and SPF results, never from its disposition.
const (
	DispositionNone       = "none"
	DispositionPass       = "pass"
	DispositionQuarantine = "quarantine"
	DispositionReject     = "reject"
)

// Record is one <record>: a group of messages from one source with the same
// results.
type Record struct {
	SourceIP string `json:"source_ip"`
	Count    int64  `json:"count"`
	// Disposition is the reported word, lower-cased (see the Disposition
	// constants).
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
	Records []xmlRecord `xml:"record"`
}

type xmlRecord struct {
	Row struct {
		SourceIP string `xml:"source_ip"`
		Count    string `xml:"count"`
		Policy   struct {
			Disposition string      `xml:"disposition"`
			DKIM        string      `xml:"dkim"`
			SPF         string      `xml:"spf"`
			Reasons     []xmlReason `xml:"reason"`
		} `xml:"policy_evaluated"`
	} `xml:"row"`
	Identifiers struct {
		EnvelopeTo   string `xml:"envelope_to"`
		EnvelopeFrom string `xml:"envelope_from"`
		HeaderFrom   string `xml:"header_from"`
	} `xml:"identifiers"`
	Auth struct {
		DKIM []xmlDKIM `xml:"dkim"`
		SPF  []xmlSPF  `xml:"spf"`
	} `xml:"auth_results"`
}

type xmlReason struct {
	Type    string `xml:"type"`
	Comment string `xml:"comment"`
}

type xmlDKIM struct {
	Domain      string `xml:"domain"`
	Selector    string `xml:"selector"`
	Result      string `xml:"result"`
	HumanResult string `xml:"human_result"`
}

type xmlSPF struct {
	Domain      string `xml:"domain"`
	Scope       string `xml:"scope"`
	Result      string `xml:"result"`
	HumanResult string `xml:"human_result"`
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
//
// It walks the tokens itself rather than calling xml.Decoder.DecodeElement:
// the reflection of Unmarshal cost a third of the parse of a large report.
// The result is what Unmarshal gives into xmlFeedback: an element matches a
// field by its local name, a string field takes the element's own
// character data (child elements skipped) and a repeated one the last, a
// slice appends, a repeated struct merges.
func decode(data []byte) (*xmlFeedback, error) {
	w := &walker{d: xml.NewDecoder(bytes.NewReader(data))}
	w.d.CharsetReader = charset.NewReaderLabel
	for {
		tok, err := w.next()
		if err == io.EOF {
			return nil, ErrNoFeedback
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if t, ok := tok.(xml.StartElement); ok {
			if t.Name.Local == "feedback" {
				var raw xmlFeedback
				if err := w.feedback(&raw); err != nil {
					return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
				}
				return &raw, nil
			}
			if len(w.stack) > maxOuterDepth {
				return nil, fmt.Errorf("%w: nested more than %d elements deep", ErrNoFeedback, maxOuterDepth)
			}
		}
	}
}

// maxElementDepth bounds nesting anywhere in a report (as Unmarshal's own
// bound).
const maxElementDepth = 10000

// walker reads raw tokens and checks what xml.Decoder.Token would: every
// end tag closes the element it names.
type walker struct {
	d     *xml.Decoder
	stack []xml.Name
}

func (w *walker) next() (xml.Token, error) {
	tok, err := w.d.RawToken()
	if err != nil {
		if err == io.EOF && len(w.stack) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case xml.StartElement:
		if len(w.stack) >= maxElementDepth {
			return nil, fmt.Errorf("elements nested more than %d deep", maxElementDepth)
		}
		w.stack = append(w.stack, t.Name)
	case xml.EndElement:
		if len(w.stack) == 0 {
			return nil, fmt.Errorf("unexpected end element </%s>", t.Name.Local)
		}
		if top := w.stack[len(w.stack)-1]; top != t.Name {
			return nil, fmt.Errorf("element <%s> closed by </%s>", top.Local, t.Name.Local)
		}
		w.stack = w.stack[:len(w.stack)-1]
	}
	return tok, nil
}

// children calls fn for each child element of the element just started;
// fn returns false for an element it does not read, which is skipped.
func (w *walker) children(fn func(name string) (bool, error)) error {
	for {
		tok, err := w.next()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			read, err := fn(t.Name.Local)
			if err != nil {
				return err
			}
			if !read {
				if err := w.skip(); err != nil {
					return err
				}
			}
		case xml.EndElement:
			return nil
		}
	}
}

// skip reads to the end of the element just started.
func (w *walker) skip() error {
	depth := len(w.stack)
	for {
		if _, err := w.next(); err != nil {
			return err
		}
		if len(w.stack) < depth {
			return nil
		}
	}
}

// text reads the character data of the element just started into dst,
// skipping any child element.
func (w *walker) text(dst *string) error {
	var buf []byte
	for {
		tok, err := w.next()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.CharData:
			buf = append(buf, t...)
		case xml.StartElement:
			if err := w.skip(); err != nil {
				return err
			}
		case xml.EndElement:
			*dst = string(buf)
			return nil
		}
	}
}

// texts reads the children named in fields as text.
func (w *walker) texts(fields map[string]*string) error {
	return w.children(func(name string) (bool, error) {
		if dst, ok := fields[name]; ok {
			return true, w.text(dst)
		}
		return false, nil
	})
}

func (w *walker) feedback(f *xmlFeedback) error {
	return w.children(func(name string) (bool, error) {
		switch name {
		case "version":
			return true, w.text(&f.Version)
		case "report_metadata":
			m := &f.Metadata
			return true, w.children(func(name string) (bool, error) {
				switch name {
				case "org_name":
					return true, w.text(&m.OrgName)
				case "email":
					return true, w.text(&m.Email)
				case "extra_contact_info":
					return true, w.text(&m.ExtraContactInfo)
				case "report_id":
					return true, w.text(&m.ReportID)
				case "date_range":
					return true, w.texts(map[string]*string{"begin": &m.Begin, "end": &m.End})
				case "error":
					var e string
					err := w.text(&e)
					m.Errors = append(m.Errors, e)
					return true, err
				case "generator":
					return true, w.text(&m.Generator)
				}
				return false, nil
			})
		case "policy_published":
			p := &f.Policy
			return true, w.texts(map[string]*string{
				"domain": &p.Domain, "adkim": &p.ADKIM, "aspf": &p.ASPF, "p": &p.P, "sp": &p.SP, "np": &p.NP,
				"pct": &p.Pct, "fo": &p.FO, "testing": &p.Testing, "discovery_method": &p.DiscoveryMethod,
			})
		case "record":
			f.Records = append(f.Records, xmlRecord{})
			return true, w.record(&f.Records[len(f.Records)-1])
		}
		return false, nil
	})
}

func (w *walker) record(r *xmlRecord) error {
	return w.children(func(name string) (bool, error) {
		switch name {
		case "row":
			return true, w.children(func(name string) (bool, error) {
				switch name {
				case "source_ip":
					return true, w.text(&r.Row.SourceIP)
				case "count":
					return true, w.text(&r.Row.Count)
				case "policy_evaluated":
					pe := &r.Row.Policy
					return true, w.children(func(name string) (bool, error) {
						switch name {
						case "disposition":
							return true, w.text(&pe.Disposition)
						case "dkim":
							return true, w.text(&pe.DKIM)
						case "spf":
							return true, w.text(&pe.SPF)
						case "reason":
							pe.Reasons = append(pe.Reasons, xmlReason{})
							x := &pe.Reasons[len(pe.Reasons)-1]
							return true, w.texts(map[string]*string{"type": &x.Type, "comment": &x.Comment})
						}
						return false, nil
					})
				}
				return false, nil
			})
		case "identifiers":
			id := &r.Identifiers
			return true, w.children(func(name string) (bool, error) {
				switch name {
				case "envelope_to":
					return true, w.text(&id.EnvelopeTo)
				case "envelope_from":
					return true, w.text(&id.EnvelopeFrom)
				case "header_from":
					return true, w.text(&id.HeaderFrom)
				}
				return false, nil
			})
		case "auth_results":
			a := &r.Auth
			return true, w.children(func(name string) (bool, error) {
				switch name {
				case "dkim":
					a.DKIM = append(a.DKIM, xmlDKIM{})
					x := &a.DKIM[len(a.DKIM)-1]
					return true, w.children(func(name string) (bool, error) {
						switch name {
						case "domain":
							return true, w.text(&x.Domain)
						case "selector":
							return true, w.text(&x.Selector)
						case "result":
							return true, w.text(&x.Result)
						case "human_result":
							return true, w.text(&x.HumanResult)
						}
						return false, nil
					})
				case "spf":
					a.SPF = append(a.SPF, xmlSPF{})
					x := &a.SPF[len(a.SPF)-1]
					return true, w.children(func(name string) (bool, error) {
						switch name {
						case "domain":
							return true, w.text(&x.Domain)
						case "scope":
							return true, w.text(&x.Scope)
						case "result":
							return true, w.text(&x.Result)
						case "human_result":
							return true, w.text(&x.HumanResult)
						}
						return false, nil
					})
				}
				return false, nil
			})
		}
		return false, nil
	})
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

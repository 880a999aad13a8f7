// Package tlsrpt parses SMTP TLS reports (RFC 8460): the JSON report, bare,
// gzip-compressed (application/tlsrpt+gzip) or carried by an email
// (RFC 8460 section 5.3), as receivers get them by mail or by HTTPS POST.
//
// Input is bounded: at most MaxReportBytes of JSON after decompression, and
// reportmail's bounds for an email.
package tlsrpt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/reportmail"
)

// MaxReportBytes is the largest report accepted, after decompression.
const MaxReportBytes = 20 << 20

var (
	// ErrEmpty is returned for an input without bytes.
	ErrEmpty = errors.New("empty report")
	// ErrTooLarge is returned for a report over MaxReportBytes.
	ErrTooLarge = errors.New("report too large")
	// ErrMalformed is returned for input that is not a JSON object.
	ErrMalformed = errors.New("malformed JSON")
	// ErrInvalid is returned for JSON that is not a usable TLS report.
	ErrInvalid = errors.New("invalid TLS report")
	// ErrNoReport is returned for an email that carries no TLS report.
	ErrNoReport = errors.New("no TLS report found")
)

// Report is one RFC 8460 section 4 report.
type Report struct {
	OrganizationName string    `json:"organization-name"`
	DateRange        DateRange `json:"date-range"`
	ContactInfo      string    `json:"contact-info"`
	ReportID         string    `json:"report-id"`
	Policies         []Policy  `json:"policies"`
}

// DateRange is the report's period.
type DateRange struct {
	Start time.Time `json:"start-datetime"`
	End   time.Time `json:"end-datetime"`
}

// UnmarshalJSON reads the date-range's RFC 3339 date-times, and also the
// forms real reporters send instead: Microsoft's without a zone offset
// ("2023-01-10T00:00:00"), read as UTC, and a space in place of the "T".
func (d *DateRange) UnmarshalJSON(b []byte) error {
	var raw struct {
		Start string `json:"start-datetime"`
		End   string `json:"end-datetime"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var err error
	if d.Start, err = parseDateTime(raw.Start); err != nil {
		return fmt.Errorf("start-datetime: %w", err)
	}
	if d.End, err = parseDateTime(raw.End); err != nil {
		return fmt.Errorf("end-datetime: %w", err)
	}
	return nil
}

// dateTimeLayouts are tried in order; the ones without a zone are UTC.
var dateTimeLayouts = [...]string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
}

// parseDateTime parses one date-time of a report; an absent one is the zero
// time, which Parse refuses as a missing date-range.
func parseDateTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range dateTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 date-time", s)
}

// Policy is one evaluated policy with its session counts.
type Policy struct {
	Policy         PolicyDetails   `json:"policy"`
	Summary        Summary         `json:"summary"`
	FailureDetails []FailureDetail `json:"failure-details,omitempty"`
}

// PolicyDetails says which policy was applied: "sts", "tlsa" or
// "no-policy-found".
type PolicyDetails struct {
	Type   string     `json:"policy-type"`
	String StringList `json:"policy-string,omitempty"`
	Domain string     `json:"policy-domain"`
	MXHost StringList `json:"mx-host,omitempty"`
}

// Summary counts sessions.
type Summary struct {
	TotalSuccessfulSessionCount int64 `json:"total-successful-session-count"`
	TotalFailureSessionCount    int64 `json:"total-failure-session-count"`
}

// FailureDetail is one failure type (RFC 8460 section 4.3) with its count.
type FailureDetail struct {
	ResultType            string `json:"result-type"`
	SendingMTAIP          string `json:"sending-mta-ip,omitempty"`
	ReceivingMXHostname   string `json:"receiving-mx-hostname,omitempty"`
	ReceivingMXHelo       string `json:"receiving-mx-helo,omitempty"`
	ReceivingIP           string `json:"receiving-ip,omitempty"`
	FailedSessionCount    int64  `json:"failed-session-count"`
	AdditionalInformation string `json:"additional-information,omitempty"`
	FailureReasonCode     string `json:"failure-reason-code,omitempty"`
}

// StringList is a JSON array of strings that reporters sometimes send as a
// single string (mx-host in RFC 8460's own example).
type StringList []string

// UnmarshalJSON accepts a string or an array of strings.
func (l *StringList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*l = StringList{s}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*l = list
	return nil
}

// Totals sums the session counts of every policy.
func (r *Report) Totals() (successful, failed int64) {
	for _, p := range r.Policies {
		successful += p.Summary.TotalSuccessfulSessionCount
		failed += p.Summary.TotalFailureSessionCount
	}
	return successful, failed
}

// Parse parses the JSON of one report.
func Parse(data []byte) (*Report, error) {
	if len(data) > MaxReportBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), MaxReportBytes)
	}
	data = bytes.TrimPrefix(bytes.TrimSpace(data), []byte("\xef\xbb\xbf"))
	if len(data) == 0 {
		return nil, ErrEmpty
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	r.OrganizationName = strings.TrimSpace(r.OrganizationName)
	r.ReportID = strings.TrimSpace(r.ReportID)
	if r.ReportID == "" {
		return nil, fmt.Errorf("%w: no report-id", ErrInvalid)
	}
	if r.DateRange.Start.IsZero() || r.DateRange.End.IsZero() {
		return nil, fmt.Errorf("%w: no date-range", ErrInvalid)
	}
	r.DateRange.Start, r.DateRange.End = r.DateRange.Start.UTC(), r.DateRange.End.UTC()
	if len(r.Policies) == 0 {
		return nil, fmt.Errorf("%w: no policies", ErrInvalid)
	}
	for i := range r.Policies {
		p := &r.Policies[i]
		p.Policy.Type = strings.ToLower(strings.TrimSpace(p.Policy.Type))
		p.Policy.Domain = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(p.Policy.Domain)), ".")
		if p.Summary.TotalSuccessfulSessionCount < 0 || p.Summary.TotalFailureSessionCount < 0 {
			return nil, fmt.Errorf("%w: policy %d: negative session count", ErrInvalid, i+1)
		}
		for j := range p.FailureDetails {
			d := &p.FailureDetails[j]
			d.ResultType = strings.ToLower(strings.TrimSpace(d.ResultType))
			if d.FailedSessionCount < 0 {
				return nil, fmt.Errorf("%w: policy %d: negative failed-session-count", ErrInvalid, i+1)
			}
		}
	}
	return &r, nil
}

// Format names the wrapper a report came in.
type Format string

// Formats ParseFile recognises.
const (
	FormatJSON  Format = "json"
	FormatGzip  Format = "gzip"
	FormatEmail Format = "email"
)

// ParseFile parses a report as JSON, gzip-compressed JSON or an email
// carrying either, and returns the form it found.
func ParseFile(data []byte) (*Report, Format, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, "", ErrEmpty
	}
	if r, format, err := parseBlob(data); format != "" {
		return r, format, err
	}
	r, err := ParseMessage(data)
	return r, FormatEmail, err
}

// ParseHTTPS parses a report posted to an https: rua (RFC 8460 section
// 5.4): JSON or gzip-compressed JSON, decompressed with the same bound as
// every other report. Anything else is ErrNoReport.
func ParseHTTPS(data []byte) (*Report, Format, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, "", ErrEmpty
	}
	r, format, err := parseBlob(data)
	if format == "" {
		return nil, "", fmt.Errorf("%w: the body is neither JSON nor gzip", ErrNoReport)
	}
	return r, format, err
}

func parseBlob(data []byte) (*Report, Format, error) {
	if reportmail.IsGzip(data) {
		js, err := reportmail.Gunzip(data, MaxReportBytes)
		if err != nil {
			return nil, FormatGzip, err
		}
		r, err := Parse(js)
		return r, FormatGzip, err
	}
	trimmed := bytes.TrimLeft(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '{' {
		r, err := Parse(data)
		return r, FormatJSON, err
	}
	return nil, "", nil
}

// ParseMessage parses a report email: the report is the first
// application/tlsrpt+json or application/tlsrpt+gzip part (RFC 8460
// section 5.3), or failing that the first JSON or gzip attachment.
func ParseMessage(raw []byte) (*Report, error) {
	msg, err := reportmail.Parse(raw)
	if err != nil {
		return nil, err
	}
	for _, p := range msg.Parts {
		switch p.ContentType {
		case "text/plain", "text/html", "message/rfc822":
			ext := strings.ToLower(path.Ext(p.FileName))
			if ext != ".json" && ext != ".gz" {
				continue
			}
		}
		r, format, err := parseBlob(p.Content)
		if format == "" {
			continue
		}
		// The first part that is a report (by its format) decides: trying
		// every other part after a failure would let one message cost up to
		// MaxParts decompressions of MaxReportBytes each.
		return r, err
	}
	return nil, ErrNoReport
}

// Package arf reads DMARC failure reports for their identity fields: the
// Abuse Reporting Format of RFC 5965 with the authentication-failure
// extension of RFC 6591 (as profiled by RFC 9991 for DMARC), and the
// plain-text reports some MTAs send instead. Only identity fields are kept:
// the feedback fields and a few header fields of the reported message,
// never its body.
package arf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/mail"
	"net/textproto"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/reportmail"
)

// maxFieldBytes caps every kept field value.
const maxFieldBytes = 1024

// ErrNoReport is returned for an email that is no failure report.
var ErrNoReport = errors.New("no failure report found")

// Form says how the report was written.
type Form string

// Forms of failure reports.
const (
	// FormARF is a message/feedback-report part (RFC 5965).
	FormARF Form = "arf"
	// FormText is a plain-text report without one.
	FormText Form = "text"
)

// Report holds the identity fields of one failure report.
type Report struct {
	Form Form `json:"form"`
	// FeedbackType is "auth-failure" for DMARC (RFC 6591 section 3.1).
	FeedbackType          string    `json:"feedback_type,omitempty"`
	UserAgent             string    `json:"user_agent,omitempty"`
	OriginalMailFrom      string    `json:"original_mail_from,omitempty" description:"The envelope sender (SMTP MAIL FROM) of the reported message, from the report's Original-Mail-From field (RFC 5965); absent when the report does not carry it. The From header is in from."`
	OriginalRcptTo        string    `json:"original_rcpt_to,omitempty" description:"The envelope recipient (SMTP RCPT TO), from Original-Rcpt-To."`
	ArrivalDate           time.Time `json:"arrival_date,omitzero"`
	SourceIP              string    `json:"source_ip,omitempty"`
	ReportedDomain        string    `json:"reported_domain,omitempty"`
	AuthFailure           string    `json:"auth_failure,omitempty"`
	AuthenticationResults string    `json:"authentication_results,omitempty"`
	DeliveryResult        string    `json:"delivery_result,omitempty"`
	DKIMDomain            string    `json:"dkim_domain,omitempty"`
	DKIMSelector          string    `json:"dkim_selector,omitempty"`
	IdentityAlignment     string    `json:"identity_alignment,omitempty"`
	// Header fields of the reported message.
	From      string `json:"from,omitempty" description:"The From header field of the reported message, as written (display name included)."`
	Subject   string `json:"subject,omitempty"`
	MessageID string `json:"message_id,omitempty"`
}

// ParseMessage reads a failure report email.
func ParseMessage(raw []byte) (*Report, error) {
	msg, err := reportmail.Parse(raw)
	if err != nil {
		return nil, err
	}
	var r *Report
	for _, p := range msg.Parts {
		if p.ContentType == "message/feedback-report" {
			r, err = parseFeedback(p.Content)
			if err != nil {
				return nil, err
			}
			break
		}
	}
	if r == nil {
		r = parseText(msg)
	}
	if r == nil {
		return nil, ErrNoReport
	}
	for _, p := range msg.Parts {
		if p.ContentType == "message/rfc822" || p.ContentType == "text/rfc822-headers" {
			r.originalHeaders(p.Content)
			break
		}
	}
	if r.Form == FormText && r.From == "" {
		// Plain-text reports quote the headers inside the text part.
		for _, p := range msg.Parts {
			if p.ContentType == "text/plain" {
				if i := bytes.Index(p.Content, []byte("\nReceived:")); i >= 0 {
					r.originalHeaders(p.Content[i+1:])
				}
			}
		}
	}
	return r, nil
}

// parseFeedback reads the fields of a message/feedback-report body.
func parseFeedback(b []byte) (*Report, error) {
	h, err := readHeader(b)
	if err != nil && len(h) == 0 {
		return nil, fmt.Errorf("%w: unreadable feedback fields: %v", ErrNoReport, err)
	}
	get := func(k string) string { return clip(h.Get(k)) }
	r := &Report{
		Form:                  FormARF,
		FeedbackType:          strings.ToLower(get("Feedback-Type")),
		UserAgent:             get("User-Agent"),
		OriginalMailFrom:      strings.Trim(get("Original-Mail-From"), "<>"),
		OriginalRcptTo:        strings.Trim(get("Original-Rcpt-To"), "<>"),
		SourceIP:              get("Source-IP"),
		ReportedDomain:        strings.ToLower(get("Reported-Domain")),
		AuthFailure:           strings.ToLower(get("Auth-Failure")),
		AuthenticationResults: get("Authentication-Results"),
		DeliveryResult:        strings.ToLower(get("Delivery-Result")),
		DKIMDomain:            strings.ToLower(get("DKIM-Domain")),
		DKIMSelector:          get("DKIM-Selector"),
		IdentityAlignment:     strings.ToLower(get("Identity-Alignment")),
	}
	if d, err := mail.ParseDate(get("Arrival-Date")); err == nil {
		r.ArrivalDate = d.UTC()
	}
	if r.FeedbackType == "" {
		return nil, fmt.Errorf("%w: feedback report without Feedback-Type", ErrNoReport)
	}
	return r, nil
}

// parseText reads a plain-text report (Exim's and similar): "Key: value"
// lines naming the sender domain and IP.
func parseText(msg *reportmail.Message) *Report {
	for _, p := range msg.Parts {
		if p.ContentType != "text/plain" {
			continue
		}
		r := &Report{Form: FormText, FeedbackType: "auth-failure"}
		sc := bufio.NewScanner(bytes.NewReader(p.Content))
		sc.Buffer(make([]byte, 0, 4096), 64<<10)
		for sc.Scan() {
			key, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
			if !ok {
				continue
			}
			value = clip(strings.TrimSpace(value))
			switch strings.ToLower(key) {
			case "sender domain", "reported domain":
				r.ReportedDomain = strings.ToLower(value)
			case "sender ip address", "source ip":
				r.SourceIP = value
			case "received date":
				if d, err := mail.ParseDate(value); err == nil {
					r.ArrivalDate = d.UTC()
				}
			case "dmarc results":
				r.DeliveryResult = strings.ToLower(value)
			}
		}
		if r.ReportedDomain != "" {
			return r
		}
	}
	return nil
}

// originalHeaders keeps From, Subject and Message-ID of the reported
// message; its body is never read. The From header never stands in for a
// missing Original-Mail-From: that field is the envelope sender, which the
// header does not tell (they differ for any mail sent through a service
// with its own bounce domain).
func (r *Report) originalHeaders(b []byte) {
	h, _ := readHeader(b)
	r.From = clip(h.Get("From"))
	r.Subject = clip(h.Get("Subject"))
	r.MessageID = clip(h.Get("Message-Id"))
}

// readHeader reads a header block (CRLF or LF), leniently: the fields
// read before an error are kept.
func readHeader(b []byte) (textproto.MIMEHeader, error) {
	if len(b) > reportmail.MaxMessageBytes {
		b = b[:reportmail.MaxMessageBytes]
	}
	tr := textproto.NewReader(bufio.NewReader(bytes.NewReader(append(bytes.TrimLeft(b, "\r\n"), "\r\n\r\n"...))))
	h, err := tr.ReadMIMEHeader()
	if h == nil {
		h = textproto.MIMEHeader{}
	}
	return h, err
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxFieldBytes {
		s = s[:maxFieldBytes]
	}
	return s
}

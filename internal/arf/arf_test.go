package arf_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/arf"
	"github.com/mailwatch/mailwatch/internal/corpus"
)

// TestCorpusWalk reads every failure report of corpus/dmarc-forensic for
// the identity fields its README describes.
func TestCorpusWalk(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file     string
		form     arf.Form
		domain   string
		sourceIP string
	}{
		{"DMARC Failure Report for domain.de (mail-from=sharepoint@domain.de, ip=10.10.10.10).eml", arf.FormARF, "domain.de", "10.10.10.10"},
		{"[Netease DMARC Failure Report] Rent Reminder.eml", arf.FormARF, "cardinal.com", "167.89.69.24"},
		{"dmarc_ruf_report_linkedin.eml", arf.FormARF, "example.com", "10.10.10.10"},
		{"dmarc_ruf_report_linkedin.crlf.eml", arf.FormARF, "example.com", "10.10.10.10"},
		{"exim_plain_text_only_no_arf_part.eml", arf.FormText, "example.com", "203.0.113.68"},
	} {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			r, err := arf.ParseMessage(corpus.Read(t, "dmarc-forensic/"+c.file))
			require.NoError(t, err)
			require.Equal(t, c.form, r.Form)
			require.Equal(t, "auth-failure", r.FeedbackType)
			require.Equal(t, c.domain, r.ReportedDomain)
			require.Equal(t, c.sourceIP, r.SourceIP)
		})
	}
}

func TestIdentityFields(t *testing.T) {
	t.Parallel()
	r, err := arf.ParseMessage(corpus.Read(t, "dmarc-forensic/DMARC Failure Report for domain.de (mail-from=sharepoint@domain.de, ip=10.10.10.10).eml"))
	require.NoError(t, err)
	require.Equal(t, "sharepoint@domain.de", r.OriginalMailFrom)
	require.Equal(t, "peter.pan@domain.de", r.OriginalRcptTo)
	require.Equal(t, "dmarc", r.AuthFailure)
	require.Equal(t, "Subject", r.Subject)
	require.False(t, r.ArrivalDate.IsZero())

	text, err := arf.ParseMessage(corpus.Read(t, "dmarc-forensic/exim_plain_text_only_no_arf_part.eml"))
	require.NoError(t, err)
	require.Equal(t, "Payment from your account.", text.Subject)

	_, err = arf.ParseMessage([]byte("From: a@example.com\r\nContent-Type: text/plain\r\n\r\nhello\r\n"))
	require.ErrorIs(t, err, arf.ErrNoReport)
}

// arfReport is an RFC 5965 report with the given feedback fields whose
// reported message (headers only) is From: header.
func arfReport(fields, header string) []byte {
	return []byte("From: dmarc-noreply@receiver.example\r\nTo: ruf@inbound.example\r\nSubject: DMARC failure report\r\n" +
		"MIME-Version: 1.0\r\nContent-Type: multipart/report; report-type=feedback-report; boundary=b1\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain\r\n\r\nA message claiming to be from example.com failed DMARC.\r\n" +
		"--b1\r\nContent-Type: message/feedback-report\r\n\r\n" +
		"Feedback-Type: auth-failure\r\nVersion: 1\r\n" + fields + "Source-IP: 192.0.2.7\r\nReported-Domain: example.com\r\nAuth-Failure: dmarc\r\n" +
		"\r\n--b1\r\nContent-Type: text/rfc822-headers\r\n\r\n" +
		"From: " + header + "\r\nTo: bob@receiver.example\r\nSubject: Invoice\r\nMessage-ID: <m1@example.com>\r\n" +
		"\r\n--b1--\r\n")
}

// TestOriginalMailFromIsTheEnvelope: Original-Mail-From is the envelope
// sender (RFC 5965 section 3.2). A report without it leaves it empty
// instead of taking the reported message's From header, which stays in
// From; a report with it keeps it, whatever the header says.
func TestOriginalMailFromIsTheEnvelope(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, fields, envelope string
	}{
		{"Absent", "", ""},
		{"Empty", "Original-Mail-From: \r\n", ""},
		{"NullReversePath", "Original-Mail-From: <>\r\n", ""},
		{"Given", "Original-Mail-From: <bounce-42@mail.esp.example>\r\n", "bounce-42@mail.esp.example"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, err := arf.ParseMessage(arfReport(c.fields, "Alice <alice@example.com>"))
			require.NoError(t, err)
			require.Equal(t, arf.FormARF, r.Form)
			require.Equal(t, c.envelope, r.OriginalMailFrom)
			require.Equal(t, "Alice <alice@example.com>", r.From, "the header From is its own field")
			require.Equal(t, "Invoice", r.Subject)
		})
	}

	// A plain-text report quotes the headers in its text: no envelope
	// sender there either.
	text, err := arf.ParseMessage([]byte("From: mailer-daemon@receiver.example\r\nSubject: DMARC failure\r\nContent-Type: text/plain\r\n\r\n" +
		"Sender Domain: example.com\r\nSender IP Address: 192.0.2.7\r\n\r\nReceived: from mx.example.com\r\n" +
		"From: Alice <alice@example.com>\r\nSubject: Invoice\r\n"))
	require.NoError(t, err)
	require.Equal(t, arf.FormText, text.Form)
	require.Empty(t, text.OriginalMailFrom)
	require.Equal(t, "Alice <alice@example.com>", text.From)
}

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

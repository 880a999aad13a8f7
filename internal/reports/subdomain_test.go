package reports_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/textproto"
	"strings"
	"testing"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/corpus"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/smtpd"
)

// requireRCPT550 checks that err is a 550 answer to RCPT.
func requireRCPT550(t *testing.T, err error, rcpt string) {
	t.Helper()
	var smtpErr *smtp.SMTPError
	var tpErr *textproto.Error
	switch {
	case errors.As(err, &smtpErr):
		require.Equal(t, 550, smtpErr.Code, rcpt)
	case errors.As(err, &tpErr):
		require.Equal(t, 550, tpErr.Code, rcpt)
	default:
		t.Fatalf("%s: want 550 at RCPT, got %v", rcpt, err)
	}
}

// TestReportingAddressAtVerifiedSubdomain runs the listener as
// cmd/mailwatch wires it (AcceptDomain asks dnsfix.IsVerifiedInbound) over
// real SMTP sessions: a domain's signed reporting address written at its
// verified inbound subdomain is accepted and its report stored for the
// domain; at a subdomain still pending, or at another domain's verified
// subdomain, it is refused with 550 and nothing is stored.
func TestReportingAddressAtVerifiedSubdomain(t *testing.T) {
	t.Parallel()
	p := startPipeline(t)
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	store := &reports.SMTPStore{Reports: p.svc, Next: &receivers.Store{DB: p.pool, Emitter: &events.Emitter{}, Logger: logger}}
	srv, err := smtpd.NewServer(smtpd.Config{
		Domain: inboundDomain, MaxMessageBytes: reports.MaxRawBytes,
		AcceptDomain: func(ctx context.Context, domain string) (bool, error) {
			return dnsfix.IsVerifiedInbound(ctx, p.pool, domain)
		},
	}, store, logger)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	p.addr = l.Addr().String()

	rcpt, _ := p.signedAddresses(t, "example.com")
	other, _ := p.signedAddresses(t, "example.org")
	local, _, _ := strings.Cut(rcpt, "@")
	otherLocal, _, _ := strings.Cut(other, "@")
	setup := func(domain, sub string, verified bool) {
		d, err := p.q.DomainGetByName(ctx, p.pool, dbsqlc.DomainGetByNameParams{AccountID: p.account, Name: domain})
		require.NoError(t, err)
		s, err := dnsfix.SetupMX(ctx, p.pool, d, sub)
		require.NoError(t, err)
		if verified {
			_, err = p.pool.Exec(ctx, "UPDATE mx_setups SET state = 'verified' WHERE id = $1", s.ID)
			require.NoError(t, err)
		}
	}
	setup("example.com", "reports", true)
	setup("example.org", "in", false)
	report := corpus.Read(t, "dmarc/usssa.com!example.com!1538784000!1538870399.xml")

	for _, bad := range []string{
		otherLocal + "@in.example.org",      // its subdomain is only pending
		otherLocal + "@reports.example.com", // another domain's subdomain
		local + "@unknown.example.net",      // no setup at all
	} {
		requireRCPT550(t, p.send(t, bad, asEmail("r.xml", "text/xml", report)), bad)
	}
	var n int
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT count(*) FROM report_messages").Scan(&n))
	require.Zero(t, n, "nothing stored for refused recipients")

	require.NoError(t, p.send(t, local+"@Reports.Example.com", asEmail("r.xml", "text/xml", report)))
	p.waitJobs(t, 1)
	var domain, status string
	require.NoError(t, p.pool.QueryRow(ctx, "SELECT d.name, m.status FROM report_messages m JOIN domains d ON d.id = m.domain_id").Scan(&domain, &status))
	require.Equal(t, "example.com", domain)
	require.Equal(t, "accepted", status)
}

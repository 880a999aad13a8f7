package jobs

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/blocklist"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/queues"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/reputation"
	"github.com/mailwatch/mailwatch/internal/smtpd"
	"github.com/mailwatch/mailwatch/internal/spamcheck"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// A message received over SMTP is analysed by its job after it is stored,
// and the report is stored with it.
func TestReceiverAnalyzeJob(t *testing.T) {
	t.Parallel()
	require.Contains(t, queues.All, receivers.AnalyzeArgs{}.InsertOpts().Queue)
	srv := dnstest.Start(t, `
sender.example.   TXT "v=spf1 ip4:127.0.0.1 -all"
_dmarc.sender.example. TXT "v=DMARC1; p=reject"
`)
	pool, _ := dbtest.NewDB(t)
	// The spam filter the workers were given (SPAMD_ADDR) scores it.
	filter := &fixedSpam{res: spamcheck.Result{Engine: "spamassassin", Score: 1.5, Threshold: 5, Rules: []spamcheck.Rule{}}}
	deps := Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Resolver: dnscheck.NewClient(srv.Addr(), 2*time.Second),
		Spam: filter}
	acct := testfactory.Account(t, pool)
	raw := "From: News <news@sender.example>\r\nTo: {{to}}\r\nSubject: hi\r\nDate: Sat, 28 Nov 2026 10:00:00 +0000\r\n" +
		"Message-ID: <1@sender.example>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\nHello there.\r\n"
	msgID := analyzeOne(t, deps, acct, raw, smtpd.Envelope{From: "bounce@sender.example", RemoteAddr: "127.0.0.1:41000",
		Helo: "mta.sender.example", TLS: true, TLSVersion: "TLS 1.3", TLSCipher: "TLS_AES_128_GCM_SHA256"})
	ctx := context.Background()
	row, err := dbsqlc.New().MessageAnalysisGet(ctx, pool, msgID)
	require.NoError(t, err)
	require.NotNil(t, row.AnalyzedAt)
	var rep deliverability.Report
	require.NoError(t, json.Unmarshal(row.Analysis, &rep))
	require.Equal(t, "pass", string(rep.Auth.SPF.Status))
	require.Equal(t, "pass", rep.Auth.DMARC.Result)
	require.Equal(t, "TLS 1.3", rep.Session.TLSVersion)
	require.Equal(t, &filter.res, rep.Spam)
	require.Equal(t, "mta.sender.example", filter.helo, "the filter hears the session")
	require.NotEmpty(t, rep.Grade)
	// The worker emits receiver_message_analyzed with the stored report.
	var grade string
	require.NoError(t, pool.QueryRow(ctx, `SELECT payload->>'grade' FROM events WHERE account_id = $1 AND event_type = 'receiver_message_analyzed'`, acct).Scan(&grade))
	require.Equal(t, rep.Grade, grade)
}

// analyzeOne runs an analysis worker with deps, delivers raw ({{to}}
// replaced by a new receiver's address) as env to that receiver of acct,
// waits for its analysis job to complete and returns the message's id.
func analyzeOne(t *testing.T, deps Deps, acct uuid.UUID, raw string, env smtpd.Envelope) uuid.UUID {
	t.Helper()
	client, err := NewClient(deps, Options{Concurrency: 2, Queues: []string{queues.Analysis}})
	require.NoError(t, err)
	done, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed)
	t.Cleanup(cancel)
	ctx := context.Background()
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	})
	now := time.Now()
	address := uuid.NewString()[:12] + "@inbound.mailwatch.test"
	r, err := dbsqlc.New().ReceiverInsert(ctx, deps.Pool, dbsqlc.ReceiverInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: acct, Channel: receivers.ChannelEmail, Label: "analysis",
		Address: address, TtlSeconds: 3600, ExpiresAt: now.Add(time.Hour), CreatedAt: now,
	})
	require.NoError(t, err)
	env.To, env.Raw, env.ReceivedAt = []string{address}, []byte(strings.ReplaceAll(raw, "{{to}}", address)), now
	require.NoError(t, (&receivers.Store{DB: deps.Pool, Emitter: &events.Emitter{River: client}}).Deliver(ctx, env))
	var msgID uuid.UUID
	require.NoError(t, deps.Pool.QueryRow(ctx, `SELECT id FROM receiver_messages WHERE receiver_id = $1`, r.ID).Scan(&msgID))
	for ev := range done {
		if ev.Job.Kind != (receivers.AnalyzeArgs{}).Kind() {
			continue
		}
		require.Equal(t, rivertype.JobStateCompleted, ev.Job.State, "%v", ev.Job.Errors)
		break
	}
	return msgID
}

// fixedSpam is a content filter that scores every message res.
type fixedSpam struct {
	res  spamcheck.Result
	helo string
}

func (f *fixedSpam) Check(_ context.Context, _ []byte, env spamcheck.Envelope) (spamcheck.Result, error) {
	f.helo = env.Helo
	return f.res, nil
}

// The analysis looks the sending IP up on the workers' blocklists, through
// the cache the domains' checks share, and reports the listing; it raises
// no blocklist_listed (that is for domains watching an address).
func TestReceiverAnalyzeJobChecksBlocklists(t *testing.T) {
	t.Parallel()
	srv := dnstest.Start(t, `
sender.example.      TXT "v=spf1 ip4:192.0.2.10 -all"
2.0.0.127.bl.test.   300 A 127.0.0.2
10.2.0.192.bl.test.  300 A 127.0.0.2
`)
	lists, err := blocklist.ParseZones("bl.test")
	require.NoError(t, err)
	pool, _ := dbtest.NewDB(t)
	resolver := dnscheck.NewClient(srv.Addr(), 2*time.Second)
	deps := Deps{Pool: pool, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Resolver: resolver,
		Reputation: &reputation.Checker{Resolver: resolver, Lists: lists}}
	acct := testfactory.Account(t, pool)
	raw := "From: <news@sender.example>\r\nTo: {{to}}\r\nSubject: hi\r\nDate: Sat, 28 Nov 2026 10:00:00 +0000\r\n" +
		"Message-ID: <2@sender.example>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\nHello.\r\n"
	msgID := analyzeOne(t, deps, acct, raw, smtpd.Envelope{From: "bounce@sender.example", RemoteAddr: "192.0.2.10:41000", Helo: "mta.sender.example"})
	ctx := context.Background()
	row, err := dbsqlc.New().MessageAnalysisGet(ctx, pool, msgID)
	require.NoError(t, err)
	var rep deliverability.Report
	require.NoError(t, json.Unmarshal(row.Analysis, &rep))
	require.Equal(t, []deliverability.Listing{{List: "bl.test", Detail: "127.0.0.2"}}, rep.Listings)
	var ids []string
	for _, s := range rep.Sections {
		if s.Name == deliverability.SectionReputation {
			require.False(t, s.Skipped)
			for _, f := range s.Findings {
				ids = append(ids, f.ID)
			}
		}
	}
	require.Equal(t, []string{"ip_listed"}, ids)
	var cached int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM blocklist_lookups WHERE zone = 'bl.test' AND target = '192.0.2.10'`).Scan(&cached))
	require.Equal(t, 1, cached)
	require.Empty(t, eventsOf(t, pool, acct, events.TypeBlocklistListed))
}

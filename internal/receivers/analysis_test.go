package receivers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/smtpd"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

func TestAnalyzeMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	store := newStore(t, tx, now)
	acct := testfactory.Account(t, tx)
	r := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	srv := dnstest.Start(t, `
mailer.example.com.          TXT "v=spf1 ip4:127.0.0.1 -all"
1.0.0.127.in-addr.arpa.      PTR mta.mailer.example.com.
mta.mailer.example.com.      A   127.0.0.1
_dmarc.example.com.          TXT "v=DMARC1; p=reject"
`)
	resolver := dnscheck.NewClient(srv.Addr(), 2*time.Second)

	raw := []byte(strings.Replace(string(signupEmail(r.Address)), "Message-ID: <signup-1@example.com>", "Message-ID: bad-id", 1))
	require.NoError(t, store.Deliver(ctx, smtpd.Envelope{
		From: "bounce@mailer.example.com", To: []string{r.Address}, Raw: raw, ReceivedAt: now,
		RemoteAddr: "127.0.0.1:40000", Helo: "mta.mailer.example.com",
	}))
	msgs := messagesOf(t, tx, r.ID)
	require.Len(t, msgs, 1)

	// Before the job ran: pending, in the API's read and in listings.
	a, err := receivers.GetAnalysis(ctx, tx, acct, r.ID, msgs[0].ID, now)
	require.NoError(t, err)
	require.Equal(t, receivers.AnalysisPending, a.Status)
	sums, err := receivers.AnalysisSummaries(ctx, tx, r.ID, []uuid.UUID{msgs[0].ID})
	require.NoError(t, err)
	require.Equal(t, receivers.AnalysisPending, sums[msgs[0].ID].Status)

	rep, err := receivers.AnalyzeMessage(ctx, tx, store.Emitter, resolver, deliverability.Options{}, msgs[0].ID, now.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, deliverability.Verdicts{SPF: "pass", DKIM: "none", DMARC: "pass"}, rep.Verdicts)

	// The event is emitted in the storing transaction, with the verdicts.
	var payload map[string]any
	require.NoError(t, tx.QueryRow(ctx, `SELECT payload FROM events WHERE account_id = $1 AND event_type = 'receiver_message_analyzed'`, acct).Scan(&payload))
	require.Equal(t, map[string]any{
		"receiver_id": r.ID.String(), "message_id": msgs[0].ID.String(), "grade": rep.Grade, "score": float64(rep.Score),
		"spf": "pass", "dkim": "none", "dmarc": "pass",
	}, payload)

	// A retried job (its commit landed, its completion did not) stores
	// nothing more and emits no second event.
	again, err := receivers.AnalyzeMessage(ctx, tx, store.Emitter, resolver, deliverability.Options{}, msgs[0].ID, now.Add(time.Minute))
	require.NoError(t, err)
	require.Nil(t, again)
	var analyzed int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM events WHERE account_id = $1 AND event_type = 'receiver_message_analyzed'`, acct).Scan(&analyzed))
	require.Equal(t, 1, analyzed)

	a, err = receivers.GetAnalysis(ctx, tx, acct, r.ID, msgs[0].ID, now)
	require.NoError(t, err)
	require.Equal(t, receivers.AnalysisDone, a.Status)
	require.Equal(t, rep.Grade, a.Report.Grade)
	require.True(t, a.AnalyzedAt.Equal(now.Add(time.Second)))
	sums, err = receivers.AnalysisSummaries(ctx, tx, r.ID, []uuid.UUID{msgs[0].ID})
	require.NoError(t, err)
	sum := sums[msgs[0].ID]
	require.Equal(t, receivers.AnalysisDone, sum.Status)
	require.Equal(t, rep.Grade, *sum.Grade)
	require.Equal(t, rep.Score, *sum.Score)
	require.Equal(t, rep.Verdicts, *sum.Verdicts)
	// Another account's receiver does not show it.
	_, err = receivers.GetAnalysis(ctx, tx, testfactory.Account(t, tx), r.ID, msgs[0].ID, now)
	require.ErrorIs(t, err, receivers.ErrNotFound)
	require.Equal(t, "pass", string(rep.Auth.SPF.Status))

	row, err := dbsqlc.New().MessageAnalysisGet(ctx, tx, msgs[0].ID)
	require.NoError(t, err)
	require.NotNil(t, row.AnalyzedAt)
	require.True(t, row.AnalyzedAt.Equal(now.Add(time.Second)))
	var stored deliverability.Report
	require.NoError(t, json.Unmarshal(row.Analysis, &stored))
	require.Equal(t, rep.Grade, stored.Grade)
	require.Equal(t, rep.Score, stored.Score)
	require.Equal(t, "pass", string(stored.Auth.SPF.Status))
	require.Equal(t, "pass", stored.Auth.ReverseDNS.Result)
	require.Equal(t, "127.0.0.1", stored.Session.ClientIP.String())
	require.Contains(t, string(row.Analysis), "message_id_invalid")
	require.Contains(t, string(row.Analysis), "tls_none")
	// Unsigned, but the MAIL FROM domain mailer.example.com passes SPF and
	// aligns (relaxed) with From: ann@example.com.
	require.Equal(t, "pass", stored.Auth.DMARC.Result)
	require.True(t, stored.Auth.DMARC.SPFAligned)

	// A message from the ingress webhook has no session: nothing to do.
	out, err := store.DeliverEmail(ctx, receivers.EmailDelivery{Raw: signupEmail(r.Address), Recipients: []string{r.Address}})
	require.NoError(t, err)
	rep, err = receivers.AnalyzeMessage(ctx, tx, store.Emitter, resolver, deliverability.Options{}, out[0].MessageID, now)
	require.NoError(t, err)
	require.Nil(t, rep)
	row, err = dbsqlc.New().MessageAnalysisGet(ctx, tx, out[0].MessageID)
	require.NoError(t, err)
	require.Nil(t, row.Analysis)
	require.Nil(t, row.AnalyzedAt)
	a, err = receivers.GetAnalysis(ctx, tx, acct, r.ID, out[0].MessageID, now)
	require.NoError(t, err)
	require.Equal(t, receivers.AnalysisNotApplicable, a.Status)
	require.Contains(t, a.Reason, "webhook")

	// A message deleted since.
	_, err = receivers.AnalyzeMessage(ctx, tx, store.Emitter, resolver, deliverability.Options{}, uuid.Must(uuid.NewV7()), now)
	require.True(t, dbutil.IsNotFound(err), "%v", err)
}

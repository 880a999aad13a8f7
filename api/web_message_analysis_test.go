package api_test

import (
	"context"
	"html"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/receivers"
)

// The dashboard's message page shows the analysis: pending, then the
// grade, the verdicts and each finding with its fix; not applicable with
// the reason for a webhook message.
func TestDashboardMessageAnalysis(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	store := testStore(t, b.db)
	resolver := dnscheck.NewClient(dnstest.Start(t, analysisZone).Addr(), 2*time.Second)
	r := b.createReceiver(t, acct.Key, nil)
	id := b.smtpMessage(t, store, acct.Key, r)
	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")
	page := "/receivers/" + r.ID + "/messages/" + id

	resp, body := w.req("GET", page, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<h2 id="deliverability-title">Deliverability</h2>`)
	require.Contains(t, body, `<p role="status">The analysis is running`)

	rep := analyze(t, b.db, store, resolver, id)
	_, body = w.req("GET", page, nil)
	require.Contains(t, body, `<strong class="grade" aria-label="grade `+rep.Grade+`">`+rep.Grade+`</strong>`)
	require.Contains(t, body, `<tr><th scope="row">SPF (MAIL FROM)</th><td>pass</td></tr>`)
	require.Contains(t, body, `<tr><th scope="row">DKIM</th><td>none</td></tr>`)
	w1, _ := deliverability.WeightOf("dkim_none")
	require.Contains(t, body, "<code>dkim_none</code>")
	require.Contains(t, body, "Fix: "+html.EscapeString(w1.Fix))
	require.Contains(t, body, "Skipped: no blocklist catalog is configured")

	d, err := store.DeliverEmail(context.Background(), receivers.EmailDelivery{
		Raw: []byte("From: a@example.com\r\nSubject: hook\r\n\r\nbody\r\n"), Recipients: []string{r.Address}, ReceivedAt: time.Now(),
	})
	require.NoError(t, err)
	_, body = w.req("GET", "/receivers/"+r.ID+"/messages/"+d[0].MessageID.String(), nil)
	require.Contains(t, body, "Not analysed: the message came through the email ingress webhook")
}

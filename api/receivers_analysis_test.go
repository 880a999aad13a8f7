package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/dnscheck"
	"github.com/mailwatch/mailwatch/internal/dnstest"
	"github.com/mailwatch/mailwatch/internal/receivers"
)

// analysisZone makes mail from sender@mailer.example sent from 127.0.0.1
// pass SPF and DMARC (unsigned: DKIM none).
const analysisZone = `
mailer.example.          TXT "v=spf1 ip4:127.0.0.1 -all"
_dmarc.mailer.example.   TXT "v=DMARC1; p=reject"
`

const analysisMail = "From: Mailer <news@mailer.example>\nSubject: Welcome\nDate: Sat, 28 Nov 2026 10:00:00 +0000\n" +
	"Message-ID: <w-1@mailer.example>\nMIME-Version: 1.0\nX-Campaign: spring-2026\n\nHello. See https://mailer.example/a and https://mailer.example/b\n"

type analysisSummaryJSON struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
	Grade  string `json:"grade"`
	Score  *int   `json:"score"`
	SPF    string `json:"spf"`
	DKIM   string `json:"dkim"`
	DMARC  string `json:"dmarc"`
}

type analysisJSON struct {
	Status         string     `json:"status"`
	Reason         string     `json:"reason"`
	AnalyzedAt     *time.Time `json:"analyzed_at"`
	Grade          string     `json:"grade"`
	Score          int        `json:"score"`
	Authentication struct {
		SPF struct {
			Status string `json:"status"`
		} `json:"spf"`
	} `json:"authentication"`
	Verdicts deliverability.Verdicts `json:"verdicts"`
	Sections []struct {
		Name     string `json:"name"`
		Findings []struct {
			ID  string `json:"id"`
			Fix string `json:"fix"`
		} `json:"findings"`
	} `json:"sections"`
}

type assertJSON struct {
	Pass           bool   `json:"pass"`
	AnalysisStatus string `json:"analysis_status"`
	Results        []struct {
		Type   string `json:"type"`
		Pass   bool   `json:"pass"`
		Reason string `json:"reason"`
		Actual string `json:"actual"`
	} `json:"results"`
}

// smtpMessage sends analysisMail over real SMTP from 127.0.0.1 and returns
// the stored message's id.
func (b *testBundle) smtpMessage(t *testing.T, store *receivers.Store, key string, r receiverJSON) string {
	t.Helper()
	addr := startSMTP(t, store, 0)
	require.NoError(t, sendMail(addr, "sender@mailer.example", []string{r.Address}, "To: "+r.Address+"\n"+analysisMail))
	resp := b.do(t, "GET", receiverPath(r.ID, "/messages?limit=1"), key, nil)
	var list []struct {
		ID       string              `json:"id"`
		Analysis analysisSummaryJSON `json:"analysis"`
	}
	resp.JSON(t, &list)
	require.Len(t, list, 1)
	require.Equal(t, "pending", list[0].Analysis.Status, "listed before the job ran")
	return list[0].ID
}

// analyze runs the analysis job's work on a message.
func analyze(t *testing.T, db dbutil.Executor, store *receivers.Store, resolver deliverability.Resolver, id string) *deliverability.Report {
	t.Helper()
	rep, err := receivers.AnalyzeMessage(context.Background(), db, store.Emitter, resolver, deliverability.Options{}, uuid.MustParse(id), time.Now())
	require.NoError(t, err)
	require.NotNil(t, rep)
	return rep
}

func TestReceiverMessageAnalysis(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	store := testStore(t, b.db)
	resolver := dnscheck.NewClient(dnstest.Start(t, analysisZone).Addr(), 2*time.Second)
	r := b.createReceiver(t, acct.Key, nil)
	id := b.smtpMessage(t, store, acct.Key, r)

	var a analysisJSON
	resp := b.do(t, "GET", receiverPath(r.ID, "/messages/", id, "/analysis"), acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp.JSON(t, &a)
	require.Equal(t, "pending", a.Status)
	require.Nil(t, a.AnalyzedAt)
	require.JSONEq(t, `{"status":"pending"}`, string(resp.Body))

	rep := analyze(t, b.db, store, resolver, id)
	resp = b.do(t, "GET", receiverPath(r.ID, "/messages/", id, "/analysis"), acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	a = analysisJSON{}
	resp.JSON(t, &a)
	require.Equal(t, "done", a.Status)
	require.NotNil(t, a.AnalyzedAt)
	require.Equal(t, rep.Grade, a.Grade)
	require.Equal(t, rep.Score, a.Score)
	require.Equal(t, "pass", a.Authentication.SPF.Status)
	require.Equal(t, deliverability.Verdicts{SPF: "pass", DKIM: "none", DMARC: "pass"}, a.Verdicts)
	require.Len(t, a.Sections, 5, "authentication, reputation, spam, headers, content")
	require.NotEmpty(t, a.Sections[0].Findings, "dkim_none at least")
	require.NotEmpty(t, a.Sections[0].Findings[0].Fix)

	// The grade and verdicts in the listing and the message view.
	want := analysisSummaryJSON{Status: "done", Grade: rep.Grade, Score: &rep.Score, SPF: "pass", DKIM: "none", DMARC: "pass"}
	var list []struct {
		Analysis analysisSummaryJSON `json:"analysis"`
	}
	b.do(t, "GET", receiverPath(r.ID, "/messages"), acct.Key, nil).JSON(t, &list)
	require.Len(t, list, 1)
	require.Equal(t, want, list[0].Analysis)
	var m struct {
		Analysis analysisSummaryJSON `json:"analysis"`
	}
	b.do(t, "GET", receiverPath(r.ID, "/messages/", id), acct.Key, nil).JSON(t, &m)
	require.Equal(t, want, m.Analysis)

	// A message from the ingress webhook has no session: not applicable.
	d, err := store.DeliverEmail(context.Background(), receivers.EmailDelivery{
		Raw: []byte("From: a@example.com\r\nSubject: hook\r\n\r\nbody\r\n"), Recipients: []string{r.Address}, ReceivedAt: time.Now(),
	})
	require.NoError(t, err)
	hook := d[0].MessageID.String()
	a = analysisJSON{}
	b.do(t, "GET", receiverPath(r.ID, "/messages/", hook, "/analysis"), acct.Key, nil).JSON(t, &a)
	require.Equal(t, "not_applicable", a.Status)
	require.Contains(t, a.Reason, "ingress webhook")
	b.do(t, "GET", receiverPath(r.ID, "/messages/", hook), acct.Key, nil).JSON(t, &m)
	require.Equal(t, "not_applicable", m.Analysis.Status)

	// Another account's receiver or message: 404.
	intruder := b.createAccount(t)
	for _, c := range []struct{ method, path string }{
		{"GET", receiverPath(r.ID, "/messages/", id, "/analysis")},
		{"POST", receiverPath(r.ID, "/messages/", id, "/assertions")},
	} {
		resp := b.do(t, c.method, c.path, intruder.Key, map[string]any{"assertions": []any{map[string]any{"type": "spf_pass"}}})
		require.Equal(t, http.StatusNotFound, resp.Status, "%s %s", c.method, c.path)
	}
	other := b.createReceiver(t, acct.Key, nil)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", receiverPath(other.ID, "/messages/", id, "/analysis"), acct.Key, nil).Status)
}

func TestReceiverMessageAssertions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	store := testStore(t, b.db)
	resolver := dnscheck.NewClient(dnstest.Start(t, analysisZone).Addr(), 2*time.Second)
	r := b.createReceiver(t, acct.Key, nil)
	id := b.smtpMessage(t, store, acct.Key, r)
	path := receiverPath(r.ID, "/messages/", id, "/assertions")

	// Pending, no wait: the analysis's assertions fail with the reason,
	// the message's own are judged.
	var got assertJSON
	resp := b.do(t, "POST", path, acct.Key, map[string]any{"timeout": 0, "assertions": []any{
		map[string]any{"type": "spf_pass"}, map[string]any{"type": "link_count_at_least", "limit": 2},
	}})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp.JSON(t, &got)
	require.False(t, got.Pass)
	require.Equal(t, "pending", got.AnalysisStatus)
	require.Contains(t, got.Results[0].Reason, "still pending")
	require.True(t, got.Results[1].Pass, "%+v", got.Results[1])

	rep := analyze(t, b.db, store, resolver, id)
	assertions := []any{
		map[string]any{"type": "spf_pass"},
		map[string]any{"type": "dkim_pass"},
		map[string]any{"type": "dmarc_pass"},
		map[string]any{"type": "spam_score_at_most", "limit": 5},
		map[string]any{"type": "not_blocklisted"},
		map[string]any{"type": "header_equals", "name": "x-campaign", "value": "spring-2026"},
		map[string]any{"type": "header_contains", "name": "Subject", "value": "Welc"},
		map[string]any{"type": "header_absent", "name": "List-Unsubscribe"},
		map[string]any{"type": "one_click_unsubscribe"},
		map[string]any{"type": "link_count_at_most", "limit": 2},
		map[string]any{"type": "size_at_most", "limit": 100000},
		map[string]any{"type": "grade_at_least", "value": "F"},
		map[string]any{"type": "no_such_check"},
	}
	got = assertJSON{}
	resp = b.do(t, "POST", path, acct.Key, map[string]any{"assertions": assertions})
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	resp.JSON(t, &got)
	require.Equal(t, "done", got.AnalysisStatus)
	require.False(t, got.Pass)
	require.Len(t, got.Results, len(assertions))
	passed := map[string]bool{}
	for _, res := range got.Results {
		passed[res.Type] = res.Pass
	}
	require.Equal(t, map[string]bool{
		"spf_pass": true, "dkim_pass": false, "dmarc_pass": true, "spam_score_at_most": false, "not_blocklisted": false,
		"header_equals": true, "header_contains": true, "header_absent": true, "one_click_unsubscribe": false,
		"link_count_at_most": true, "size_at_most": true, "grade_at_least": true, "no_such_check": false,
	}, passed)
	require.Equal(t, "DKIM is none, not pass", got.Results[1].Reason)
	require.Contains(t, got.Results[3].Reason, "no spam score")
	require.Contains(t, got.Results[4].Reason, "blocklist check did not run")
	require.Equal(t, rep.Grade, got.Results[11].Actual)
	require.Contains(t, got.Results[12].Reason, "unknown assertion type")

	// Bounds: at most 50 assertions, values bounded.
	many := make([]any, 51)
	for i := range many {
		many[i] = map[string]any{"type": "spf_pass"}
	}
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "POST", path, acct.Key, map[string]any{"assertions": many}).Status)
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "POST", path, acct.Key, map[string]any{"assertions": []any{}}).Status)
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "POST", path, acct.Key, map[string]any{
		"timeout": 31, "assertions": []any{map[string]any{"type": "spf_pass"}},
	}).Status)
}

// TestReceiverMessageAssertionsWait: a pending analysis is waited for; the
// analysis job's transaction wakes the waiting request through the hub.
func TestReceiverMessageAssertionsWait(t *testing.T) {
	t.Parallel()
	pool, url := dbtest.NewDB(t)
	b, hub := committedBundle(t, pool, url)
	store := testStore(t, pool)
	acct := b.createAccount(t)
	resolver := dnscheck.NewClient(dnstest.Start(t, analysisZone).Addr(), 2*time.Second)
	r := b.createReceiver(t, acct.Key, nil)
	id := b.smtpMessage(t, store, acct.Key, r)

	out := make(chan response, 1)
	go func() {
		out <- b.do(t, "POST", receiverPath(r.ID, "/messages/", id, "/assertions"), acct.Key, map[string]any{
			"timeout": 30, "assertions": []any{map[string]any{"type": "spf_pass"}},
		})
	}()
	rcvEventually(t, "the assertion request to wait", func() bool { return hub.Len() == 1 })
	analyze(t, pool, store, resolver, id)
	resp := <-out
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	var got assertJSON
	resp.JSON(t, &got)
	require.Equal(t, "done", got.AnalysisStatus)
	require.True(t, got.Pass, "%+v", got.Results)
}

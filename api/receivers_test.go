package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/smtpd"
	"github.com/mailwatch/mailwatch/jobs"
)

const testInboundDomain = "inbound.mailwatch.test"

type receiverJSON struct {
	ID           string    `json:"id"`
	Channel      string    `json:"channel"`
	Label        string    `json:"label"`
	Address      string    `json:"address"`
	TTLSeconds   int       `json:"ttl_seconds"`
	ExpiresAt    time.Time `json:"expires_at"`
	CreatedAt    time.Time `json:"created_at"`
	Expired      bool      `json:"expired"`
	MessageCount int       `json:"message_count"`
}

type messageJSON struct {
	ID         string `json:"id"`
	ReceiverID string `json:"receiver_id"`
	Channel    string `json:"channel"`
	Sender     string `json:"sender"`
	From       struct {
		Name    string `json:"name"`
		Address string `json:"address"`
	} `json:"from"`
	Recipients  []string `json:"recipients"`
	Subject     string   `json:"subject"`
	Text        string   `json:"text"`
	HTML        string   `json:"html"`
	Headers     []struct{ Name, Value string }
	Attachments []struct {
		Filename    string `json:"filename"`
		ContentType string `json:"content_type"`
		Size        int    `json:"size"`
		Disposition string `json:"disposition"`
	} `json:"attachments"`
	Links      []string  `json:"links"`
	Codes      []string  `json:"codes"`
	SizeBytes  int       `json:"size_bytes"`
	ReceivedAt time.Time `json:"received_at"`
}

func (b *testBundle) createReceiver(t *testing.T, key string, body any) receiverJSON {
	t.Helper()
	resp := b.do(t, "POST", "/api/accounts/me/receivers", key, body)
	require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
	var r receiverJSON
	resp.JSON(t, &r)
	return r
}

func receiverPath(id string, rest ...string) string {
	return "/api/accounts/me/receivers/" + id + strings.Join(rest, "")
}

// testStore is the Postgres store the SMTP listener and tests deliver
// through, on db.
func testStore(t *testing.T, db dbutil.Executor) *receivers.Store {
	t.Helper()
	riverClient, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	return &receivers.Store{DB: db, Emitter: &events.Emitter{River: riverClient}}
}

// startSMTP serves the real listener on loopback, wired to the store, and
// returns its address.
func startSMTP(t *testing.T, store smtpd.Store, maxBytes int64) string {
	t.Helper()
	srv, err := smtpd.NewServer(smtpd.Config{Domain: testInboundDomain, MaxMessageBytes: maxBytes}, store, nil)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String()
}

// sendMail runs one SMTP session.
func sendMail(addr, from string, to []string, raw string) error {
	raw = strings.ReplaceAll(strings.ReplaceAll(raw, "\r\n", "\n"), "\n", "\r\n")
	return smtp.SendMail(addr, nil, from, to, []byte(raw))
}

// sqlExec runs a statement on the bundle's database (test set-up only).
func (b *testBundle) rcvExec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.db.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func rcvTestdata(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile("../internal/inbound/testdata/" + name)
	require.NoError(t, err)
	return string(raw)
}

func TestReceiverLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)

	t.Run("DefaultsFromAnEmptyBody", func(t *testing.T) {
		resp := b.do(t, "POST", "/api/accounts/me/receivers", acct.Key, nil)
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var r receiverJSON
		resp.JSON(t, &r)
		require.Equal(t, "email", r.Channel)
		require.Equal(t, 3600, r.TTLSeconds)
		require.True(t, strings.HasSuffix(r.Address, "@"+testInboundDomain), r.Address)
		require.WithinDuration(t, r.CreatedAt.Add(time.Hour), r.ExpiresAt, time.Second)
		require.False(t, r.Expired)
	})

	t.Run("Validation", func(t *testing.T) {
		for _, body := range []string{`{"ttl_seconds":59}`, `{"ttl_seconds":604801}`, `{"ttl_seconds":0}`, `{"channel":"fax"}`,
			`{"label":"` + strings.Repeat("x", 101) + `"}`} {
			resp := b.do(t, "POST", "/api/accounts/me/receivers", acct.Key, body)
			require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "%s -> %s", body, resp.Body)
			resp.Detail(t)
		}
		resp := b.do(t, "POST", "/api/accounts/me/receivers", acct.Key, `{"ttl_seconds":"x"}`)
		require.Equal(t, http.StatusBadRequest, resp.Status)
	})

	r := b.createReceiver(t, acct.Key, map[string]any{"label": "signup test", "ttl_seconds": 60})
	require.Equal(t, "signup test", r.Label)
	require.Equal(t, 60, r.TTLSeconds)

	resp := b.do(t, "GET", receiverPath(r.ID), acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)

	t.Run("ListNewestFirstWithCursor", func(t *testing.T) {
		other := b.createAccount(t)
		var ids []string
		for i := 0; i < 3; i++ {
			ids = append(ids, b.createReceiver(t, other.Key, nil).ID)
		}
		resp := b.do(t, "GET", "/api/accounts/me/receivers?limit=2", other.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status)
		var page []receiverJSON
		resp.JSON(t, &page)
		require.Len(t, page, 2)
		require.Equal(t, ids[2], page[0].ID)
		cursor := resp.Header.Get("X-Next-Cursor")
		require.Equal(t, ids[1], cursor)
		require.Equal(t, "/api/accounts/me/receivers?cursor="+cursor+"&limit=2", nextLink(t, resp))
		resp = b.do(t, "GET", nextLink(t, resp), other.Key, nil)
		resp.JSON(t, &page)
		require.Len(t, page, 1)
		require.Equal(t, ids[0], page[0].ID)
		lastPage(t, resp)
		require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "GET", "/api/accounts/me/receivers?limit=0", other.Key, nil).Status)
	})

	t.Run("ExpiredAnswers410EverywhereThenPurged404", func(t *testing.T) {
		x := b.createReceiver(t, acct.Key, nil)
		b.rcvExec(t, "UPDATE receivers SET expires_at = now() - interval '1 second' WHERE id = $1", x.ID)
		for _, c := range []struct{ method, path string }{
			{"GET", receiverPath(x.ID)},
			{"DELETE", receiverPath(x.ID)},
			{"GET", receiverPath(x.ID, "/messages")},
			{"GET", receiverPath(x.ID, "/wait?timeout=1")},
		} {
			resp := b.do(t, c.method, c.path, acct.Key, nil)
			require.Equal(t, http.StatusGone, resp.Status, "%s %s: %s", c.method, c.path, resp.Body)
			require.Contains(t, resp.Detail(t), "expired")
		}
		resp := b.do(t, "GET", "/api/accounts/me/receivers", acct.Key, nil)
		require.Contains(t, string(resp.Body), `"expired":true`)

		// The expiry job keeps it for the grace period, then purges it.
		_, err := receivers.Expire(context.Background(), b.db, time.Now())
		require.NoError(t, err)
		require.Equal(t, http.StatusGone, b.do(t, "GET", receiverPath(x.ID), acct.Key, nil).Status)
		res, err := receivers.Expire(context.Background(), b.db, time.Now().Add(receivers.PurgeGrace+time.Second))
		require.NoError(t, err)
		require.GreaterOrEqual(t, res.Purged, int64(1))
		require.Equal(t, http.StatusNotFound, b.do(t, "GET", receiverPath(x.ID), acct.Key, nil).Status)
	})

	resp = b.do(t, "DELETE", receiverPath(r.ID), acct.Key, nil)
	require.Equal(t, http.StatusNoContent, resp.Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", receiverPath(r.ID), acct.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", receiverPath("not-a-uuid"), acct.Key, nil).Status)
}

func TestReceiverDashboard(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	r := b.createReceiver(t, acct.Key, nil)
	b.createReceiver(t, acct.Key, nil)
	expired := b.createReceiver(t, acct.Key, nil)
	b.rcvExec(t, "UPDATE receivers SET expires_at = now() - interval '1 second' WHERE id = $1", expired.ID)
	_, err := testStore(t, b.db).DeliverEmail(context.Background(), receivers.EmailDelivery{
		Raw: []byte("From: a@example.com\r\nSubject: hi\r\n\r\nbody\r\n"), Recipients: []string{r.Address}, ReceivedAt: time.Now(),
	})
	require.NoError(t, err)
	resp := b.do(t, "GET", "/api/accounts/me/dashboard-summary", acct.Key, nil)
	require.Equal(t, http.StatusOK, resp.Status)
	var out struct {
		Receivers struct {
			Active          int `json:"active"`
			MessagesLast24h int `json:"messages_last_24h"`
		} `json:"receivers"`
	}
	resp.JSON(t, &out)
	require.Equal(t, 2, out.Receivers.Active)
	require.Equal(t, 1, out.Receivers.MessagesLast24h)

	// Messages per day: today's message, every day listed; the receiver
	// deleted, it still counts (the counts say what arrived).
	daily := func(key string) api.ReceiverDaily {
		t.Helper()
		resp := b.do(t, "GET", "/api/accounts/me/receivers/daily-volume?days=3", key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var d api.ReceiverDaily
		resp.JSON(t, &d)
		require.Len(t, d.Days, 3)
		return d
	}
	today := time.Now().UTC().Format(time.DateOnly)
	require.Equal(t, api.ReceiverDayCount{Date: today, Messages: 1, Email: 1}, daily(acct.Key).Days[2])
	require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", receiverPath(r.ID), acct.Key, nil).Status)
	require.Equal(t, int64(1), daily(acct.Key).Days[2].Messages)
	require.Zero(t, daily(b.createAccount(t).Key).Days[2].Messages, "another account counts its own")
	require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "GET", "/api/accounts/me/receivers/daily-volume?days=91", acct.Key, nil).Status)

	// The receivers page charts them, with the table.
	w := newWebClient(t, b)
	w.signIn(acct.Email, "correct horse battery")
	_, page := w.req("GET", "/receivers", nil)
	require.Contains(t, page, `<title id="receiver-chart-t">Messages received per day, last 14 days</title>`)
	require.Regexp(t, `(?s)id="receiver-chart".*?<tr><td>`+time.Now().UTC().Format("Jan 2")+`</td><td>1</td><td>0</td></tr></tbody>`, page)
}

// TestReceiverSMTP sends real SMTP sessions to the listener, wired to the
// Postgres store, and reads the results through the API.
func TestReceiverSMTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	store := testStore(t, b.db)
	addr := startSMTP(t, store, 64<<10)
	r := b.createReceiver(t, acct.Key, map[string]any{"label": "smtp"})

	deliver := func(t *testing.T, raw string) messageJSON {
		t.Helper()
		require.NoError(t, sendMail(addr, "sender@example.org", []string{strings.ToUpper(r.Address)}, raw))
		resp := b.do(t, "GET", receiverPath(r.ID, "/messages?limit=1"), acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var list []struct {
			ID string `json:"id"`
		}
		resp.JSON(t, &list)
		require.Len(t, list, 1)
		resp = b.do(t, "GET", receiverPath(r.ID, "/messages/", list[0].ID), acct.Key, nil)
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		var m messageJSON
		resp.JSON(t, &m)
		return m
	}

	t.Run("MultipartWithAttachment", func(t *testing.T) {
		m := deliver(t, rcvTestdata(t, "multipart-alternative-attachment.eml"))
		require.Equal(t, "sender@example.org", m.Sender)
		require.Len(t, m.Recipients, 1)
		require.True(t, strings.EqualFold(r.Address, m.Recipients[0]), "recipients are the envelope's: %v", m.Recipients)
		require.NotEmpty(t, m.Subject)
		require.NotEmpty(t, m.Text)
		require.NotEmpty(t, m.HTML)
		require.NotEmpty(t, m.Attachments)
		require.Equal(t, "attachment", m.Attachments[0].Disposition)
		require.NotEmpty(t, m.Headers)
		require.Equal(t, "Return-Path", m.Headers[0].Name, "the listener's trace fields come first")

		raw := b.do(t, "GET", receiverPath(r.ID, "/messages/", m.ID, "/raw"), acct.Key, nil)
		require.Equal(t, http.StatusOK, raw.Status)
		require.Equal(t, "message/rfc822", raw.Header.Get("Content-Type"))
		require.Equal(t, "nosniff", raw.Header.Get("X-Content-Type-Options"))
		require.Equal(t, `attachment; filename="message-`+m.ID+`.eml"`, raw.Header.Get("Content-Disposition"))
		require.True(t, bytes.HasPrefix(raw.Body, []byte("Return-Path: <sender@example.org>")), "%.80s", raw.Body)
		require.Equal(t, m.SizeBytes, len(raw.Body))
	})

	t.Run("NonUTF8Charset", func(t *testing.T) {
		m := deliver(t, rcvTestdata(t, "iso-8859-1.eml"))
		require.True(t, strings.ContainsAny(m.Subject+m.Text, "éèàçüö"), "decoded to UTF-8: %q / %q", m.Subject, m.Text)
	})

	t.Run("LinksAndCodes", func(t *testing.T) {
		m := deliver(t, "From: Shop <no-reply@shop.example>\nTo: "+r.Address+"\nSubject: Your verification code\n\n"+
			"Your verification code is 482913.\nConfirm at https://shop.example/confirm?t=abc\n")
		require.Equal(t, []string{"482913"}, m.Codes)
		require.Equal(t, []string{"https://shop.example/confirm?t=abc"}, m.Links)
		require.Equal(t, "Shop", m.From.Name)
	})

	t.Run("OverTheSizeCap", func(t *testing.T) {
		err := sendMail(addr, "sender@example.org", []string{r.Address}, "Subject: big\n\n"+strings.Repeat("x", 70<<10)+"\n")
		require.ErrorContains(t, err, "552")
	})

	t.Run("UnknownRecipient", func(t *testing.T) {
		err := sendMail(addr, "sender@example.org", []string{"nobody@" + testInboundDomain}, "Subject: x\n\nx\n")
		require.ErrorContains(t, err, "550")
	})

	t.Run("ExpiredRecipient", func(t *testing.T) {
		x := b.createReceiver(t, acct.Key, nil)
		b.rcvExec(t, "UPDATE receivers SET expires_at = now() - interval '1 second' WHERE id = $1", x.ID)
		err := sendMail(addr, "sender@example.org", []string{x.Address}, "Subject: x\n\nx\n")
		require.ErrorContains(t, err, "550")
	})

	t.Run("OneRowPerReceiver", func(t *testing.T) {
		other := b.createAccount(t)
		r2 := b.createReceiver(t, other.Key, nil)
		r3 := b.createReceiver(t, acct.Key, nil)
		require.NoError(t, sendMail(addr, "s@example.org", []string{r2.Address, r3.Address, r2.Address}, "Subject: both\n\nhello\n"))
		for _, c := range []struct {
			key string
			id  string
		}{{other.Key, r2.ID}, {acct.Key, r3.ID}} {
			resp := b.do(t, "GET", receiverPath(c.id, "/messages"), c.key, nil)
			var list []struct {
				Subject string `json:"subject"`
			}
			resp.JSON(t, &list)
			require.Len(t, list, 1)
			require.Equal(t, "both", list[0].Subject)
		}
		// The arrival is an event of each account.
		resp := b.do(t, "GET", "/api/accounts/me/events?event_type=receiver_message_received", other.Key, nil)
		if resp.Status == http.StatusOK {
			require.Contains(t, string(resp.Body), r2.ID)
		}
	})

	t.Run("ListOrderAndCursor", func(t *testing.T) {
		x := b.createReceiver(t, acct.Key, nil)
		for i := 0; i < 3; i++ {
			require.NoError(t, sendMail(addr, "s@example.org", []string{x.Address}, fmt.Sprintf("Subject: m%d\n\nx\n", i)))
		}
		subjects := func(resp response) []string {
			var list []struct {
				Subject string `json:"subject"`
			}
			resp.JSON(t, &list)
			var out []string
			for _, m := range list {
				out = append(out, m.Subject)
			}
			return out
		}
		resp := b.do(t, "GET", receiverPath(x.ID, "/messages?limit=2"), acct.Key, nil)
		require.Equal(t, []string{"m2", "m1"}, subjects(resp))
		resp = b.do(t, "GET", nextLink(t, resp), acct.Key, nil)
		require.Equal(t, []string{"m0"}, subjects(resp))
		lastPage(t, resp)
		resp = b.do(t, "GET", receiverPath(x.ID, "/messages?order=asc&limit=2"), acct.Key, nil)
		require.Equal(t, []string{"m0", "m1"}, subjects(resp))
		require.Equal(t, receiverPath(x.ID, "/messages?cursor="+resp.Header.Get("X-Next-Cursor")+"&limit=2&order=asc"), nextLink(t, resp))
		require.Equal(t, []string{"m2"}, subjects(b.do(t, "GET", nextLink(t, resp), acct.Key, nil)))
		resp = b.do(t, "GET", receiverPath(x.ID, "/messages?order=asc&cursor="+resp.Header.Get("X-Next-Cursor")), acct.Key, nil)
		require.Equal(t, []string{"m2"}, subjects(resp))
	})
}

func TestReceiverMessageDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	r := b.createReceiver(t, acct.Key, nil)
	d, err := testStore(t, b.db).DeliverEmail(context.Background(), receivers.EmailDelivery{
		Raw: []byte("From: a@example.com\r\nSubject: hi\r\n\r\nbody\r\n"), Recipients: []string{r.Address}, ReceivedAt: time.Now(),
	})
	require.NoError(t, err)
	id := d[0].MessageID.String()

	resp := b.do(t, "DELETE", receiverPath(r.ID, "/messages/", id), acct.Key, nil)
	require.Equal(t, http.StatusNoContent, resp.Status, "%s", resp.Body)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", receiverPath(r.ID, "/messages/", id), acct.Key, nil).Status)
	require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", receiverPath(r.ID, "/messages/", id), acct.Key, nil).Status)

	// The audit event was written in the same transaction, with the key.
	var payload string
	require.NoError(t, b.db.QueryRow(context.Background(),
		"SELECT payload::text FROM events WHERE account_id = $1 AND event_type = 'message_deleted'", acct.ID).Scan(&payload))
	require.Contains(t, payload, id)
	require.Contains(t, payload, acct.Key[:7])
}

// TestReceiverTenantIsolation: another account's receiver and messages are
// 404 on every route.
func TestReceiverTenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	owner := b.createAccount(t)
	intruder := b.createAccount(t)
	r := b.createReceiver(t, owner.Key, nil)
	d, err := testStore(t, b.db).DeliverEmail(context.Background(), receivers.EmailDelivery{
		Raw: []byte("Subject: secret\r\n\r\nx\r\n"), Recipients: []string{r.Address}, ReceivedAt: time.Now(),
	})
	require.NoError(t, err)
	mid := d[0].MessageID.String()
	for _, c := range []struct{ method, path string }{
		{"GET", receiverPath(r.ID)},
		{"DELETE", receiverPath(r.ID)},
		{"GET", receiverPath(r.ID, "/messages")},
		{"GET", receiverPath(r.ID, "/messages/", mid)},
		{"GET", receiverPath(r.ID, "/messages/", mid, "/raw")},
		{"DELETE", receiverPath(r.ID, "/messages/", mid)},
		{"GET", receiverPath(r.ID, "/wait?timeout=1")},
	} {
		resp := b.do(t, c.method, c.path, intruder.Key, nil)
		require.Equal(t, http.StatusNotFound, resp.Status, "%s %s", c.method, c.path)
		resp.Detail(t)
	}
	resp := b.do(t, "GET", "/api/accounts/me/receivers", intruder.Key, nil)
	require.Equal(t, "[]", strings.TrimSpace(string(resp.Body)))
	// The owner still has everything.
	require.Equal(t, http.StatusOK, b.do(t, "GET", receiverPath(r.ID, "/messages/", mid), owner.Key, nil).Status)
	// Another receiver of the owner does not expose the message either.
	r2 := b.createReceiver(t, owner.Key, nil)
	require.Equal(t, http.StatusNotFound, b.do(t, "GET", receiverPath(r2.ID, "/messages/", mid), owner.Key, nil).Status)
}

// committedBundle is an API server on a database of its own with a real
// LISTEN hub, for tests that need committed data and notifications.
func committedBundle(t *testing.T, pool *pgxpool.Pool, url string) (*testBundle, *receivers.Hub) {
	t.Helper()
	hub := receivers.NewHub(receivers.ConnectURL(url), nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-hub.Ready()
	b := setup(t, func(o *setupOpts) {
		o.db = pool
		o.deps = func(d *api.Deps) { d.Waiters = hub }
	})
	return b, hub
}

var _ = io.Discard
var _ = dbtest.NewDB

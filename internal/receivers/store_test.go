package receivers_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/inbound"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/smtpd"
	"github.com/mailwatch/mailwatch/internal/testfactory"
	"github.com/mailwatch/mailwatch/internal/twilio"
	"github.com/mailwatch/mailwatch/jobs"
)

// testNow is the clock of every store under test: receivers are created
// relative to it, so expiry does not depend on the wall clock.
func testNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// newStore returns a store on db the way the API and the SMTP role build
// one: a real events.Emitter whose River client only inserts jobs.
func newStore(t *testing.T, db dbutil.Executor, now time.Time) *receivers.Store {
	t.Helper()
	client, err := jobs.NewClient(jobs.Deps{Logger: slog.New(slog.DiscardHandler)}, jobs.Options{})
	require.NoError(t, err)
	return &receivers.Store{
		DB: db, Emitter: &events.Emitter{River: client}, Now: func() time.Time { return now },
	}
}

func insertReceiver(t *testing.T, db dbutil.Executor, account uuid.UUID, channel, address string, expiresAt time.Time) dbsqlc.Receiver {
	t.Helper()
	r, err := dbsqlc.New().ReceiverInsert(context.Background(), db, dbsqlc.ReceiverInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: account, Channel: channel, Label: "signup flow " + channel,
		Address: address, TtlSeconds: 3600, ExpiresAt: expiresAt, CreatedAt: expiresAt.Add(-time.Hour),
	})
	require.NoError(t, err)
	return r
}

// newAddress is a fresh receiver address (unique: the tests share a
// database and addresses are unique among email receivers).
func newAddress() string {
	return "qa-" + strings.ReplaceAll(uuid.NewString(), "-", "") + "@inbound.mailwatch.test"
}

// newPhone is a fresh E.164 number for the SMS pool.
func newPhone() string { return fmt.Sprintf("+1555%07d", rand.IntN(10_000_000)) }

// insertSMSReceiver creates an SMS receiver holding a pool number of its own.
func insertSMSReceiver(t *testing.T, db dbutil.Executor, account uuid.UUID, expiresAt time.Time) dbsqlc.Receiver {
	t.Helper()
	ctx := context.Background()
	q := dbsqlc.New()
	for {
		phone := newPhone()
		var taken bool
		require.NoError(t, db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM sms_numbers WHERE phone_number = $1)", phone).Scan(&taken))
		if taken {
			continue
		}
		_, err := q.SMSNumberInsert(ctx, db, phone)
		require.NoError(t, err)
		r := insertReceiver(t, db, account, receivers.ChannelSMS, phone, expiresAt)
		require.NoError(t, q.SMSNumberAssign(ctx, db, dbsqlc.SMSNumberAssignParams{ReceiverID: r.ID, Now: expiresAt.Add(-time.Hour), PhoneNumber: phone}))
		return r
	}
}

// crlf turns a message written with \n line ends into the wire form.
func crlf(s string) []byte { return []byte(strings.ReplaceAll(s, "\n", "\r\n")) }

// signupEmail is a small multipart/alternative message with a code in the
// text part and links in both parts.
func signupEmail(to string) []byte {
	return crlf(`From: "Ann Sender" <ann@example.com>
To: ` + to + `
Subject: Your sign-in code
Date: Tue, 02 Jan 2024 15:04:05 +0000
Message-ID: <signup-1@example.com>
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary="b1"

--b1
Content-Type: text/plain; charset=utf-8

Hello,

Your verification code is 482913.
Confirm your address at https://app.example.com/confirm?token=abc.

--b1
Content-Type: text/html; charset=utf-8

<p>Your verification code is <b>482913</b>.</p>
<p><a href="https://app.example.com/confirm?token=abc">Confirm</a> or <a href="https://app.example.com/help">get help</a>.</p>
--b1--
`)
}

type messageRow struct {
	ID, ReceiverID, AccountID uuid.UUID
	Seq                       int64
	Channel, Sender, Subject  string
	TextBody, HTMLBody        string
	Parsed                    receivers.Details
	Raw                       []byte
	SizeBytes                 int32
	WebhookID                 *string
	ReceivedAt                time.Time
}

func messagesOf(t *testing.T, db dbutil.Executor, receiverID uuid.UUID) []messageRow {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT id, receiver_id, account_id, seq, channel, sender, subject, text_body, html_body, parsed, raw,
		       size_bytes, webhook_id, received_at
		FROM receiver_messages WHERE receiver_id = $1 ORDER BY seq`, receiverID)
	require.NoError(t, err)
	defer rows.Close()
	var out []messageRow
	for rows.Next() {
		var m messageRow
		require.NoError(t, rows.Scan(&m.ID, &m.ReceiverID, &m.AccountID, &m.Seq, &m.Channel, &m.Sender, &m.Subject,
			&m.TextBody, &m.HTMLBody, &m.Parsed, &m.Raw, &m.SizeBytes, &m.WebhookID, &m.ReceivedAt))
		out = append(out, m)
	}
	require.NoError(t, rows.Err())
	return out
}

type eventRow struct {
	ID        uuid.UUID
	Type      string
	Severity  string
	Payload   map[string]any
	CreatedAt time.Time
}

func eventsOf(t *testing.T, db dbutil.Executor, account uuid.UUID) []eventRow {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`SELECT id, event_type, severity, payload, created_at FROM events WHERE account_id = $1 ORDER BY created_at, id`, account)
	require.NoError(t, err)
	defer rows.Close()
	var out []eventRow
	for rows.Next() {
		var e eventRow
		require.NoError(t, rows.Scan(&e.ID, &e.Type, &e.Severity, &e.Payload, &e.CreatedAt))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

func lastSeq(t *testing.T, db dbutil.Executor, receiverID uuid.UUID) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.QueryRow(context.Background(), "SELECT last_seq FROM receivers WHERE id = $1", receiverID).Scan(&n))
	return n
}

// deliveredLog records Store.Delivered calls.
type deliveredLog struct {
	mu    sync.Mutex
	calls [][]uuid.UUID
}

func (d *deliveredLog) record(ids ...uuid.UUID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, append([]uuid.UUID(nil), ids...))
}

func (d *deliveredLog) get() [][]uuid.UUID {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls
}

func TestLookupEmail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	store := newStore(t, tx, now)
	acct := testfactory.Account(t, tx)
	live := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	expired := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(-time.Second))
	atExpiry := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now)
	sms := insertSMSReceiver(t, tx, acct, now.Add(time.Hour))

	got, err := store.LookupEmail(ctx, live.Address)
	require.NoError(t, err)
	require.Equal(t, live.ID, got.ID)
	got, err = store.LookupEmail(ctx, strings.ToUpper(live.Address))
	require.NoError(t, err, "addresses compare in lower case")
	require.Equal(t, live.ID, got.ID)
	require.NoError(t, store.AcceptRecipient(ctx, strings.ToUpper(live.Address)))

	_, err = store.LookupEmail(ctx, newAddress())
	require.ErrorIs(t, err, receivers.ErrUnknownRecipient)
	require.ErrorIs(t, err, smtpd.ErrUnknownRecipient, "the SMTP listener maps it to 550")
	require.ErrorIs(t, store.AcceptRecipient(ctx, newAddress()), receivers.ErrUnknownRecipient)
	_, err = store.LookupEmail(ctx, sms.Address)
	require.ErrorIs(t, err, receivers.ErrUnknownRecipient, "an SMS receiver's number is no email address")

	_, err = store.LookupEmail(ctx, expired.Address)
	require.ErrorIs(t, err, receivers.ErrExpired)
	require.ErrorIs(t, err, smtpd.ErrExpired)
	require.ErrorIs(t, store.AcceptRecipient(ctx, expired.Address), receivers.ErrExpired)
	_, err = store.LookupEmail(ctx, atExpiry.Address)
	require.ErrorIs(t, err, receivers.ErrExpired, "a receiver is expired from expires_at on")
}

func TestDeliverEmailStoresMessageAndEmitsEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	store := newStore(t, tx, now)
	var delivered deliveredLog
	store.Delivered = delivered.record
	acct := testfactory.Account(t, tx)
	r := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	other := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	raw := signupEmail(r.Address)
	receivedAt := now.Add(-3 * time.Second)

	out, err := store.DeliverEmail(ctx, receivers.EmailDelivery{
		Raw: raw, Sender: "bounces@mailer.example.com", Recipients: []string{r.Address}, ReceivedAt: receivedAt,
	})
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Equal(t, acct, out[0].AccountID)
	require.Equal(t, r.ID, out[0].ReceiverID)
	require.Equal(t, [][]uuid.UUID{{r.ID}}, delivered.get(), "Delivered is told which receivers got a message")

	msgs := messagesOf(t, tx, r.ID)
	require.Len(t, msgs, 1)
	m := msgs[0]
	require.Equal(t, out[0].MessageID, m.ID)
	require.Equal(t, acct, m.AccountID)
	require.EqualValues(t, 1, m.Seq)
	require.Equal(t, receivers.ChannelEmail, m.Channel)
	require.Equal(t, "bounces@mailer.example.com", m.Sender, "the envelope sender is kept")
	require.Equal(t, "Your sign-in code", m.Subject)
	require.Contains(t, m.TextBody, "Your verification code is 482913.")
	require.Contains(t, m.HTMLBody, `href="https://app.example.com/help"`)
	require.Equal(t, raw, m.Raw, "the raw message is stored as received")
	require.EqualValues(t, len(raw), m.SizeBytes)
	require.Nil(t, m.WebhookID)
	require.True(t, receivedAt.Equal(m.ReceivedAt), "received_at %s, want %s", m.ReceivedAt, receivedAt)

	p := m.Parsed
	require.Equal(t, inbound.Address{Name: "Ann Sender", Address: "ann@example.com"}, p.From)
	require.Equal(t, []inbound.Address{{Address: r.Address}}, p.To)
	require.NotNil(t, p.Cc)
	require.Empty(t, p.Cc)
	require.Equal(t, []string{r.Address}, p.Recipients)
	require.Equal(t, "signup-1@example.com", p.MessageID)
	require.NotNil(t, p.Date)
	require.True(t, time.Date(2024, 1, 2, 15, 4, 5, 0, time.UTC).Equal(*p.Date))
	require.Equal(t, []string{"https://app.example.com/confirm?token=abc", "https://app.example.com/help"}, p.Links,
		"text links first, then HTML hrefs, without duplicates or trailing punctuation")
	require.Equal(t, []string{"482913"}, p.Codes)
	require.NotNil(t, p.Media)
	require.Empty(t, p.Media)
	require.NotNil(t, p.Attachments)
	require.Contains(t, p.Headers, inbound.Header{Name: "Subject", Value: "Your sign-in code"})
	require.Equal(t, int64(1), lastSeq(t, tx, r.ID))
	require.Empty(t, messagesOf(t, tx, other.ID), "only the addressed receiver gets the message")

	evs := eventsOf(t, tx, acct)
	require.Len(t, evs, 1, "exactly one event per stored message")
	ev := evs[0]
	require.Equal(t, events.TypeReceiverMessageReceived, ev.Type)
	require.Equal(t, map[string]any{
		"receiver_id": r.ID.String(), "message_id": m.ID.String(), "channel": "email",
		"from": "ann@example.com", "subject": "Your sign-in code", "label": r.Label,
	}, ev.Payload, "the event names the From header's address, not the envelope sender")
	require.True(t, receivedAt.Equal(ev.CreatedAt), "the event is dated when the message was received")

	// Without an envelope sender (the ingress webhook) the From header's
	// address is the sender; seq follows arrival order.
	out2, err := store.DeliverEmail(ctx, receivers.EmailDelivery{Raw: raw, Recipients: []string{r.Address}})
	require.NoError(t, err)
	msgs = messagesOf(t, tx, r.ID)
	require.Len(t, msgs, 2)
	require.Equal(t, out2[0].MessageID, msgs[1].ID)
	require.EqualValues(t, 2, msgs[1].Seq)
	require.Equal(t, "ann@example.com", msgs[1].Sender)
	require.True(t, now.Equal(msgs[1].ReceivedAt), "a zero ReceivedAt means the store's now")
	require.Len(t, eventsOf(t, tx, acct), 2)
	require.Len(t, delivered.get(), 2)
}

func TestDeliverEmailUnknownAndExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	store := newStore(t, tx, now)
	var delivered deliveredLog
	store.Delivered = delivered.record
	acct := testfactory.Account(t, tx)
	expired := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(-time.Minute))
	unknown := newAddress()

	_, err := store.DeliverEmail(ctx, receivers.EmailDelivery{Raw: signupEmail(unknown), Recipients: []string{unknown}})
	require.ErrorIs(t, err, receivers.ErrUnknownRecipient)
	_, err = store.DeliverEmail(ctx, receivers.EmailDelivery{Raw: signupEmail(unknown), Recipients: nil})
	require.ErrorIs(t, err, receivers.ErrUnknownRecipient, "no recipients at all")
	_, err = store.DeliverEmail(ctx, receivers.EmailDelivery{Raw: signupEmail(expired.Address), Recipients: []string{expired.Address}})
	require.ErrorIs(t, err, receivers.ErrExpired)
	_, err = store.DeliverEmail(ctx, receivers.EmailDelivery{
		Raw: signupEmail(expired.Address), Recipients: []string{unknown, expired.Address},
	})
	require.ErrorIs(t, err, receivers.ErrExpired, "an expired recipient is reported over an unknown one")

	require.Empty(t, messagesOf(t, tx, expired.ID))
	require.Zero(t, lastSeq(t, tx, expired.ID))
	require.Empty(t, eventsOf(t, tx, acct))
	require.Empty(t, delivered.get(), "nothing delivered, nobody woken")
}

func TestDeliverEmailUnreadableMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	store := newStore(t, tx, now)
	acct := testfactory.Account(t, tx)
	r := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))

	_, err := store.DeliverEmail(ctx, receivers.EmailDelivery{Raw: nil, Recipients: []string{r.Address}})
	require.ErrorIs(t, err, inbound.ErrEmptyMessage)
	require.Empty(t, messagesOf(t, tx, r.ID))
	require.Empty(t, eventsOf(t, tx, acct))
}

func TestDeliverEmailDuplicateWebhookID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	store := newStore(t, tx, now)
	var delivered deliveredLog
	store.Delivered = delivered.record
	acct := testfactory.Account(t, tx)
	r := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	other := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	webhookID := "msg_" + uuid.NewString()

	first, err := store.DeliverEmail(ctx, receivers.EmailDelivery{
		Raw: signupEmail(r.Address), Recipients: []string{r.Address}, WebhookID: webhookID,
	})
	require.NoError(t, err)
	msgs := messagesOf(t, tx, r.ID)
	require.Len(t, msgs, 1)
	require.NotNil(t, msgs[0].WebhookID)
	require.Equal(t, webhookID, *msgs[0].WebhookID)

	// A retry of the same request, then a replay aimed at another receiver.
	_, err = store.DeliverEmail(ctx, receivers.EmailDelivery{
		Raw: signupEmail(r.Address), Recipients: []string{r.Address}, WebhookID: webhookID,
	})
	require.ErrorIs(t, err, receivers.ErrDuplicate)
	_, err = store.DeliverEmail(ctx, receivers.EmailDelivery{
		Raw: signupEmail(other.Address), Recipients: []string{other.Address}, WebhookID: webhookID,
	})
	require.ErrorIs(t, err, receivers.ErrDuplicate, "a webhook id is single-use across receivers")

	msgs = messagesOf(t, tx, r.ID)
	require.Len(t, msgs, 1, "no second row")
	require.Equal(t, first[0].MessageID, msgs[0].ID)
	require.Empty(t, messagesOf(t, tx, other.ID))
	require.Len(t, eventsOf(t, tx, acct), 1, "the duplicate's event was rolled back with its message")
	require.Equal(t, int64(1), lastSeq(t, tx, r.ID), "the duplicate's seq increment was rolled back")
	require.Zero(t, lastSeq(t, tx, other.ID))
	require.Len(t, delivered.get(), 1, "a duplicate wakes nobody")

	// Another id is a new message, numbered right after the first.
	_, err = store.DeliverEmail(ctx, receivers.EmailDelivery{
		Raw: signupEmail(r.Address), Recipients: []string{r.Address}, WebhookID: "msg_" + uuid.NewString(),
	})
	require.NoError(t, err)
	msgs = messagesOf(t, tx, r.ID)
	require.Len(t, msgs, 2)
	require.EqualValues(t, 2, msgs[1].Seq)
}

func TestDeliverEmailSeveralRecipients(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	store := newStore(t, tx, now)
	var delivered deliveredLog
	store.Delivered = delivered.record
	acctX, acctY := testfactory.Account(t, tx), testfactory.Account(t, tx)
	rx := insertReceiver(t, tx, acctX, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	ry := insertReceiver(t, tx, acctY, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	gone := insertReceiver(t, tx, acctX, receivers.ChannelEmail, newAddress(), now.Add(-time.Hour))

	out, err := store.DeliverEmail(ctx, receivers.EmailDelivery{
		Raw:        signupEmail(rx.Address),
		Recipients: []string{strings.ToUpper(rx.Address), ry.Address, rx.Address, newAddress(), gone.Address},
	})
	require.NoError(t, err, "live recipients get the message even when others are unknown or expired")
	require.Len(t, out, 2, "one message per live receiver, the same receiver named twice counts once")
	got := map[uuid.UUID]receivers.Delivered{}
	for _, d := range out {
		got[d.ReceiverID] = d
	}
	require.Equal(t, acctX, got[rx.ID].AccountID)
	require.Equal(t, acctY, got[ry.ID].AccountID)

	for _, c := range []struct {
		r    dbsqlc.Receiver
		acct uuid.UUID
	}{{rx, acctX}, {ry, acctY}} {
		msgs := messagesOf(t, tx, c.r.ID)
		require.Len(t, msgs, 1)
		require.Equal(t, got[c.r.ID].MessageID, msgs[0].ID)
		require.Equal(t, c.acct, msgs[0].AccountID)
		require.EqualValues(t, 1, msgs[0].Seq)
		want := []string{c.r.Address}
		if c.r.ID == rx.ID {
			want = []string{strings.ToUpper(rx.Address), rx.Address}
		}
		require.Equal(t, want, msgs[0].Parsed.Recipients, "a copy lists only the recipients that reached it, never another account's")
		evs := eventsOf(t, tx, c.acct)
		require.Len(t, evs, 1, "each account hears about its own receiver only")
		require.Equal(t, c.r.ID.String(), evs[0].Payload["receiver_id"])
		require.Equal(t, msgs[0].ID.String(), evs[0].Payload["message_id"])
	}
	require.Empty(t, messagesOf(t, tx, gone.ID))
	calls := delivered.get()
	require.Len(t, calls, 1, "one wake-up call per delivery")
	require.ElementsMatch(t, []uuid.UUID{rx.ID, ry.ID}, calls[0])
}

// A receiver that expires between the lookup and the row lock is skipped
// inside the transaction, and a delivery left with nobody is ErrExpired.
func TestDeliverEmailReceiverExpiresBeforeLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	store := newStore(t, tx, now)
	var calls atomic.Int32
	store.Now = func() time.Time {
		if calls.Add(1) == 1 {
			return now // the lookup sees a live receiver
		}
		return now.Add(2 * time.Hour) // the transaction's lock sees it expired
	}
	var delivered deliveredLog
	store.Delivered = delivered.record
	acct := testfactory.Account(t, tx)
	r := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))

	_, err := store.DeliverEmail(ctx, receivers.EmailDelivery{
		Raw: signupEmail(r.Address), Recipients: []string{r.Address}, ReceivedAt: now,
	})
	require.ErrorIs(t, err, receivers.ErrExpired)
	require.GreaterOrEqual(t, calls.Load(), int32(2), "the lock re-checks expiry with a fresh now")
	require.Empty(t, messagesOf(t, tx, r.ID))
	require.Zero(t, lastSeq(t, tx, r.ID))
	require.Empty(t, eventsOf(t, tx, acct))
	require.Empty(t, delivered.get())
}

func TestDeliverSMTPEnvelope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	store := newStore(t, tx, now)
	acct := testfactory.Account(t, tx)
	r := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	expired := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(-time.Hour))
	raw := append([]byte("Return-Path: <bounce@mailer.example.com>\r\n"), signupEmail(r.Address)...)

	require.NoError(t, store.Deliver(ctx, smtpd.Envelope{
		From: "bounce@mailer.example.com", To: []string{strings.ToUpper(r.Address)}, Raw: raw, ReceivedAt: now,
		RemoteAddr: "192.0.2.7:52000", Helo: "mta.mailer.example.com", TLS: true,
		TLSVersion: "TLS 1.3", TLSCipher: "TLS_AES_128_GCM_SHA256",
	}))
	msgs := messagesOf(t, tx, r.ID)
	require.Len(t, msgs, 1)
	require.Equal(t, "bounce@mailer.example.com", msgs[0].Sender)
	require.Equal(t, raw, msgs[0].Raw)
	require.Equal(t, []string{strings.ToUpper(r.Address)}, msgs[0].Parsed.Recipients, "recipients as given at RCPT")
	require.Len(t, eventsOf(t, tx, acct), 1)

	// The session's facts are stored with the message, for its analysis.
	body, sess, err := store.MessageSession(ctx, msgs[0].ID)
	require.NoError(t, err)
	require.Equal(t, raw, body)
	require.Equal(t, &deliverability.Session{
		ClientIP: netip.MustParseAddr("192.0.2.7"), Helo: "mta.mailer.example.com", MailFrom: "bounce@mailer.example.com",
		TLSVersion: "TLS 1.3", TLSCipher: "TLS_AES_128_GCM_SHA256",
	}, sess)

	// A bounce without TLS from an IPv4-mapped client: MAIL FROM stays
	// empty (the sender column falls back to the From header), the TLS
	// columns NULL.
	require.NoError(t, store.Deliver(ctx, smtpd.Envelope{
		From: "", To: []string{r.Address}, Raw: raw, ReceivedAt: now,
		RemoteAddr: "[::ffff:198.51.100.9]:40000", Helo: "[198.51.100.9]",
	}))
	msgs = messagesOf(t, tx, r.ID)
	require.Len(t, msgs, 2)
	require.NotEmpty(t, msgs[1].Sender)
	_, sess, err = store.MessageSession(ctx, msgs[1].ID)
	require.NoError(t, err)
	require.Equal(t, &deliverability.Session{ClientIP: netip.MustParseAddr("198.51.100.9"), Helo: "[198.51.100.9]"}, sess)
	var tlsVersion *string
	require.NoError(t, tx.QueryRow(ctx, `SELECT smtp_tls_version FROM receiver_messages WHERE id = $1`, msgs[1].ID).Scan(&tlsVersion))
	require.Nil(t, tlsVersion)

	// Each message received over SMTP has its analysis queued.
	require.Equal(t, 1, analysisJobs(t, tx, msgs[0].ID))
	require.Equal(t, 1, analysisJobs(t, tx, msgs[1].ID))

	// A message that did not come over SMTP has no session, and no
	// analysis.
	out, err := store.DeliverEmail(ctx, receivers.EmailDelivery{Raw: signupEmail(r.Address), Recipients: []string{r.Address}})
	require.NoError(t, err)
	_, sess, err = store.MessageSession(ctx, out[0].MessageID)
	require.NoError(t, err)
	require.Nil(t, sess)
	require.Zero(t, analysisJobs(t, tx, out[0].MessageID))
	_, _, err = store.MessageSession(ctx, uuid.Must(uuid.NewV7()))
	require.True(t, dbutil.IsNotFound(err))
	require.Len(t, eventsOf(t, tx, acct), 3)

	// A recipient that expired during the session: the message is accepted
	// (250) and dropped rather than bounced.
	require.NoError(t, store.Deliver(ctx, smtpd.Envelope{
		From: "bounce@mailer.example.com", To: []string{expired.Address}, Raw: raw, ReceivedAt: now,
	}))
	require.Empty(t, messagesOf(t, tx, expired.ID))
	require.Len(t, eventsOf(t, tx, acct), 3)

	// An unreadable message is an error the listener reports.
	require.ErrorIs(t, store.Deliver(ctx, smtpd.Envelope{To: []string{r.Address}}), inbound.ErrEmptyMessage)
	require.Len(t, messagesOf(t, tx, r.ID), 3)
}

func TestDeliverSMS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	store := newStore(t, tx, now)
	var delivered deliveredLog
	store.Delivered = delivered.record
	acct := testfactory.Account(t, tx)
	r := insertSMSReceiver(t, tx, acct, now.Add(time.Hour))
	receivedAt := now.Add(-time.Second)
	sms := &twilio.InboundSMS{
		MessageSid: "SM" + strings.ReplaceAll(uuid.NewString(), "-", ""), From: "+14155550100", To: r.Address,
		Body:     "Your Acme code is 739201. Open https://acme.example.com/verify to finish.",
		NumMedia: 1, Media: []twilio.Media{{URL: "https://api.twilio.com/media/ME1", ContentType: "image/png"}},
	}

	d, err := store.DeliverSMS(ctx, sms, receivedAt)
	require.NoError(t, err)
	require.Equal(t, acct, d.AccountID)
	require.Equal(t, r.ID, d.ReceiverID)
	require.Equal(t, [][]uuid.UUID{{r.ID}}, delivered.get())

	msgs := messagesOf(t, tx, r.ID)
	require.Len(t, msgs, 1)
	m := msgs[0]
	require.Equal(t, d.MessageID, m.ID)
	require.EqualValues(t, 1, m.Seq)
	require.Equal(t, receivers.ChannelSMS, m.Channel)
	require.Equal(t, sms.From, m.Sender)
	require.Empty(t, m.Subject)
	require.Equal(t, sms.Body, m.TextBody)
	require.Empty(t, m.HTMLBody)
	require.Nil(t, m.Raw, "an SMS has no raw message")
	require.EqualValues(t, len(sms.Body), m.SizeBytes)
	require.Equal(t, receivers.SMSWebhookID(sms.MessageSid), *m.WebhookID)
	require.True(t, receivedAt.Equal(m.ReceivedAt))
	p := m.Parsed
	require.Equal(t, inbound.Address{Address: sms.From}, p.From)
	require.Equal(t, []inbound.Address{{Address: r.Address}}, p.To)
	require.Equal(t, []string{r.Address}, p.Recipients)
	require.Equal(t, sms.MessageSid, p.MessageID)
	require.Equal(t, []string{"739201"}, p.Codes)
	require.Equal(t, []string{"https://acme.example.com/verify"}, p.Links)
	require.Equal(t, sms.Media, p.Media)
	require.NotNil(t, p.Headers)
	require.NotNil(t, p.Attachments)
	require.NotNil(t, p.Cc)

	evs := eventsOf(t, tx, acct)
	require.Len(t, evs, 1)
	require.Equal(t, events.TypeReceiverMessageReceived, evs[0].Type)
	require.Equal(t, map[string]any{
		"receiver_id": r.ID.String(), "message_id": m.ID.String(), "channel": "sms",
		"from": sms.From, "subject": "", "label": r.Label,
	}, evs[0].Payload)

	// A replay of the same MessageSid (Twilio signs no timestamp) is
	// refused as a duplicate and stores nothing.
	_, err = store.DeliverSMS(ctx, sms, receivedAt)
	require.ErrorIs(t, err, receivers.ErrDuplicate)
	require.Len(t, messagesOf(t, tx, r.ID), 1)

	// No media: stored as an empty list, not null.
	d2, err := store.DeliverSMS(ctx, &twilio.InboundSMS{MessageSid: "SM2" + uuid.NewString(), From: sms.From, To: r.Address, Body: "hi"}, time.Time{})
	require.NoError(t, err)
	msgs = messagesOf(t, tx, r.ID)
	require.Len(t, msgs, 2)
	require.Equal(t, d2.MessageID, msgs[1].ID)
	require.EqualValues(t, 2, msgs[1].Seq)
	require.NotNil(t, msgs[1].Parsed.Media)
	require.Empty(t, msgs[1].Parsed.Media)
	require.NotNil(t, msgs[1].Parsed.Codes)
	require.NotNil(t, msgs[1].Parsed.Links)
	require.True(t, now.Equal(msgs[1].ReceivedAt), "a zero receivedAt means the store's now")
}

func TestDeliverSMSUnknownAndExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	store := newStore(t, tx, now)
	acct := testfactory.Account(t, tx)
	expired := insertSMSReceiver(t, tx, acct, now.Add(-time.Minute))
	email := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	// A pool number nobody holds.
	free := newPhone()
	_, err := dbsqlc.New().SMSNumberInsert(ctx, tx, free)
	require.NoError(t, err)

	for _, to := range []string{newPhone(), free, email.Address} {
		_, err := store.DeliverSMS(ctx, &twilio.InboundSMS{MessageSid: "SMx", From: "+14155550100", To: to, Body: "code 1234"}, now)
		require.ErrorIs(t, err, receivers.ErrUnknownRecipient, "to %s", to)
	}
	_, err = store.DeliverSMS(ctx, &twilio.InboundSMS{MessageSid: "SMy", From: "+14155550100", To: expired.Address, Body: "code 1234"}, now)
	require.ErrorIs(t, err, receivers.ErrExpired)

	require.Empty(t, messagesOf(t, tx, expired.ID))
	require.Empty(t, messagesOf(t, tx, email.ID))
	require.Empty(t, eventsOf(t, tx, acct))
}

// The schema's trigger NOTIFYs in the delivering transaction, and a
// listening hub turns that into a wake-up of the receiver's waiters; the
// in-process Delivered hook (WakeLocal, as the API wires it) must not be
// what woke them.
func TestDeliveryWakesListeningHub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, url := dbtest.NewDB(t)
	now := testNow()
	store := newStore(t, pool, now)
	acct := testfactory.Account(t, pool)
	r := insertReceiver(t, pool, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	bystander := insertReceiver(t, pool, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))

	hub := receivers.NewHub(receivers.ConnectURL(url), nil)
	store.Delivered = hub.WakeLocal
	w, wb := register(t, hub, r.ID), register(t, hub, bystander.ID)
	runHub(t, hub)
	requireReady(t, hub)
	requireWoken(t, w) // the first LISTEN wakes everyone once
	requireWoken(t, wb)

	_, err := store.DeliverEmail(ctx, receivers.EmailDelivery{Raw: signupEmail(r.Address), Recipients: []string{r.Address}})
	require.NoError(t, err)
	requireWoken(t, w, "a committed delivery wakes the receiver's waiter through NOTIFY")

	// Deleting a receiver wakes its waiters too (the wait then answers).
	_, err = dbsqlc.New().ReceiverDeleteForAccount(ctx, pool, dbsqlc.ReceiverDeleteForAccountParams{ID: bystander.ID, AccountID: acct})
	require.NoError(t, err)
	requireWoken(t, wb)
	requireNotWoken(t, w, "the delivery woke its waiter once; the delete is another receiver's")
}

// DeliverEmail's contract is one message per live recipient, and ErrDuplicate
// only for a repeated webhook id: the id is kept on the first copy only, so
// a delivery to several receivers is stored and a replay is still refused.
func TestDeliverEmailSeveralRecipientsWithWebhookID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	now := testNow()
	store := newStore(t, tx, now)
	acct := testfactory.Account(t, tx)
	r1 := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))
	r2 := insertReceiver(t, tx, acct, receivers.ChannelEmail, newAddress(), now.Add(time.Hour))

	webhookID := "msg_" + uuid.NewString()
	out, err := store.DeliverEmail(ctx, receivers.EmailDelivery{
		Raw: signupEmail(r1.Address), Recipients: []string{r1.Address, r2.Address}, WebhookID: webhookID,
	})
	require.NoError(t, err, "one delivery may reach several receivers")
	require.Len(t, out, 2)
	require.Len(t, messagesOf(t, tx, r1.ID), 1)
	require.Len(t, messagesOf(t, tx, r2.ID), 1)

	// The id is still accepted once per delivery: a replay to either
	// receiver is refused.
	for _, r := range []dbsqlc.Receiver{r1, r2} {
		_, err = store.DeliverEmail(ctx, receivers.EmailDelivery{
			Raw: signupEmail(r.Address), Recipients: []string{r.Address}, WebhookID: webhookID,
		})
		require.ErrorIs(t, err, receivers.ErrDuplicate)
	}
	require.Len(t, messagesOf(t, tx, r1.ID), 1)
	require.Len(t, messagesOf(t, tx, r2.ID), 1)
}

// analysisJobs counts the analysis jobs queued for a message.
func analysisJobs(t *testing.T, db dbutil.Executor, messageID uuid.UUID) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'message_id' = $2`,
		receivers.AnalyzeArgs{}.Kind(), messageID.String()).Scan(&n))
	return n
}

package receivers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/deliverability"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/inbound"
	"github.com/mailwatch/mailwatch/internal/mimelimit"
	"github.com/mailwatch/mailwatch/internal/pgtext"
	"github.com/mailwatch/mailwatch/internal/smtpd"
	"github.com/mailwatch/mailwatch/internal/twilio"
)

// Channels of a receiver.
const (
	ChannelEmail = "email"
	ChannelSMS   = "sms"
)

var (
	// ErrUnknownRecipient: no receiver has the address or number.
	ErrUnknownRecipient = smtpd.ErrUnknownRecipient
	// ErrExpired: the receiver exists but has expired.
	ErrExpired = smtpd.ErrExpired
	// ErrDuplicate: an email ingress request with this webhook-id was
	// already stored (a retry or a replay).
	ErrDuplicate = errors.New("webhook id already delivered")
)

// Details is the part of a message stored as JSON (parsed) beside its
// columns; the API shows it as it is.
type Details struct {
	From        inbound.Address      `json:"from"`
	To          []inbound.Address    `json:"to"`
	Cc          []inbound.Address    `json:"cc"`
	Recipients  []string             `json:"recipients"`
	Date        *time.Time           `json:"date,omitempty"`
	MessageID   string               `json:"message_id,omitempty"`
	Headers     []inbound.Header     `json:"headers"`
	Attachments []inbound.Attachment `json:"attachments"`
	Links       []string             `json:"links"`
	Codes       []string             `json:"codes"`
	Media       []twilio.Media       `json:"media"`
}

// Delivered names one stored message.
type Delivered struct {
	AccountID  uuid.UUID
	ReceiverID uuid.UUID
	MessageID  uuid.UUID
}

// Store files inbound messages under receivers. It is safe for concurrent
// use.
type Store struct {
	DB      dbutil.Executor
	Emitter *events.Emitter
	Logger  *slog.Logger
	Now     func() time.Time
	// Delivered, when set, is called after a delivery committed, with the
	// receivers that got a message (an in-process wake-up for hubs without
	// a LISTEN connection).
	Delivered func(receiverIDs ...uuid.UUID)
}

var _ smtpd.Store = (*Store)(nil)

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Store) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// LookupEmail returns the email receiver of address (compared in lower
// case), or ErrUnknownRecipient / ErrExpired.
func (s *Store) LookupEmail(ctx context.Context, address string) (dbsqlc.Receiver, error) {
	r, err := dbsqlc.New().ReceiverGetEmailByAddress(ctx, s.DB, strings.ToLower(address))
	if dbutil.IsNotFound(err) {
		return r, ErrUnknownRecipient
	}
	if err != nil {
		return r, fmt.Errorf("error looking up receiver: %w", err)
	}
	if !s.now().Before(r.ExpiresAt) {
		return r, ErrExpired
	}
	return r, nil
}

// AcceptRecipient implements smtpd.Store.
func (s *Store) AcceptRecipient(ctx context.Context, address string) error {
	_, err := s.LookupEmail(ctx, address)
	return err
}

// Deliver implements smtpd.Store: it stores the message for every accepted
// recipient that is still live. A recipient that expired or was deleted
// between RCPT and the end of DATA is skipped (logged); the message is still
// accepted for the others.
func (s *Store) Deliver(ctx context.Context, env smtpd.Envelope) error {
	_, err := s.DeliverEmail(ctx, EmailDelivery{
		Raw: env.Raw, Sender: env.From, Recipients: env.To, ReceivedAt: env.ReceivedAt, Session: sessionOf(env),
	})
	switch {
	case errors.Is(err, ErrUnknownRecipient) || errors.Is(err, ErrExpired):
		s.logger().InfoContext(ctx, "message dropped: its recipients went away during the session",
			slog.Int("rcpt_count", len(env.To)), slog.Any("reason", err))
		return nil
	case err != nil:
		if reason := RefusalReason(err); reason != "" {
			return &smtpd.RefusedError{Reason: reason, Err: err}
		}
	}
	return err
}

// sessionOf returns the SMTP session facts of an envelope.
func sessionOf(env smtpd.Envelope) *deliverability.Session {
	var ip netip.Addr
	if ap, err := netip.ParseAddrPort(env.RemoteAddr); err == nil {
		ip = ap.Addr().Unmap()
	}
	return &deliverability.Session{
		ClientIP: ip, Helo: env.Helo, MailFrom: env.From, TLSVersion: env.TLSVersion, TLSCipher: env.TLSCipher,
	}
}

// RefusalReason says why a message was refused for its content (one line,
// safe to show to its sender), or "" when err is no such refusal. The
// refusal is permanent: the same bytes will be refused again.
func RefusalReason(err error) string {
	var limit *mimelimit.LimitError
	switch {
	case errors.As(err, &limit):
		return limit.Error()
	case errors.Is(err, inbound.ErrEmptyMessage):
		return "the message is empty"
	case errors.Is(err, inbound.ErrMessageTooLarge):
		return "the message is too large"
	case errors.Is(err, inbound.ErrMalformedMessage):
		return "the message is not a readable RFC 5322 / MIME message"
	}
	return ""
}

// EmailDelivery is one raw message for one or more receiver addresses.
type EmailDelivery struct {
	Raw        []byte
	Sender     string   // envelope sender; the From header when empty
	Recipients []string // receiver addresses
	ReceivedAt time.Time
	// WebhookID is the Standard Webhooks id of an ingress request; a second
	// delivery with the same id fails with ErrDuplicate.
	WebhookID string
	// Session is the SMTP session the message arrived in, stored with it
	// for its deliverability analysis; nil when it did not come over SMTP.
	Session *deliverability.Session
}

// DeliverEmail parses d.Raw once and stores one message per live receiver
// among d.Recipients, in one transaction. It fails with ErrUnknownRecipient
// or ErrExpired when no recipient is a live receiver, with an error wrapping
// one of inbound's Parse errors for a message that can't be read, with
// ErrDuplicate for a webhook id already delivered, and with a
// *WebhookIDUsedError for one consumed by a refused request.
func (s *Store) DeliverEmail(ctx context.Context, d EmailDelivery) ([]Delivered, error) {
	msg, err := inbound.Parse(d.Raw)
	if err != nil {
		return nil, err
	}
	var (
		ids     []uuid.UUID
		expired bool
		// Each receiver's copy lists only the envelope recipients that
		// reached it: the others may be Bcc'd, or other accounts'.
		addresses = map[uuid.UUID][]string{}
	)
	for _, addr := range d.Recipients {
		r, err := s.LookupEmail(ctx, addr)
		switch {
		case errors.Is(err, ErrExpired):
			expired = true
			continue
		case errors.Is(err, ErrUnknownRecipient):
			continue
		case err != nil:
			return nil, err
		}
		if !slices.Contains(ids, r.ID) {
			ids = append(ids, r.ID)
		}
		addresses[r.ID] = append(addresses[r.ID], addr)
	}
	if len(ids) == 0 {
		if expired {
			return nil, ErrExpired
		}
		return nil, ErrUnknownRecipient
	}
	sender := d.Sender
	if sender == "" {
		sender = msg.From.Address
	}
	details := Details{
		From: msg.From, To: msg.To, Cc: msg.Cc, Date: msg.Date,
		MessageID: msg.MessageID, Headers: msg.Headers, Attachments: msg.Attachments,
		Links: msg.Links, Codes: msg.Codes, Media: []twilio.Media{},
	}
	var webhookID *string
	if d.WebhookID != "" {
		webhookID = &d.WebhookID
	}
	return s.store(ctx, ids, stored{
		channel: ChannelEmail, sender: sender, subject: msg.Subject, text: msg.Text, html: msg.HTML,
		details: details, recipients: addresses, raw: d.Raw, size: len(d.Raw), webhookID: webhookID, receivedAt: d.ReceivedAt,
		session: d.Session,
	})
}

// SMSWebhookID is the webhook id under which an SMS with this Twilio
// MessageSid is stored (MessageGetByWebhookID finds it).
func SMSWebhookID(messageSid string) string { return smsWebhookIDPrefix + messageSid }

const smsWebhookIDPrefix = "twilio:"

// DeliverSMS stores an inbound SMS under the receiver holding sms.To. A
// MessageSid stored before fails with ErrDuplicate.
func (s *Store) DeliverSMS(ctx context.Context, sms *twilio.InboundSMS, receivedAt time.Time) (Delivered, error) {
	r, err := dbsqlc.New().ReceiverGetBySMSNumber(ctx, s.DB, sms.To)
	if dbutil.IsNotFound(err) {
		return Delivered{}, ErrUnknownRecipient
	}
	if err != nil {
		return Delivered{}, fmt.Errorf("error looking up SMS receiver: %w", err)
	}
	if !s.now().Before(r.ExpiresAt) {
		return Delivered{}, ErrExpired
	}
	media := sms.Media
	if media == nil {
		media = []twilio.Media{}
	}
	details := Details{
		From: inbound.Address{Address: sms.From}, To: []inbound.Address{{Address: sms.To}}, Cc: []inbound.Address{},
		Recipients: []string{sms.To}, MessageID: sms.MessageSid, Headers: []inbound.Header{},
		Attachments: []inbound.Attachment{}, Links: nonNil(inbound.Links(sms.Body, "")),
		Codes: nonNil(inbound.Codes("", sms.Body)), Media: media,
	}
	// Twilio signatures carry no timestamp, so a captured request can be
	// replayed at will: the MessageSid (unique across Twilio) is claimed for
	// good in ingress_webhook_ids (and kept as the message's webhook id), so
	// a second delivery of it is ErrDuplicate even after the receiver and
	// its messages were deleted and the number went to another receiver;
	// a MessageSid a refusal consumed is WebhookIDUsedError.
	webhookID := SMSWebhookID(sms.MessageSid)
	out, err := s.store(ctx, []uuid.UUID{r.ID}, stored{
		channel: ChannelSMS, sender: sms.From, text: sms.Body, details: details, size: len(sms.Body), receivedAt: receivedAt,
		webhookID: &webhookID,
	})
	if err != nil {
		return Delivered{}, err
	}
	return out[0], nil
}

type stored struct {
	channel, sender, subject, text, html string
	details                              Details
	// recipients, when set, gives each receiver's copy its own
	// details.Recipients.
	recipients map[uuid.UUID][]string
	raw        []byte
	size       int
	webhookID  *string
	receivedAt time.Time
	session    *deliverability.Session
}

func (s *Store) store(ctx context.Context, ids []uuid.UUID, m stored) ([]Delivered, error) {
	if m.receivedAt.IsZero() {
		m.receivedAt = s.now()
	}
	// Lock receivers in one order so that concurrent multi-recipient
	// deliveries cannot deadlock.
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	q := dbsqlc.New()
	now := s.now()
	out, err := dbutil.WithTxV(ctx, s.DB, func(ctx context.Context, tx pgx.Tx) ([]Delivered, error) {
		var out []Delivered
		// The ingress webhook id is accepted once per delivery, not once per
		// receiver: it is claimed here and kept on the first copy only, which
		// is enough to refuse a replay (to any receiver) and lets one
		// delivery reach several receivers.
		webhookID := m.webhookID
		if webhookID != nil && (m.channel == ChannelEmail || m.channel == ChannelSMS) {
			if err := claimDeliveryWebhookID(ctx, tx, q, *webhookID, now); err != nil {
				return nil, err
			}
		}
		for _, id := range ids {
			d, ok, err := s.storeCopy(ctx, tx, q, id, m, webhookID, now)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue // expired or deleted since the lookup
			}
			webhookID = nil
			out = append(out, d)
		}
		if len(out) == 0 {
			return nil, ErrExpired
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	if s.Delivered != nil {
		woken := make([]uuid.UUID, len(out))
		for i, d := range out {
			woken[i] = d.ReceiverID
		}
		s.Delivered(woken...)
	}
	return out, nil
}

// claimDeliveryWebhookID claims an ingress webhook id for a delivery. An id
// claimed before fails with ErrDuplicate when a delivery took it, and with
// a *WebhookIDUsedError when a refused request consumed it.
func claimDeliveryWebhookID(ctx context.Context, tx pgx.Tx, q *dbsqlc.Queries, webhookID string, now time.Time) error {
	first, err := claimWebhookID(ctx, tx, webhookID, OutcomeDelivered, now)
	if err != nil {
		return err
	}
	if first {
		return nil
	}
	outcome, err := q.IngressWebhookIDGet(ctx, tx, webhookID)
	if err != nil {
		return fmt.Errorf("error reading webhook id: %w", err)
	}
	if outcome == OutcomeDelivered {
		return ErrDuplicate
	}
	return &WebhookIDUsedError{ID: webhookID, Outcome: outcome}
}

// storeCopy stores receiver id's copy of m, with webhookID, and emits its
// receiver.message_received event. ok is false when the receiver expired
// or was deleted since the lookup.
func (s *Store) storeCopy(ctx context.Context, tx pgx.Tx, q *dbsqlc.Queries, id uuid.UUID, m stored, webhookID *string, now time.Time) (d Delivered, ok bool, err error) {
	r, err := q.ReceiverNextSeq(ctx, tx, dbsqlc.ReceiverNextSeqParams{ID: id, Now: now})
	if dbutil.IsNotFound(err) {
		return Delivered{}, false, nil
	}
	if err != nil {
		return Delivered{}, false, fmt.Errorf("error locking receiver: %w", err)
	}
	parsed, err := m.encode(id)
	if err != nil {
		return Delivered{}, false, err
	}
	params := dbsqlc.MessageInsertParams{
		ID: uuid.Must(uuid.NewV7()), ReceiverID: id, AccountID: r.AccountID, Seq: r.LastSeq, Channel: m.channel,
		Sender: m.sender, Subject: m.subject, TextBody: m.text, HtmlBody: m.html, Parsed: parsed, Raw: m.raw,
		SizeBytes: int32(m.size), WebhookID: webhookID, ReceivedAt: m.receivedAt.UTC(),
	}
	setSession(&params, m.session)
	msgID, err := q.MessageInsert(ctx, tx, params)
	if dbutil.IsUniqueViolation(err, "receiver_messages_webhook_id_key") {
		return Delivered{}, false, ErrDuplicate
	}
	if err != nil {
		return Delivered{}, false, fmt.Errorf("error inserting message: %w", err)
	}
	if m.session != nil {
		if err := s.queueAnalysis(ctx, tx, r.AccountID, msgID); err != nil {
			return Delivered{}, false, err
		}
	}
	from := m.details.From.Address
	if from == "" {
		from = m.sender
	}
	if _, err := s.Emitter.Emit(ctx, tx, events.Event{
		AccountID: r.AccountID,
		Type:      events.TypeReceiverMessageReceived,
		Payload: map[string]any{
			"receiver_id": id, "message_id": msgID, "channel": m.channel,
			"from": from, "subject": m.subject, "label": r.Label,
		},
		At: m.receivedAt,
	}); err != nil {
		return Delivered{}, false, err
	}
	return Delivered{AccountID: r.AccountID, ReceiverID: id, MessageID: msgID}, true, nil
}

// queueAnalysis queues the deliverability analysis of a message received
// over SMTP, in the delivery's transaction.
func (s *Store) queueAnalysis(ctx context.Context, tx pgx.Tx, account, msgID uuid.UUID) error {
	client, err := s.Emitter.Client(ctx)
	if err != nil {
		return err
	}
	if _, err := client.InsertTx(ctx, tx, AnalyzeArgs{MessageID: msgID, AccountID: account}, nil); err != nil {
		return fmt.Errorf("error queueing the message analysis: %w", err)
	}
	return nil
}

// setSession fills the SMTP session columns of a message (all NULL
// without a session; the TLS columns NULL without TLS).
func setSession(p *dbsqlc.MessageInsertParams, s *deliverability.Session) {
	if s == nil {
		return
	}
	if s.ClientIP.IsValid() {
		ip := s.ClientIP
		p.SmtpClientIp = &ip
	}
	helo, mailFrom := pgtext.Clean(s.Helo), pgtext.Clean(s.MailFrom)
	p.SmtpHelo, p.SmtpMailFrom = &helo, &mailFrom
	if s.TLSVersion != "" {
		p.SmtpTlsVersion, p.SmtpTlsCipher = &s.TLSVersion, &s.TLSCipher
	}
}

// encode returns the message details stored for receiver id's copy, as
// JSON.
func (m stored) encode(id uuid.UUID) ([]byte, error) {
	d := m.details
	if m.recipients != nil {
		d.Recipients = m.recipients[id]
	}
	d.Recipients = nonNil(d.Recipients)
	parsed, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("error encoding message details: %w", err)
	}
	return parsed, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// MessageSession returns a stored message as received and the SMTP session
// it arrived in; the session is nil for a message that did not come over
// SMTP. An unknown message is dbutil's not-found error.
func (s *Store) MessageSession(ctx context.Context, messageID uuid.UUID) ([]byte, *deliverability.Session, error) {
	row, err := dbsqlc.New().MessageSMTPSession(ctx, s.DB, messageID)
	if err != nil {
		return nil, nil, fmt.Errorf("error reading message session: %w", err)
	}
	if row.SmtpHelo == nil && row.SmtpMailFrom == nil && row.SmtpClientIp == nil {
		return row.Raw, nil, nil
	}
	sess := &deliverability.Session{
		Helo: deref(row.SmtpHelo), MailFrom: deref(row.SmtpMailFrom),
		TLSVersion: deref(row.SmtpTlsVersion), TLSCipher: deref(row.SmtpTlsCipher),
	}
	if row.SmtpClientIp != nil {
		sess.ClientIP = *row.SmtpClientIp
	}
	return row.Raw, sess, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

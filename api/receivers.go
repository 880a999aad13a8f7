package api

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/events"
	"github.com/mailwatch/mailwatch/internal/inbound"
	"github.com/mailwatch/mailwatch/internal/plans"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/twilio"
)

// Receiver lifetimes and wait bounds (README: "Receivers (temporary inboxes)").
const (
	receiverDefaultTTL = 3600
	receiverMinTTL     = 60
	receiverMaxTTL     = 604800
	// ReceiverPurgeGrace is how long an expired receiver and its messages
	// stay (answering 410) before the expiry job deletes them (then 404).
	ReceiverPurgeGrace = 24 * time.Hour

	waitDefaultTimeout = 20
	// waitMargin is added to the wait's timeout to make its own deadline.
	waitMargin = 10 * time.Second
)

// Receiver is a temporary inbox.
type Receiver struct {
	ID           uuid.UUID `json:"id" validate:"required"`
	Channel      string    `json:"channel" validate:"required,oneof=email sms"`
	Label        string    `json:"label" validate:"required"`
	Address      string    `json:"address" validate:"required" description:"The email address (<random>@INBOUND_DOMAIN) or the E.164 phone number to send to."`
	TTLSeconds   int       `json:"ttl_seconds" validate:"required"`
	ExpiresAt    time.Time `json:"expires_at" validate:"required"`
	CreatedAt    time.Time `json:"created_at" validate:"required"`
	Expired      bool      `json:"expired" validate:"required" description:"True once expires_at has passed (only listings show expired receivers; their own routes answer 410)."`
	MessageCount int64     `json:"message_count" validate:"required" description:"Messages received so far (deleted ones included)."`
}

func (s *Server) receiverFromRow(r dbsqlc.Receiver) Receiver {
	return Receiver{
		ID: r.ID, Channel: r.Channel, Label: r.Label, Address: r.Address, TTLSeconds: int(r.TtlSeconds),
		ExpiresAt: r.ExpiresAt.UTC(), CreatedAt: r.CreatedAt.UTC(), Expired: !s.now().Before(r.ExpiresAt),
		MessageCount: r.LastSeq,
	}
}

// CreateReceiverRequest is the body of POST /api/accounts/me/receivers.
type CreateReceiverRequest struct {
	Channel    string `json:"channel,omitempty" validate:"omitempty,oneof=email sms" description:"email (the default) or sms."`
	Label      string `json:"label,omitempty" validate:"max=100" description:"Free text, up to 100 characters."`
	TTLSeconds *int   `json:"ttl_seconds,omitempty" validate:"omitempty,min=60,max=604800" description:"Lifetime in seconds, 60 to 604800; default 3600."`
}

// ReceiverPath names one receiver.
type ReceiverPath struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

// ListReceiversRequest pages through the account's receivers.
type ListReceiversRequest struct {
	Limit  *int       `query:"limit" validate:"omitempty,min=1,max=200" description:"1 to 200, default 50."`
	Cursor *uuid.UUID `query:"cursor" format:"uuid" description:"X-Next-Cursor of the previous page."`
}

// MessagePath names one message of a receiver.
type MessagePath struct {
	ID        uuid.UUID `path:"id" format:"uuid"`
	MessageID uuid.UUID `path:"message_id" format:"uuid"`
}

// ListMessagesRequest pages through a receiver's messages.
type ListMessagesRequest struct {
	ID     uuid.UUID  `path:"id" format:"uuid"`
	Limit  *int       `query:"limit" validate:"omitempty,min=1,max=200" description:"1 to 200, default 50."`
	Order  string     `query:"order" validate:"omitempty,oneof=asc desc" description:"desc (newest first, the default) or asc (arrival order)."`
	Cursor *uuid.UUID `query:"cursor" format:"uuid" description:"X-Next-Cursor of the previous page: the page continues after this message in the chosen order."`
}

// WaitRequest is a long poll on a receiver.
type WaitRequest struct {
	ID      uuid.UUID  `path:"id" format:"uuid"`
	Timeout *int       `query:"timeout" validate:"omitempty,min=1,max=60" description:"Seconds to wait, 1 to 60; default 20."`
	After   *uuid.UUID `query:"after" format:"uuid" description:"Id of the last message seen: the answer is the oldest message that arrived after it. Without it, the oldest message of the receiver."`
}

// MessageSummary is a message in a listing.
type MessageSummary struct {
	ID              uuid.UUID       `json:"id" validate:"required"`
	ReceiverID      uuid.UUID       `json:"receiver_id" validate:"required"`
	Channel         string          `json:"channel" validate:"required,oneof=email sms"`
	Sender          string          `json:"sender" validate:"required" description:"Envelope sender (MAIL FROM; empty for a bounce), or the SMS sender's number."`
	From            inbound.Address `json:"from" validate:"required"`
	Subject         string          `json:"subject" validate:"required"`
	Codes           []string        `json:"codes" validate:"required" description:"One-time codes found in the subject and text, best first."`
	AttachmentCount int             `json:"attachment_count" validate:"required"`
	SizeBytes       int             `json:"size_bytes" validate:"required"`
	ReceivedAt      time.Time       `json:"received_at" validate:"required"`
}

// Message is one received message with everything parsed from it.
type Message struct {
	ID              uuid.UUID            `json:"id" validate:"required"`
	ReceiverID      uuid.UUID            `json:"receiver_id" validate:"required"`
	Channel         string               `json:"channel" validate:"required,oneof=email sms"`
	Sender          string               `json:"sender" validate:"required" description:"Envelope sender (MAIL FROM; empty for a bounce), the From address for the email webhook, or the SMS sender's number."`
	From            inbound.Address      `json:"from" validate:"required"`
	To              []inbound.Address    `json:"to" validate:"required"`
	Cc              []inbound.Address    `json:"cc" validate:"required"`
	Recipients      []string             `json:"recipients" validate:"required" description:"Envelope recipients (RCPT TO) of the message that reached this receiver; other recipients, possibly Bcc or of other accounts, are never shown."`
	Subject         string               `json:"subject" validate:"required"`
	Text            string               `json:"text" validate:"required" description:"Plain text body in UTF-8 (the SMS body for SMS)."`
	HTML            string               `json:"html" validate:"required" description:"HTML body in UTF-8; empty when there is none."`
	Date            *time.Time           `json:"date" validate:"required" description:"The Date header; null when absent or unreadable."`
	RFC822MessageID string               `json:"rfc822_message_id" validate:"required" description:"The Message-ID header (or Twilio's MessageSid)."`
	Headers         []inbound.Header     `json:"headers" validate:"required"`
	Attachments     []inbound.Attachment `json:"attachments" validate:"required" description:"Metadata only; the content is in the raw message."`
	Links           []string             `json:"links" validate:"required"`
	Codes           []string             `json:"codes" validate:"required" description:"One-time codes found in the subject and text, best first."`
	Media           []twilio.Media       `json:"media" validate:"required" description:"MMS media hosted by Twilio; empty for email."`
	SizeBytes       int                  `json:"size_bytes" validate:"required"`
	ReceivedAt      time.Time            `json:"received_at" validate:"required"`
}

func decodeDetails(raw []byte) (receivers.Details, error) {
	var d receivers.Details
	if err := json.Unmarshal(raw, &d); err != nil {
		return d, fmt.Errorf("error decoding stored message details: %w", err)
	}
	d.To, d.Cc, d.Recipients = nonNilSlice(d.To), nonNilSlice(d.Cc), nonNilSlice(d.Recipients)
	d.Headers, d.Attachments = nonNilSlice(d.Headers), nonNilSlice(d.Attachments)
	d.Links, d.Codes, d.Media = nonNilSlice(d.Links), nonNilSlice(d.Codes), nonNilSlice(d.Media)
	return d, nil
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func messageFromRow(r dbsqlc.MessageGetRow) (*Message, error) {
	d, err := decodeDetails(r.Parsed)
	if err != nil {
		return nil, err
	}
	var date *time.Time
	if d.Date != nil {
		t := d.Date.UTC()
		date = &t
	}
	return &Message{
		ID: r.ID, ReceiverID: r.ReceiverID, Channel: r.Channel, Sender: r.Sender, From: d.From, To: d.To, Cc: d.Cc,
		Recipients: d.Recipients, Subject: r.Subject, Text: r.TextBody, HTML: r.HtmlBody, Date: date,
		RFC822MessageID: d.MessageID, Headers: d.Headers, Attachments: d.Attachments, Links: d.Links, Codes: d.Codes,
		Media: d.Media, SizeBytes: int(r.SizeBytes), ReceivedAt: r.ReceivedAt.UTC(),
	}, nil
}

// pagedList is a JSON array with the X-Next-Cursor header of the next page.
type pagedList[T any] struct {
	items []T
	next  string
}

type nextCursorHeader struct {
	NextCursor string `header:"X-Next-Cursor" description:"Present when the page is full: pass it as cursor for the next page."`
}

// MarshalJSON encodes the items as an array.
func (p *pagedList[T]) MarshalJSON() ([]byte, error) { return json.Marshal(nonNilSlice(p.items)) }

// ResponseBody implements BodyProvider: the items go through the API's
// encoder (MarshalJSON's output would keep encoding/json's HTML escapes).
func (p *pagedList[T]) ResponseBody() any { return nonNilSlice(p.items) }

// ResponseHeaders implements HeaderSetter.
func (p *pagedList[T]) ResponseHeaders() map[string]string {
	return map[string]string{"X-Next-Cursor": p.next}
}

// OpenAPIBody documents the array.
func (*pagedList[T]) OpenAPIBody() any { return new([]T) }

// OpenAPIHeaders documents the cursor header.
func (*pagedList[T]) OpenAPIHeaders() any { return new(nextCursorHeader) }

func (p *pagedList[T]) setNext(full bool, last func() string) {
	if full {
		p.next = last()
	}
}

// WaitResponse is the message a wait returns, or 204.
type WaitResponse struct {
	*Message
	empty bool
}

// HTTPStatus implements StatusCoder.
func (w *WaitResponse) HTTPStatus() int {
	if w.empty {
		return http.StatusNoContent
	}
	return http.StatusOK
}

// OpenAPIBody documents the 200 body.
func (*WaitResponse) OpenAPIBody() any { return new(Message) }

// OpenAPIAlternatives documents the 204.
func (*WaitResponse) OpenAPIAlternatives() []int { return []int{http.StatusNoContent} }

func (s *Server) receiverRoutes() {
	// api.New builds the routes in order: inbound.go's routes, registered
	// after these, use the same hub.
	if s.deps.Waiters == nil {
		s.deps.Waiters = receivers.NewHub(nil, s.logger)
	}
	const base = "/api/accounts/me/receivers"
	gone := "An expired receiver answers 410 until it is deleted 24 h after expiry; then 404."
	s.ops.CreateReceiver = Handle(s.router, Endpoint[CreateReceiverRequest, Receiver]{
		Method: "POST", Path: base, Status: 201, OperationID: "createReceiver", Tag: "receivers",
		Summary: "Create a receiver (temporary inbox)",
		Description: "An email receiver gets a random address of the inbound domain; an SMS receiver takes a free number " +
			"of the operator's pool (503 when none is free). The body may be empty: email, no label, 3600 s.",
		Errors: []int{402, 503},
		Call:   s.createReceiver,
	})
	s.ops.ListReceivers = Handle(s.router, Endpoint[ListReceiversRequest, pagedList[Receiver]]{
		Method: "GET", Path: base, OperationID: "listReceivers", Tag: "receivers",
		Summary:     "List the account's receivers, newest first",
		Description: "Includes expired receivers until they are purged (expired: true).",
		Call:        s.listReceivers,
	})
	s.ops.GetReceiver = Handle(s.router, Endpoint[ReceiverPath, Receiver]{
		Method: "GET", Path: base + "/{id}", OperationID: "getReceiver", Tag: "receivers",
		Summary: "Get a receiver", Description: gone, Errors: []int{404, 410},
		Call: func(ctx context.Context, req *ReceiverPath) (*Receiver, error) {
			r, err := s.liveReceiver(ctx, req.ID)
			if err != nil {
				return nil, err
			}
			out := s.receiverFromRow(r)
			return &out, nil
		},
	})
	Handle(s.router, Endpoint[ReceiverPath, NoContent]{
		Method: "DELETE", Path: base + "/{id}", Status: 204, OperationID: "deleteReceiver", Tag: "receivers",
		Summary:     "Delete a receiver and its messages",
		Description: "Releases its SMS number at once; waiting requests answer 404. " + gone,
		Errors:      []int{404, 410},
		Call:        s.deleteReceiver,
	})
	s.ops.ListReceiverMessages = Handle(s.router, Endpoint[ListMessagesRequest, pagedList[MessageSummary]]{
		Method: "GET", Path: base + "/{id}/messages", OperationID: "listReceiverMessages", Tag: "receivers",
		Summary: "List a receiver's messages", Description: "Newest first (order=desc, the default) or in arrival order (order=asc). " + gone,
		Errors: []int{404, 410},
		Call:   s.listMessages,
	})
	s.ops.GetReceiverMessage = Handle(s.router, Endpoint[MessagePath, Message]{
		Method: "GET", Path: base + "/{id}/messages/{message_id}", OperationID: "getReceiverMessage", Tag: "receivers",
		Summary: "Get a message with its parsed content, links and codes", Description: gone, Errors: []int{404, 410},
		Call: s.getMessage,
	})
	s.router.rawTypes["GET "+base+"/{id}/messages/{message_id}/raw"] = "message/rfc822"
	Handle(s.router, Endpoint[MessagePath, RawBody]{
		Method: "GET", Path: base + "/{id}/messages/{message_id}/raw", OperationID: "getReceiverMessageRaw", Tag: "receivers",
		Summary: "Download a message as received (message/rfc822)",
		Description: "The bytes as received, with the Return-Path and Received fields the listener added, served as a download " +
			"(Content-Disposition: attachment; filename=\"message-<message_id>.eml\", X-Content-Type-Options: nosniff). SMS messages have none (404). " + gone,
		Errors: []int{404, 410},
		Call:   s.getMessageRaw,
	})
	Handle(s.router, Endpoint[MessagePath, NoContent]{
		Method: "DELETE", Path: base + "/{id}/messages/{message_id}", Status: 204, OperationID: "deleteReceiverMessage", Tag: "receivers",
		Summary:     "Delete a message",
		Description: "Writes the audit event message_deleted (with the key identifier) in the same transaction. " + gone,
		Errors:      []int{404, 410},
		Call:        s.deleteMessage,
	})
	s.ops.WaitReceiver = Handle(s.router, Endpoint[WaitRequest, WaitResponse]{
		Method: "GET", Path: base + "/{id}/wait", OperationID: "waitReceiver", Tag: "receivers",
		Summary: "Wait for a message (long poll)",
		Description: "Answers 200 with the oldest message newer than `after` (or the oldest message when `after` is absent) " +
			"at once if there is one, otherwise as soon as one arrives; 204 when none arrives within `timeout` seconds. " +
			"Loop with after=<id of the last message> to read every message exactly once. 410 once the receiver expires " +
			"(also during the wait), 404 when it is deleted (also during the wait), 422 when `after` is no message of this " +
			"receiver. A wait costs one request of the rate limit. When the server shuts down, waits end with 503: retry.",
		Errors:  []int{404, 410},
		Timeout: func(req *WaitRequest) time.Duration { return time.Duration(waitSeconds(req))*time.Second + waitMargin },
		Call:    s.waitReceiver,
	})
}

func waitSeconds(req *WaitRequest) int {
	if req.Timeout == nil {
		return waitDefaultTimeout
	}
	return *req.Timeout
}

// liveReceiver loads the caller's receiver: 404 when absent or another
// account's, 410 when expired.
func (s *Server) liveReceiver(ctx context.Context, id uuid.UUID) (dbsqlc.Receiver, error) {
	r, err := s.q.ReceiverGetForAccount(ctx, s.db, dbsqlc.ReceiverGetForAccountParams{ID: id, AccountID: mustCaller(ctx).AccountID})
	if dbutil.IsNotFound(err) {
		return r, NotFound("receiver")
	}
	if err != nil {
		return r, err
	}
	if !s.now().Before(r.ExpiresAt) {
		return r, receiverGone(r.ExpiresAt)
	}
	return r, nil
}

func receiverGone(expiresAt time.Time) *Error {
	return Gone("receiver expired at %s; it and its messages are deleted %s later",
		expiresAt.UTC().Format(time.RFC3339), "24 h")
}

// newEmailLocalPart returns 20 random base32 characters (100 bits).
func newEmailLocalPart() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[b[i]&31]
	}
	return string(b)
}

func (s *Server) createReceiver(ctx context.Context, req *CreateReceiverRequest) (*Receiver, error) {
	caller := mustCaller(ctx)
	channel := req.Channel
	if channel == "" {
		channel = receivers.ChannelEmail
	}
	ttl := receiverDefaultTTL
	if req.TTLSeconds != nil {
		ttl = *req.TTLSeconds
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	params := dbsqlc.ReceiverInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: caller.AccountID, Channel: channel, Label: strings.TrimSpace(req.Label),
		TtlSeconds: int32(ttl), ExpiresAt: now.Add(time.Duration(ttl) * time.Second), CreatedAt: now,
	}
	if channel == receivers.ChannelEmail {
		domain := s.deps.InboundDomain
		if domain == "" {
			return nil, Unavailable("email receivers are not configured on this server (INBOUND_DOMAIN is unset)")
		}
		for attempt := 0; ; attempt++ {
			params.Address = newEmailLocalPart() + "@" + strings.ToLower(domain)
			row, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.Receiver, error) {
				if err := s.checkPlanLimit(ctx, tx, caller.AccountID, plans.LimitReceivers); err != nil { // billing.go
					return dbsqlc.Receiver{}, err
				}
				return s.q.ReceiverInsert(ctx, tx, params)
			})
			if dbutil.IsUniqueViolation(err, "receivers_email_address_key") && attempt < 3 {
				continue
			}
			if err != nil {
				return nil, err
			}
			out := s.receiverFromRow(row)
			return &out, nil
		}
	}
	row, err := dbutil.WithTxV(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.Receiver, error) {
		if err := s.checkPlanLimit(ctx, tx, caller.AccountID, plans.LimitReceivers); err != nil { // billing.go
			return dbsqlc.Receiver{}, err
		}
		number, err := s.q.SMSNumberPickFree(ctx, tx, now)
		if dbutil.IsNotFound(err) {
			return dbsqlc.Receiver{}, Unavailable("no SMS number is free: every number of the pool is held by a live receiver; " +
				"try again when one expires or ask the operator to add numbers")
		}
		if err != nil {
			return dbsqlc.Receiver{}, err
		}
		params.Address = number
		row, err := s.q.ReceiverInsert(ctx, tx, params)
		if err != nil {
			return row, err
		}
		return row, s.q.SMSNumberAssign(ctx, tx, dbsqlc.SMSNumberAssignParams{ReceiverID: row.ID, Now: now, PhoneNumber: number})
	})
	if err != nil {
		return nil, err
	}
	out := s.receiverFromRow(row)
	return &out, nil
}

func (s *Server) listReceivers(ctx context.Context, req *ListReceiversRequest) (*pagedList[Receiver], error) {
	limit := 50
	if req.Limit != nil {
		limit = *req.Limit
	}
	rows, err := s.q.ReceiverListByAccount(ctx, s.db, dbsqlc.ReceiverListByAccountParams{
		AccountID: mustCaller(ctx).AccountID, Before: req.Cursor, Max: int32(limit),
	})
	if err != nil {
		return nil, err
	}
	out := &pagedList[Receiver]{items: make([]Receiver, len(rows))}
	for i, r := range rows {
		out.items[i] = s.receiverFromRow(r)
	}
	out.setNext(len(rows) == limit, func() string { return rows[len(rows)-1].ID.String() })
	return out, nil
}

func (s *Server) deleteReceiver(ctx context.Context, req *ReceiverPath) (*NoContent, error) {
	caller := mustCaller(ctx)
	err := dbutil.WithTx(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) error {
		r, err := s.q.ReceiverGetForAccount(ctx, tx, dbsqlc.ReceiverGetForAccountParams{ID: req.ID, AccountID: caller.AccountID})
		if dbutil.IsNotFound(err) {
			return NotFound("receiver")
		}
		if err != nil {
			return err
		}
		if !s.now().Before(r.ExpiresAt) {
			return receiverGone(r.ExpiresAt)
		}
		n, err := s.q.ReceiverDeleteForAccount(ctx, tx, dbsqlc.ReceiverDeleteForAccountParams{ID: req.ID, AccountID: caller.AccountID})
		if err != nil {
			return err
		}
		if n == 0 {
			return NotFound("receiver")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.deps.Waiters.WakeLocal(req.ID)
	return &NoContent{}, nil
}

func (s *Server) listMessages(ctx context.Context, req *ListMessagesRequest) (*pagedList[MessageSummary], error) {
	r, err := s.liveReceiver(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	limit := 50
	if req.Limit != nil {
		limit = *req.Limit
	}
	asc := req.Order == "asc"
	var cursorSeq int64
	if req.Cursor != nil {
		cursorSeq, err = s.q.MessageGetSeq(ctx, s.db, dbsqlc.MessageGetSeqParams{ID: *req.Cursor, ReceiverID: r.ID})
		if dbutil.IsNotFound(err) {
			return nil, InvalidField("cursor", "is no message of this receiver")
		}
		if err != nil {
			return nil, err
		}
	} else if !asc {
		cursorSeq = r.LastSeq + 1
	}
	type row struct {
		id         uuid.UUID
		channel    string
		sender     string
		subject    string
		parsed     []byte
		size       int32
		receivedAt time.Time
	}
	var rows []row
	if asc {
		rs, err := s.q.MessageListAsc(ctx, s.db, dbsqlc.MessageListAscParams{ReceiverID: r.ID, AfterSeq: cursorSeq, Max: int32(limit)})
		if err != nil {
			return nil, err
		}
		for _, m := range rs {
			rows = append(rows, row{m.ID, m.Channel, m.Sender, m.Subject, m.Parsed, m.SizeBytes, m.ReceivedAt})
		}
	} else {
		rs, err := s.q.MessageListDesc(ctx, s.db, dbsqlc.MessageListDescParams{ReceiverID: r.ID, BeforeSeq: cursorSeq, Max: int32(limit)})
		if err != nil {
			return nil, err
		}
		for _, m := range rs {
			rows = append(rows, row{m.ID, m.Channel, m.Sender, m.Subject, m.Parsed, m.SizeBytes, m.ReceivedAt})
		}
	}
	out := &pagedList[MessageSummary]{items: make([]MessageSummary, len(rows))}
	for i, m := range rows {
		d, err := decodeDetails(m.parsed)
		if err != nil {
			return nil, err
		}
		out.items[i] = MessageSummary{
			ID: m.id, ReceiverID: r.ID, Channel: m.channel, Sender: m.sender, From: d.From, Subject: m.subject,
			Codes: d.Codes, AttachmentCount: len(d.Attachments), SizeBytes: int(m.size), ReceivedAt: m.receivedAt.UTC(),
		}
	}
	out.setNext(len(rows) == limit, func() string { return rows[len(rows)-1].id.String() })
	return out, nil
}

func (s *Server) getMessage(ctx context.Context, req *MessagePath) (*Message, error) {
	r, err := s.liveReceiver(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	row, err := s.q.MessageGet(ctx, s.db, dbsqlc.MessageGetParams{ID: req.MessageID, ReceiverID: r.ID, AccountID: r.AccountID})
	if dbutil.IsNotFound(err) {
		return nil, NotFound("message")
	}
	if err != nil {
		return nil, err
	}
	return messageFromRow(row)
}

func (s *Server) getMessageRaw(ctx context.Context, req *MessagePath) (*RawBody, error) {
	r, err := s.liveReceiver(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	raw, err := s.q.MessageGetRaw(ctx, s.db, dbsqlc.MessageGetRawParams{ID: req.MessageID, ReceiverID: r.ID, AccountID: r.AccountID})
	if dbutil.IsNotFound(err) {
		return nil, NotFound("message")
	}
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, &Error{Status: http.StatusNotFound, Detail: "SMS messages have no raw form; GET the message instead"}
	}
	// The bytes are the sender's: a browser must neither sniff them into
	// HTML nor render them in our origin, only save them.
	return &RawBody{ContentType: "message/rfc822", Body: raw, Headers: map[string]string{
		fiber.HeaderXContentTypeOptions: "nosniff",
		fiber.HeaderContentDisposition:  `attachment; filename="message-` + req.MessageID.String() + `.eml"`,
	}}, nil
}

func (s *Server) deleteMessage(ctx context.Context, req *MessagePath) (*NoContent, error) {
	caller := mustCaller(ctx)
	r, err := s.liveReceiver(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	err = dbutil.WithTx(ctx, s.db, func(ctx context.Context, tx dbutil.Tx) error {
		n, err := s.q.MessageDelete(ctx, tx, dbsqlc.MessageDeleteParams{ID: req.MessageID, ReceiverID: r.ID, AccountID: caller.AccountID})
		if err != nil {
			return err
		}
		if n == 0 {
			return NotFound("message")
		}
		_, err = s.deps.Emitter.Emit(ctx, tx, events.Event{
			AccountID: caller.AccountID,
			Type:      events.TypeMessageDeleted,
			Payload:   map[string]any{"receiver_id": r.ID, "message_id": req.MessageID, "key_identifier": caller.KeyIdentifier},
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &NoContent{}, nil
}

// waitReceiver registers the waiter first and only then looks at the
// database, so a message committed between the look and the wait still
// wakes it. It holds no database connection while it waits.
func (s *Server) waitReceiver(ctx context.Context, req *WaitRequest) (*WaitResponse, error) {
	caller := mustCaller(ctx)
	hub := s.deps.Waiters
	w, err := hub.Register(req.ID)
	if errors.Is(err, receivers.ErrHubClosed) {
		return nil, shuttingDown()
	}
	if err != nil {
		return nil, err
	}
	defer w.Close()
	deadline := time.NewTimer(time.Duration(waitSeconds(req)) * time.Second)
	defer deadline.Stop()

	r, err := s.liveReceiver(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	var afterSeq int64
	if req.After != nil {
		afterSeq, err = s.q.MessageGetSeq(ctx, s.db, dbsqlc.MessageGetSeqParams{ID: *req.After, ReceiverID: r.ID})
		if dbutil.IsNotFound(err) {
			return nil, InvalidField("after", "is no message of this receiver")
		}
		if err != nil {
			return nil, err
		}
	}
	expiry := time.NewTimer(time.Until(r.ExpiresAt) + time.Millisecond)
	defer expiry.Stop()
	for {
		msg, err := s.nextMessage(ctx, caller.AccountID, req.ID, afterSeq)
		if err != nil || msg != nil {
			return msg, err
		}
		select {
		case <-w.C:
		case <-expiry.C:
			expiry.Reset(time.Second) // re-check until the clocks agree
		case <-deadline.C:
			return &WaitResponse{empty: true}, nil
		case <-hub.Done():
			return nil, shuttingDown()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// nextMessage returns the oldest message after afterSeq, nil when there is
// none yet, or the error a wait ends with (404, 410).
func (s *Server) nextMessage(ctx context.Context, account, receiverID uuid.UUID, afterSeq int64) (*WaitResponse, error) {
	m, err := s.q.MessageNextForWait(ctx, s.db, dbsqlc.MessageNextForWaitParams{ReceiverID: receiverID, AccountID: account, AfterSeq: afterSeq})
	if err == nil {
		if !s.now().Before(m.ExpiresAt) {
			return nil, receiverGone(m.ExpiresAt)
		}
		msg, err := messageFromRow(dbsqlc.MessageGetRow{
			ID: m.ID, ReceiverID: m.ReceiverID, AccountID: m.AccountID, Seq: m.Seq, Channel: m.Channel, Sender: m.Sender,
			Subject: m.Subject, TextBody: m.TextBody, HtmlBody: m.HtmlBody, Parsed: m.Parsed, SizeBytes: m.SizeBytes, ReceivedAt: m.ReceivedAt,
		})
		if err != nil {
			return nil, err
		}
		return &WaitResponse{Message: msg}, nil
	}
	if !dbutil.IsNotFound(err) {
		return nil, err
	}
	r, err := s.q.ReceiverGetForAccount(ctx, s.db, dbsqlc.ReceiverGetForAccountParams{ID: receiverID, AccountID: account})
	if dbutil.IsNotFound(err) {
		return nil, NotFound("receiver")
	}
	if err != nil {
		return nil, err
	}
	if !s.now().Before(r.ExpiresAt) {
		return nil, receiverGone(r.ExpiresAt)
	}
	return nil, nil
}

func shuttingDown() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Detail: "the server is shutting down; repeat the wait", Headers: map[string]string{"Retry-After": "1"}}
}

// fillDashboardReceivers fills this feature's part of the dashboard summary.
func (s *Server) fillDashboardReceivers(ctx context.Context, account uuid.UUID, out *DashboardSummary) error {
	now := s.now()
	active, err := s.q.ReceiverCountActive(ctx, s.db, dbsqlc.ReceiverCountActiveParams{AccountID: account, Now: now})
	if err != nil {
		return err
	}
	msgs, err := s.q.MessageCountSince(ctx, s.db, dbsqlc.MessageCountSinceParams{AccountID: account, Since: now.Add(-24 * time.Hour)})
	if err != nil {
		return err
	}
	out.Receivers = DashboardReceivers{Active: active, MessagesLast24h: msgs}
	return nil
}

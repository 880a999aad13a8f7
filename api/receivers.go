package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/billing"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/inbound"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/twilio"
)

// Wait bounds (docs/features/receivers.md); the lifetimes
// are internal/receivers' (DefaultTTL, MinTTL, MaxTTL, PurgeGrace).
const (
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
	After   *uuid.UUID `query:"after" format:"uuid" description:"Id of the last message seen: the answer is the oldest message that arrived after it. Without it (and without filters), the oldest message of the receiver."`
	WaitFilters
}

// LabelWaitRequest is a long poll on every live receiver with a label.
type LabelWaitRequest struct {
	Label   string `query:"label" validate:"required,max=100" description:"The label of the receivers to watch: the account's live receivers with exactly this label when the wait starts (at most 100)."`
	Timeout *int   `query:"timeout" validate:"omitempty,min=1,max=60" description:"Seconds to wait, 1 to 60; default 20."`
	WaitFilters
}

// WaitFilters make a wait a matching wait (internal/receivers Match): it
// answers only messages that pass every filter given, and, without since
// (or after), only messages that arrive after the request. The bounds are
// internal/receivers' (MaxFilterChars, MaxHeaderFilters, MaxCount, ...).
type WaitFilters struct {
	From            *string    `query:"from" validate:"omitempty,min=1,max=256" description:"The From address (the envelope sender when there is none; the number for SMS). Local part exact, domain case-insensitive; @example.com matches the whole domain."`
	To              *string    `query:"to" validate:"omitempty,min=1,max=256" description:"Any To or Cc address or envelope recipient, compared as from."`
	SubjectContains *string    `query:"subject_contains" validate:"omitempty,min=1,max=256" description:"Text the subject contains, case-insensitive."`
	BodyContains    *string    `query:"body_contains" validate:"omitempty,min=1,max=256" description:"Text the text part or the HTML part (markup included) contains, case-insensitive; the first 256 KiB of each part are examined."`
	Header          []string   `query:"header" validate:"omitempty,max=10,dive,min=2,max=333" description:"Name:Value, repeatable up to 10 times: a header with this name (case-insensitive) and this value (exact, surrounding spaces trimmed); Name: alone asks only that the header be present."`
	Count           *int       `query:"count" validate:"omitempty,min=1,max=50" description:"Wait until this many matching messages exist, 1 to 50, and answer them all in messages (oldest first; the message itself is the first)."`
	Since           *time.Time `query:"since" description:"Count only messages received at or after this time. Default: the moment of the request (no look-back), or the after cursor when after is given."`
}

// match is the receivers.Match of the filters, nil when none is given (a
// plain wait, as before filters existed).
func (f *WaitFilters) match() (*receivers.Match, error) {
	if f.From == nil && f.To == nil && f.SubjectContains == nil && f.BodyContains == nil && f.Header == nil &&
		f.Count == nil && f.Since == nil {
		return nil, nil
	}
	m := &receivers.Match{Since: f.Since}
	for _, p := range []struct {
		dst *string
		v   *string
	}{{&m.From, f.From}, {&m.To, f.To}, {&m.SubjectContains, f.SubjectContains}, {&m.BodyContains, f.BodyContains}} {
		if p.v != nil {
			*p.dst = *p.v
		}
	}
	if f.Count != nil {
		m.Count = *f.Count
	}
	for _, raw := range f.Header {
		h, err := receivers.ParseHeaderFilter(raw)
		if err != nil {
			return nil, err
		}
		m.Headers = append(m.Headers, h)
	}
	return m, m.Validate()
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
	// Analysis is receivers_analysis.go's.
	Analysis *MessageAnalysisSummary `json:"analysis,omitempty" description:"The deliverability analysis: status, and once done the grade, score and SPF/DKIM/DMARC verdicts."`
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
	// Analysis is receivers_analysis.go's.
	Analysis *MessageAnalysisSummary `json:"analysis,omitempty" description:"The deliverability analysis: status, and once done the grade, score and SPF/DKIM/DMARC verdicts (GET .../analysis has the report). Absent in wait answers."`
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func messageOf(m *receivers.Message) *Message {
	d := m.Details
	var date *time.Time
	if d.Date != nil {
		t := d.Date.UTC()
		date = &t
	}
	return &Message{
		ID: m.ID, ReceiverID: m.ReceiverID, Channel: m.Channel, Sender: m.Sender, From: d.From, To: d.To, Cc: d.Cc,
		Recipients: d.Recipients, Subject: m.Subject, Text: m.TextBody, HTML: m.HTMLBody, Date: date,
		RFC822MessageID: d.MessageID, Headers: d.Headers, Attachments: d.Attachments, Links: d.Links, Codes: d.Codes,
		Media: d.Media, SizeBytes: m.SizeBytes, ReceivedAt: m.ReceivedAt,
	}
}

func messageSummaryOf(m receivers.Message) MessageSummary {
	d := m.Details
	return MessageSummary{
		ID: m.ID, ReceiverID: m.ReceiverID, Channel: m.Channel, Sender: m.Sender, From: d.From, Subject: m.Subject,
		Codes: d.Codes, AttachmentCount: len(d.Attachments), SizeBytes: m.SizeBytes, ReceivedAt: m.ReceivedAt,
	}
}

// WaitMessage is what a wait answers: the message, and with count all the
// matching messages.
type WaitMessage struct {
	Message
	Messages []Message `json:"messages,omitempty" description:"Only when count is given: the count matching messages, oldest first (the first is the message itself)."`
}

// WaitResponse is the message a wait returns, or 204.
type WaitResponse struct {
	*WaitMessage
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
func (*WaitResponse) OpenAPIBody() any { return new(WaitMessage) }

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
	s.ops.ListReceivers = Handle(s.router, Endpoint[ListReceiversRequest, Page[Receiver]]{
		Method: "GET", Path: base, OperationID: "listReceivers", Tag: "receivers",
		Summary:     "List the account's receivers, newest first",
		Description: "Includes expired receivers until they are purged (expired: true).",
		Call:        s.listReceivers,
	})
	// Before /{id}: the router tries routes in order.
	s.receiverDailyRoute(base)
	Handle(s.router, Endpoint[LabelWaitRequest, WaitResponse]{
		Method: "GET", Path: base + "/wait", OperationID: "waitReceivers", Tag: "receivers",
		Summary: "Wait for a matching message on every receiver with a label (long poll)",
		Description: "A matching wait (the filters of GET .../receivers/{id}/wait) on all of the account's live receivers " +
			"whose label is `label` when the request arrives (at most 100; receivers created during the wait are not " +
			"watched). Without `since`, only messages that arrive after the request count. 200 with the oldest matching " +
			"message (with `count`, all of them in `messages`), 204 when they do not all arrive within `timeout` seconds, " +
			"404 when no live receiver has the label; a receiver that expires or is deleted during the wait stops being " +
			"watched, and when none is left the wait answers 410 (expired) or 404 (deleted).",
		Errors: []int{404, 410},
		Timeout: func(req *LabelWaitRequest) time.Duration {
			return time.Duration(timeoutOr(req.Timeout))*time.Second + waitMargin
		},
		Call: s.waitReceivers,
	})
	s.ops.GetReceiver = Handle(s.router, Endpoint[ReceiverPath, Receiver]{
		Method: "GET", Path: base + "/{id}", OperationID: "getReceiver", Tag: "receivers",
		Summary: "Get a receiver", Description: gone, Errors: []int{404, 410},
		Call: s.getReceiver,
	})
	Handle(s.router, Endpoint[ReceiverPath, NoContent]{
		Method: "DELETE", Path: base + "/{id}", Status: 204, OperationID: "deleteReceiver", Tag: "receivers",
		Summary:     "Delete a receiver and its messages",
		Description: "Releases its SMS number at once; waiting requests answer 404. " + gone,
		Errors:      []int{404, 410},
		Call:        s.deleteReceiver,
	})
	s.ops.ListReceiverMessages = Handle(s.router, Endpoint[ListMessagesRequest, Page[MessageSummary]]{
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
			"receiver. A wait costs one request of the rate limit. When the server shuts down, waits end with 503: retry. " +
			"Filters (from, to, subject_contains, body_contains, header, count, since) make it a matching wait: the " +
			"answer is the oldest message that passes every filter given (with `count`, the first `count` of them, all in " +
			"`messages`, answered once the last arrives), and without `since` or `after` only messages that arrive after " +
			"the request count. Filters are checked in memory on each arrival; a value out of bounds is 422.",
		Errors: []int{404, 410},
		Timeout: func(req *WaitRequest) time.Duration {
			return time.Duration(timeoutOr(req.Timeout))*time.Second + waitMargin
		},
		Call: s.waitReceiver,
	})
	s.receiverAnalysisRoutes()
}

func timeoutOr(timeout *int) int {
	if timeout == nil {
		return waitDefaultTimeout
	}
	return *timeout
}

// receiverError maps internal/receivers' errors to the API's answers; other
// errors pass as they are.
func receiverError(err error) error {
	var gone *receivers.GoneError
	var limit *billing.LimitError
	switch {
	case errors.Is(err, receivers.ErrNotFound):
		return NotFound("receiver")
	case errors.As(err, &gone):
		return Gone("receiver expired at %s; it and its messages are deleted %s later",
			gone.ExpiresAt.UTC().Format(time.RFC3339), "24 h")
	case errors.Is(err, receivers.ErrMessageNotFound):
		return NotFound("message")
	case errors.Is(err, receivers.ErrNoRaw):
		return &Error{Status: http.StatusNotFound, Detail: "SMS messages have no raw form; GET the message instead"}
	case errors.Is(err, receivers.ErrEmailUnconfigured):
		return Unavailable("email receivers are not configured on this server (INBOUND_DOMAIN is unset)")
	case errors.Is(err, receivers.ErrNoFreeNumber):
		return Unavailable("no SMS number is free: every number of the pool is held by a live receiver; " +
			"try again when one expires or ask the operator to add numbers")
	case errors.Is(err, receivers.ErrNoLabelledReceiver):
		return &Error{Status: http.StatusNotFound, Detail: "no live receiver of this account has this label"}
	case errors.Is(err, receivers.ErrHubClosed):
		return &Error{Status: http.StatusServiceUnavailable, Detail: "the server is shutting down; repeat the wait", Headers: map[string]string{"Retry-After": "1"}}
	case errors.As(err, &limit):
		return &Error{Status: http.StatusPaymentRequired, Detail: limit.Error()}
	}
	return err
}

// getReceiver serves GET /api/accounts/me/receivers/{id}: get a receiver.
func (s *Server) getReceiver(ctx context.Context, req *ReceiverPath) (*Receiver, error) {
	r, err := receivers.Get(ctx, s.db, mustCaller(ctx).AccountID, req.ID, s.now())
	if err != nil {
		return nil, receiverError(err)
	}
	out := s.receiverFromRow(r)
	return &out, nil
}

// createReceiver serves POST /api/accounts/me/receivers: create a receiver (temporary inbox).
func (s *Server) createReceiver(ctx context.Context, req *CreateReceiverRequest) (*Receiver, error) {
	n := receivers.NewReceiver{Channel: req.Channel, Label: req.Label, InboundDomain: s.deps.InboundDomain, DefaultPlan: s.deps.DefaultPlan}
	if req.TTLSeconds != nil {
		n.TTLSeconds = *req.TTLSeconds
	}
	row, err := receivers.Create(ctx, s.db, mustCaller(ctx).AccountID, n, s.now())
	if err != nil {
		return nil, receiverError(err)
	}
	out := s.receiverFromRow(row)
	return &out, nil
}

// listReceivers serves GET /api/accounts/me/receivers: list the account's receivers, newest first.
func (s *Server) listReceivers(ctx context.Context, req *ListReceiversRequest) (*Page[Receiver], error) {
	limit := 50
	if req.Limit != nil {
		limit = *req.Limit
	}
	rows, err := receivers.List(ctx, s.db, mustCaller(ctx).AccountID, req.Cursor, limit)
	if err != nil {
		return nil, err
	}
	out := newPage(make([]Receiver, len(rows)), "/api/accounts/me/receivers", limitQuery(limit))
	for i, r := range rows {
		out.Items[i] = s.receiverFromRow(r)
	}
	out.setNextIfFull(limit, func() string { return rows[len(rows)-1].ID.String() })
	return out, nil
}

// deleteReceiver serves DELETE /api/accounts/me/receivers/{id}: delete a receiver and its messages.
func (s *Server) deleteReceiver(ctx context.Context, req *ReceiverPath) (*NoContent, error) {
	if err := receivers.Delete(ctx, s.db, mustCaller(ctx).AccountID, req.ID, s.now()); err != nil {
		return nil, receiverError(err)
	}
	s.deps.Waiters.WakeLocal(req.ID)
	return &NoContent{}, nil
}

// listMessages serves GET /api/accounts/me/receivers/{id}/messages: list a receiver's messages.
func (s *Server) listMessages(ctx context.Context, req *ListMessagesRequest) (*Page[MessageSummary], error) {
	r, err := receivers.Get(ctx, s.db, mustCaller(ctx).AccountID, req.ID, s.now())
	if err != nil {
		return nil, receiverError(err)
	}
	limit := 50
	if req.Limit != nil {
		limit = *req.Limit
	}
	msgs, err := receivers.ListMessages(ctx, s.db, r, receivers.MessagePage{Asc: req.Order == "asc", After: req.Cursor, Limit: limit})
	if errors.Is(err, receivers.ErrNotAMessage) {
		return nil, InvalidField("cursor", "is no message of this receiver")
	}
	if err != nil {
		return nil, receiverError(err)
	}
	q := limitQuery(limit)
	if req.Order != "" {
		q.Set("order", req.Order)
	}
	out := newPage(make([]MessageSummary, len(msgs)), "/api/accounts/me/receivers/"+r.ID.String()+"/messages", q)
	for i, m := range msgs {
		out.Items[i] = messageSummaryOf(m)
	}
	if err := s.fillAnalysisSummaries(ctx, r.ID, out.Items); err != nil {
		return nil, err
	}
	out.setNextIfFull(limit, func() string { return msgs[len(msgs)-1].ID.String() })
	return out, nil
}

// getMessage serves GET /api/accounts/me/receivers/{id}/messages/{message_id}: get a message with its parsed content, links and codes.
func (s *Server) getMessage(ctx context.Context, req *MessagePath) (*Message, error) {
	m, err := receivers.GetMessage(ctx, s.db, mustCaller(ctx).AccountID, req.ID, req.MessageID, s.now())
	if err != nil {
		return nil, receiverError(err)
	}
	return s.withAnalysis(ctx, messageOf(m))
}

// getMessageRaw serves GET /api/accounts/me/receivers/{id}/messages/{message_id}/raw: download a message as received (message/rfc822).
func (s *Server) getMessageRaw(ctx context.Context, req *MessagePath) (*RawBody, error) {
	raw, err := receivers.GetMessageRaw(ctx, s.db, mustCaller(ctx).AccountID, req.ID, req.MessageID, s.now())
	if err != nil {
		return nil, receiverError(err)
	}
	// The bytes are the sender's: a browser must neither sniff them into
	// HTML nor render them in our origin, only save them.
	return &RawBody{ContentType: "message/rfc822", Body: raw, Headers: map[string]string{
		fiber.HeaderXContentTypeOptions: "nosniff",
		fiber.HeaderContentDisposition:  `attachment; filename="message-` + req.MessageID.String() + `.eml"`,
	}}, nil
}

// deleteMessage serves DELETE /api/accounts/me/receivers/{id}/messages/{message_id}: delete a message.
func (s *Server) deleteMessage(ctx context.Context, req *MessagePath) (*NoContent, error) {
	caller := mustCaller(ctx)
	err := receivers.DeleteMessage(ctx, s.db, s.deps.Emitter, caller.AccountID, req.ID, req.MessageID, caller.KeyIdentifier, s.now())
	if err != nil {
		return nil, receiverError(err)
	}
	return &NoContent{}, nil
}

// waitReceiver serves GET /api/accounts/me/receivers/{id}/wait: wait for a message (long poll).
func (s *Server) waitReceiver(ctx context.Context, req *WaitRequest) (*WaitResponse, error) {
	match, err := req.match()
	if err != nil {
		return nil, waitError(err)
	}
	timeout := time.Duration(timeoutOr(req.Timeout)) * time.Second
	if match != nil {
		msgs, err := receivers.WaitMatching(ctx, s.db, s.deps.Waiters, receivers.MatchRequest{
			AccountID: mustCaller(ctx).AccountID, ReceiverID: req.ID, After: req.After, Match: *match, Timeout: timeout, Now: s.now,
		})
		return waitAnswer(msgs, req.Count != nil, err)
	}
	m, err := receivers.Wait(ctx, s.db, s.deps.Waiters, receivers.WaitRequest{
		AccountID: mustCaller(ctx).AccountID, ReceiverID: req.ID, After: req.After, Timeout: timeout, Now: s.now,
	})
	if m == nil {
		return waitAnswer(nil, false, err)
	}
	return waitAnswer([]receivers.Message{*m}, false, err)
}

// waitReceivers serves GET /api/accounts/me/receivers/wait: wait for a matching message on every receiver with a label (long poll).
func (s *Server) waitReceivers(ctx context.Context, req *LabelWaitRequest) (*WaitResponse, error) {
	match, err := req.match()
	if err != nil {
		return nil, waitError(err)
	}
	if match == nil {
		match = &receivers.Match{}
	}
	msgs, err := receivers.WaitMatching(ctx, s.db, s.deps.Waiters, receivers.MatchRequest{
		AccountID: mustCaller(ctx).AccountID, Label: &req.Label, Match: *match,
		Timeout: time.Duration(timeoutOr(req.Timeout)) * time.Second, Now: s.now,
	})
	return waitAnswer(msgs, req.Count != nil, err)
}

// waitAnswer is the response to a wait that found msgs (none: 204); with
// count, all of them are listed.
func waitAnswer(msgs []receivers.Message, withCount bool, err error) (*WaitResponse, error) {
	switch {
	case err != nil:
		return nil, waitError(err)
	case len(msgs) == 0:
		return &WaitResponse{empty: true}, nil
	}
	out := &WaitMessage{Message: *messageOf(&msgs[0])}
	if withCount {
		out.Messages = make([]Message, len(msgs))
		for i := range msgs {
			out.Messages[i] = *messageOf(&msgs[i])
		}
	}
	return &WaitResponse{WaitMessage: out}, nil
}

// waitError maps the errors of a wait.
func waitError(err error) error {
	var filter *receivers.FilterError
	switch {
	case errors.Is(err, receivers.ErrNotAMessage):
		return InvalidField("after", "is no message of this receiver")
	case errors.As(err, &filter):
		return InvalidField(filter.Param, filter.Reason)
	}
	return receiverError(err)
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

// ReceiverDailyRequest is GET /api/accounts/me/receivers/daily-volume.
type ReceiverDailyRequest struct {
	Days *int `query:"days" validate:"omitempty,min=1,max=90" default:"14" description:"UTC days to cover, ending today: 1 to 90 (default 14)."`
}

// ReceiverDaily is the account's messages received per UTC day.
type ReceiverDaily struct {
	From string             `json:"from" validate:"required" format:"date"`
	To   string             `json:"to" validate:"required" format:"date"`
	Days []ReceiverDayCount `json:"days" validate:"required" description:"One entry per day, oldest first, days without messages included."`
}

// ReceiverDayCount is one UTC day of ReceiverDaily.
type ReceiverDayCount struct {
	Date     string `json:"date" validate:"required" format:"date"`
	Messages int64  `json:"messages" validate:"required"`
	Email    int64  `json:"email" validate:"required"`
	SMS      int64  `json:"sms" validate:"required"`
}

// receiverDailyRoute registers GET base/daily-volume (before base/{id}).
func (s *Server) receiverDailyRoute(base string) {
	s.ops.ReceiverDailyVolume = Handle(s.router, Endpoint[ReceiverDailyRequest, ReceiverDaily]{
		Method: "GET", Path: base + "/daily-volume", OperationID: "receiverDailyVolume", Tag: "receivers",
		Summary: "Messages received per UTC day, by channel",
		Description: "Every message the account's receivers stored, over the last `days` UTC days including today, counted " +
			"as it arrived: receivers purged since still count. Kept for 90 days.",
		Call: s.receiverDailyVolume,
	})
}

func (s *Server) receiverDailyVolume(ctx context.Context, req *ReceiverDailyRequest) (*ReceiverDaily, error) {
	from, to := s.dayRange(daysParam(req.Days, 14))
	days, err := receivers.DailyVolume(ctx, s.reads, mustCaller(ctx).AccountID, from, to)
	if err != nil {
		return nil, err
	}
	out := &ReceiverDaily{From: from.Format(dateLayout), To: to.Format(dateLayout), Days: make([]ReceiverDayCount, len(days))}
	for i, d := range days {
		out.Days[i] = ReceiverDayCount{Date: d.Day.Format(dateLayout), Messages: d.Email + d.SMS, Email: d.Email, SMS: d.SMS}
	}
	return out, nil
}

package api

import (
	"errors"
	"net/http"
	"net/mail"
	"net/url"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbutil"
	"github.com/mailwatch/mailwatch/internal/inbound"
	"github.com/mailwatch/mailwatch/internal/mimelimit"
	"github.com/mailwatch/mailwatch/internal/receivers"
	"github.com/mailwatch/mailwatch/internal/twilio"
)

// defaultMaxMessageBytes caps an ingress message when Deps leaves it zero;
// it matches the SMTP listener's default.
const defaultMaxMessageBytes = 10 << 20

// EmailIngressRequest documents POST /api/webhooks/email. The body is the
// raw message; it is read by the handler, not decoded.
type EmailIngressRequest struct {
	To string `query:"to" validate:"required" description:"The receiver's address, e.g. abc@inbound.example.com (an optional display name or angle brackets are accepted)."`
}

// IngressResult is what an ingress webhook stored.
type IngressResult struct {
	ReceiverID uuid.UUID `json:"receiver_id" validate:"required"`
	MessageID  uuid.UUID `json:"message_id" validate:"required"`
	Duplicate  bool      `json:"duplicate" validate:"required" description:"True when this webhook-id had already been stored: nothing new was stored."`
}

// ParseIngressRecipient reads the `to` parameter of the email ingress
// webhook: a bare address or one mailbox such as `"Ann" <a@b>`. It returns
// the address with the domain in lower case (the local part as given; the
// lookup ignores case).
func ParseIngressRecipient(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errors.New("is required")
	}
	if len(raw) > 512 {
		return "", errors.New("is too long")
	}
	addr, err := mail.ParseAddress(raw)
	if err != nil {
		return "", errors.New("must be one email address such as abc@inbound.example.com")
	}
	at := strings.LastIndexByte(addr.Address, '@')
	if at <= 0 || at == len(addr.Address)-1 || at > 64 {
		return "", errors.New("must be one email address such as abc@inbound.example.com")
	}
	domain := strings.TrimSuffix(strings.ToLower(addr.Address[at+1:]), ".")
	return addr.Address[:at] + "@" + domain, nil
}

// HeaderDuplicate marks an SMS ingress answer to a MessageSid stored
// before (Twilio expects TwiML, so the mark is a header, not a JSON body).
const HeaderDuplicate = "Mailwatch-Duplicate"

// usedWebhookID answers an email ingress request whose webhook-id an earlier
// request consumed: the stored message again when that one was delivered
// (duplicate: true), 409 when it was refused.
func (s *Server) usedWebhookID(c *fiber.Ctx, id, outcome string) error {
	if outcome == receivers.OutcomeDelivered {
		prev, err := s.q.MessageGetByWebhookID(c.UserContext(), s.db, id)
		if dbutil.IsNotFound(err) {
			return Conflict("webhook-id %s was already delivered, and its message has since been deleted", id)
		}
		if err != nil {
			return err
		}
		return c.Status(http.StatusOK).JSON(IngressResult{ReceiverID: prev.ReceiverID, MessageID: prev.ID, Duplicate: true})
	}
	return Conflict("webhook-id %s was already used by a request that was refused (%s); sign each delivery with a new webhook-id",
		id, strings.ReplaceAll(outcome, "_", " "))
}

func (s *Server) inboundRoutes() {
	store := &receivers.Store{
		DB: s.db, Emitter: s.deps.Emitter, Logger: s.logger, Now: s.now, Delivered: s.deps.Waiters.WakeLocal,
	}
	var verifier *inbound.WebhookVerifier
	var verifierErr error
	if s.deps.InboundWebhookSecret != "" {
		verifier, verifierErr = inbound.NewWebhookVerifier(s.deps.InboundWebhookSecret)
	}
	maxBytes := s.deps.MaxMessageBytes
	if maxBytes <= 0 {
		maxBytes = defaultMaxMessageBytes
	}

	HandleRaw(s.router, Endpoint[EmailIngressRequest, IngressResult]{
		Method: "POST", Path: "/api/webhooks/email", OperationID: "ingestEmail", Tag: "webhook ingress", Auth: AuthIngress,
		Summary: "Deliver a raw email to a receiver (Standard Webhooks signed)",
		Description: "The body is one raw RFC 5322 message (Content-Type message/rfc822 or application/octet-stream); " +
			"`to` names the receiver. Signed with Standard Webhooks headers (webhook-id, webhook-timestamp within 5 minutes, " +
			"webhook-signature: v1,<base64 HMAC-SHA256 of id.timestamp.body>) under INBOUND_WEBHOOK_SECRET. The signature covers " +
			"the body only, so a webhook-id is single-use, whatever the first answer was: a repeat of a delivered one answers 200 " +
			"with the message stored the first time (duplicate: true) and is never stored twice or for another receiver; a repeat " +
			"of a refused one (404, 410, 415, 422) answers 409. 401 bad or missing " +
			"signature, 404 unknown receiver, 410 expired receiver, 413 message over the size cap, 422 unreadable message " +
			"(or a MIME structure over a limit: 20 nested multiparts, 1,000 parts; the detail names it) " +
			"or bad `to`, 503 when no secret is configured. No API key; limited per client IP with the webhook-ingress budget.",
		Errors:    []int{401, 404, 409, 410, 413, 415, 422, 503},
		BodyTypes: []string{"message/rfc822", "application/octet-stream", "text/plain"},
	}, func(c *fiber.Ctx) error { return s.ingestEmail(c, store, verifier, verifierErr, maxBytes) })

	s.router.rawTypes["POST /api/webhooks/sms"] = "text/xml"
	HandleRaw(s.router, Endpoint[emptyRequest, RawBody]{
		Method: "POST", Path: "/api/webhooks/sms", OperationID: "ingestSMS", Tag: "webhook ingress", Auth: AuthIngress,
		Summary: "Twilio incoming-message webhook",
		Description: "Point a pool number's \"A message comes in\" webhook (HTTP POST) here. The form is checked against " +
			"X-Twilio-Signature with TWILIO_AUTH_TOKEN over the public URL (PUBLIC_BASE_URL + path and query, or the request's " +
			"own scheme and host), then filed under the receiver holding `To`. Answers an empty TwiML <Response/> " +
			"(text/xml). Twilio signatures carry no timestamp, so each MessageSid is consumed for good by its first answer: a repeat " +
			"of a delivered one answers the same 200 with the header Mailwatch-Duplicate: true and stores nothing (even after the " +
			"receiver was deleted and the number reused); a repeat of a refused one (404, 410) answers 409. 401 bad signature, " +
			"404 no receiver holds the number, 409 MessageSid used by a refused request, 410 its receiver expired, 422 not an " +
			"inbound message, 503 when no token is configured. No API key; limited per client IP with the webhook-ingress budget.",
		Errors:    []int{401, 404, 409, 410, 415, 422, 503},
		BodyTypes: []string{"application/x-www-form-urlencoded"},
	}, func(c *fiber.Ctx) error { return s.ingestSMS(c, store) })
}

// ingestEmail serves POST /api/webhooks/email: checks the signature with verifier (nil when unset or unusable: verifierErr), files the message with store.
func (s *Server) ingestEmail(c *fiber.Ctx, store *receivers.Store, verifier *inbound.WebhookVerifier, verifierErr error, maxBytes int64) error {
	if verifier == nil {
		if verifierErr != nil {
			return &Error{Status: http.StatusServiceUnavailable, Detail: "email ingress is misconfigured on this server", Cause: verifierErr}
		}
		return Unavailable("email ingress is not configured on this server (INBOUND_WEBHOOK_SECRET is unset)")
	}
	body := c.Body()
	if int64(len(body)) > maxBytes {
		return &Error{Status: http.StatusRequestEntityTooLarge, Detail: "message larger than the " + byteCount(maxBytes) + " cap"}
	}
	headers := http.Header{}
	for _, h := range []string{inbound.HeaderWebhookID, inbound.HeaderWebhookTimestamp, inbound.HeaderWebhookSignature} {
		if v := c.Get(h); v != "" {
			headers.Set(h, strings.Clone(v))
		}
	}
	if err := verifier.Verify(headers, body, s.now()); err != nil {
		if errors.Is(err, inbound.ErrWebhookTimestamp) {
			return unauthorized("webhook-timestamp is missing or more than 5 minutes from the server's clock")
		}
		return unauthorized("missing or invalid Standard Webhooks signature (webhook-id, webhook-timestamp, webhook-signature)")
	}
	// From here the request is verified, and its webhook-id is consumed
	// by whatever answer it gets: `to` and the headers are outside the
	// signature, so a refused request must not be replayable with
	// another recipient.
	ctx := c.UserContext()
	webhookID := strings.Clone(c.Get(inbound.HeaderWebhookID))
	refuse := func(outcome string, apiErr *Error) error {
		if err := store.ConsumeWebhookID(ctx, webhookID, outcome); err != nil {
			return err
		}
		return apiErr
	}
	if outcome, err := store.WebhookIDOutcome(ctx, webhookID); err != nil {
		return err
	} else if outcome != "" {
		return s.usedWebhookID(c, webhookID, outcome)
	}
	ct := strings.ToLower(strings.TrimSpace(strings.Split(c.Get(fiber.HeaderContentType), ";")[0]))
	if ct != "" && ct != "message/rfc822" && ct != "application/octet-stream" && ct != "text/plain" {
		return refuse(receivers.OutcomeUnsupportedType, &Error{Status: http.StatusUnsupportedMediaType, Detail: "the body must be a raw message: Content-Type message/rfc822 or application/octet-stream"})
	}
	to, err := ParseIngressRecipient(string(c.Context().QueryArgs().Peek("to")))
	if err != nil {
		return refuse(receivers.OutcomeInvalidRecipient, InvalidField("to", err.Error()))
	}
	raw := append([]byte(nil), body...) // Fiber reuses the body buffer
	delivered, err := store.DeliverEmail(ctx, receivers.EmailDelivery{
		Raw: raw, Recipients: []string{to}, ReceivedAt: s.now(), WebhookID: webhookID,
	})
	var used *receivers.WebhookIDUsedError
	switch {
	case err == nil:
		return c.Status(http.StatusOK).JSON(IngressResult{ReceiverID: delivered[0].ReceiverID, MessageID: delivered[0].MessageID})
	case errors.Is(err, receivers.ErrDuplicate):
		return s.usedWebhookID(c, webhookID, receivers.OutcomeDelivered)
	case errors.As(err, &used):
		return s.usedWebhookID(c, webhookID, used.Outcome)
	case errors.Is(err, receivers.ErrUnknownRecipient):
		return refuse(receivers.OutcomeUnknownRecipient, NotFound("receiver "+to))
	case errors.Is(err, receivers.ErrExpired):
		return refuse(receivers.OutcomeExpired, Gone("receiver %s has expired", to))
	case errors.Is(err, inbound.ErrMessageTooLarge):
		return refuse(receivers.OutcomeUnreadable, &Error{Status: http.StatusRequestEntityTooLarge, Detail: "message too large"})
	case errors.Is(err, inbound.ErrEmptyMessage):
		return refuse(receivers.OutcomeUnreadable, &Error{Status: http.StatusUnprocessableEntity, Detail: "the body is empty: send one raw RFC 5322 message"})
	case errors.Is(err, mimelimit.ErrLimit):
		return refuse(receivers.OutcomeUnreadable, &Error{Status: http.StatusUnprocessableEntity, Detail: receivers.RefusalReason(err)})
	case errors.Is(err, inbound.ErrMalformedMessage):
		return refuse(receivers.OutcomeUnreadable, &Error{Status: http.StatusUnprocessableEntity, Detail: "the body is not a readable RFC 5322 / MIME message"})
	default:
		return err
	}
}

// ingestSMS serves POST /api/webhooks/sms: checks Twilio's signature, files the message with store.
func (s *Server) ingestSMS(c *fiber.Ctx, store *receivers.Store) error {
	if s.deps.TwilioAuthToken == "" {
		return Unavailable("SMS ingress is not configured on this server (TWILIO_AUTH_TOKEN is unset)")
	}
	if !strings.HasPrefix(strings.ToLower(c.Get(fiber.HeaderContentType)), "application/x-www-form-urlencoded") {
		return &Error{Status: http.StatusUnsupportedMediaType, Detail: "Twilio posts application/x-www-form-urlencoded"}
	}
	form, err := url.ParseQuery(string(c.Body()))
	if err != nil {
		return BadRequest("malformed form body: not application/x-www-form-urlencoded")
	}
	fullURL := s.publicURL(c)
	if !twilio.ValidateSignature(s.deps.TwilioAuthToken, fullURL, form, c.Get(twilio.HeaderSignature)) {
		return unauthorized("missing or invalid X-Twilio-Signature (mailwatch signs over PUBLIC_BASE_URL and the request path)")
	}
	sms, err := twilio.ParseInboundSMS(form)
	if err != nil {
		return InvalidField("form", err.Error())
	}
	// From here the MessageSid is consumed by whatever answer the request
	// gets, for good: the signature has no timestamp, so a capture of a
	// request refused today (no receiver holds the number) must not be
	// filed once the number is held again, nor a delivered one be filed
	// again after its receiver was deleted and the number reused.
	ctx := c.UserContext()
	sid := receivers.SMSWebhookID(sms.MessageSid)
	refuse := func(outcome string, apiErr *Error) error {
		if err := store.ConsumeWebhookID(ctx, sid, outcome); err != nil {
			return err
		}
		return apiErr
	}
	usedBefore := func(outcome string) error {
		return Conflict("MessageSid %s was already used by a request that was refused (%s)", sms.MessageSid, strings.ReplaceAll(outcome, "_", " "))
	}
	outcome, err := store.WebhookIDOutcome(ctx, sid)
	if err != nil {
		return err
	}
	var used *receivers.WebhookIDUsedError
	switch {
	case outcome == receivers.OutcomeDelivered:
		err = receivers.ErrDuplicate
	case outcome != "":
		return usedBefore(outcome)
	default:
		_, err = store.DeliverSMS(ctx, sms, s.now())
	}
	switch {
	case errors.Is(err, receivers.ErrDuplicate):
		// A replay (or Twilio's retry) of a stored MessageSid: the same
		// answer, marked, and nothing stored.
		c.Set(HeaderDuplicate, "true")
	case errors.As(err, &used):
		return usedBefore(used.Outcome)
	case errors.Is(err, receivers.ErrUnknownRecipient):
		return refuse(receivers.OutcomeUnknownRecipient, NotFound("receiver holding "+sms.To))
	case errors.Is(err, receivers.ErrExpired):
		return refuse(receivers.OutcomeExpired, Gone("the receiver holding %s has expired", sms.To))
	case err != nil:
		return err
	}
	c.Set(fiber.HeaderContentType, "text/xml")
	return c.Status(http.StatusOK).SendString(`<?xml version="1.0" encoding="UTF-8"?><Response/>`)
}

// publicURL rebuilds the URL the client requested: PUBLIC_BASE_URL when set
// (behind a proxy), else the request's scheme and Host, plus the original
// path and query.
func (s *Server) publicURL(c *fiber.Ctx) string {
	base := strings.TrimSuffix(s.deps.PublicBaseURL, "/")
	if base == "" {
		base = c.Protocol() + "://" + string(c.Request().Host())
	}
	return base + string(c.Request().RequestURI())
}

func byteCount(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

package ses

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/esp"
)

// notification is an SES notification: "notificationType" for identity
// notifications, "eventType" for configuration-set event publishing.
type notification struct {
	NotificationType string `json:"notificationType"`
	EventType        string `json:"eventType"`
	Mail             struct {
		Timestamp   time.Time `json:"timestamp"`
		MessageID   string    `json:"messageId"`
		Source      string    `json:"source"`
		Destination []string  `json:"destination"`
	} `json:"mail"`
	Bounce *struct {
		BounceType        string    `json:"bounceType"`
		BounceSubType     string    `json:"bounceSubType"`
		FeedbackID        string    `json:"feedbackId"`
		Timestamp         time.Time `json:"timestamp"`
		BouncedRecipients []struct {
			EmailAddress   string `json:"emailAddress"`
			Status         string `json:"status"`
			DiagnosticCode string `json:"diagnosticCode"`
		} `json:"bouncedRecipients"`
	} `json:"bounce"`
	Complaint *struct {
		FeedbackID            string    `json:"feedbackId"`
		Timestamp             time.Time `json:"timestamp"`
		ComplaintFeedbackType string    `json:"complaintFeedbackType"`
		ComplainedRecipients  []struct {
			EmailAddress string `json:"emailAddress"`
		} `json:"complainedRecipients"`
	} `json:"complaint"`
	Delivery *struct {
		Timestamp    time.Time `json:"timestamp"`
		Recipients   []string  `json:"recipients"`
		SMTPResponse string    `json:"smtpResponse"`
	} `json:"delivery"`
	DeliveryDelay *struct {
		Timestamp         time.Time `json:"timestamp"`
		DelayType         string    `json:"delayType"`
		DelayedRecipients []struct {
			EmailAddress   string `json:"emailAddress"`
			DiagnosticCode string `json:"diagnosticCode"`
		} `json:"delayedRecipients"`
	} `json:"deliveryDelay"`
	Send *struct{} `json:"send"`
}

// ParseNotification normalises an SES notification (the Message of an SNS
// Notification, or a bare notification) into one event per recipient.
// Types other than bounce, complaint, delivery, send and delivery delay
// give none.
func ParseNotification(message []byte) ([]esp.Event, error) {
	if len(message) > esp.MaxPayloadBytes {
		return nil, esp.Errorf(esp.ErrPayload, "payload too large")
	}
	message = bytes.TrimSpace(message)
	if len(message) == 0 || message[0] != '{' {
		return nil, esp.Errorf(esp.ErrPayload, "an SES notification is a JSON object")
	}
	var n notification
	if err := json.Unmarshal(message, &n); err != nil {
		return nil, esp.Errorf(esp.ErrPayload, "not an SES notification")
	}
	kind := n.NotificationType
	if kind == "" {
		kind = n.EventType
	}
	mid := n.Mail.MessageID
	var out []esp.Event
	add := func(id, rcpt string, e esp.Event) {
		e.ID = id + "/" + strings.ToLower(strings.TrimSpace(rcpt))
		e.MessageID, e.Recipient, e.Sender = mid, rcpt, n.Mail.Source
		out = append(out, e)
	}
	switch kind {
	case "Bounce":
		b := n.Bounce
		if b == nil {
			return nil, esp.Errorf(esp.ErrPayload, "Bounce notification without bounce")
		}
		e := esp.Event{Type: esp.TypeBounced, Timestamp: b.Timestamp, Classification: esp.Join(b.BounceType, b.BounceSubType)}
		switch {
		case b.BounceSubType == "Suppressed" || b.BounceSubType == "OnAccountSuppressionList":
			// SES did not send: the address is on its global or account
			// suppression list. Not a bounce of this sender's mail.
			e.Type = esp.TypeSuppressed
		case b.BounceType == "Permanent":
			e.Bounce = esp.BounceHard
		default: // Transient, Undetermined
			e.Bounce = esp.BounceSoft
		}
		id := b.FeedbackID
		if id == "" {
			id = mid + "/bounce"
		}
		for _, r := range b.BouncedRecipients {
			e.Detail = r.DiagnosticCode
			add(id, r.EmailAddress, e)
		}
	case "Complaint":
		c := n.Complaint
		if c == nil {
			return nil, esp.Errorf(esp.ErrPayload, "Complaint notification without complaint")
		}
		e := esp.Event{Type: esp.TypeComplained, Timestamp: c.Timestamp, Classification: esp.Join("Complaint", c.ComplaintFeedbackType)}
		id := c.FeedbackID
		if id == "" {
			id = mid + "/complaint"
		}
		for _, r := range c.ComplainedRecipients {
			add(id, r.EmailAddress, e)
		}
	case "Delivery":
		d := n.Delivery
		if d == nil {
			return nil, esp.Errorf(esp.ErrPayload, "Delivery notification without delivery")
		}
		e := esp.Event{Type: esp.TypeDelivered, Timestamp: d.Timestamp, Classification: "Delivery", Detail: d.SMTPResponse}
		for _, r := range d.Recipients {
			add(mid+"/delivery", r, e)
		}
	case "Send":
		e := esp.Event{Type: esp.TypeSent, Timestamp: n.Mail.Timestamp, Classification: "Send"}
		for _, r := range n.Mail.Destination {
			add(mid+"/send", r, e)
		}
	case "DeliveryDelay":
		d := n.DeliveryDelay
		if d == nil {
			return nil, esp.Errorf(esp.ErrPayload, "DeliveryDelay notification without deliveryDelay")
		}
		e := esp.Event{Type: esp.TypeDeferred, Timestamp: d.Timestamp, Classification: esp.Join("DeliveryDelay", d.DelayType)}
		for _, r := range d.DelayedRecipients {
			e.Detail = r.DiagnosticCode
			add(mid+"/delay/"+d.Timestamp.UTC().Format(time.RFC3339Nano), r.EmailAddress, e)
		}
	case "":
		return nil, esp.Errorf(esp.ErrPayload, "SES notification without notificationType or eventType")
	default:
		return nil, nil
	}
	return esp.Finish(out)
}

// Parse reads an SNS envelope and, for a Notification, normalises the SES
// notification in its Message (no signature check). Other SNS types give
// no events.
func Parse(body []byte) ([]esp.Event, error) {
	env, err := ParseEnvelope(body)
	if err != nil {
		return nil, err
	}
	if env.Type != TypeNotification {
		return nil, nil
	}
	return ParseNotification([]byte(env.Message))
}

// Package postmark authenticates and parses Postmark's webhooks. Postmark
// does not sign requests; it documents HTTP basic-auth credentials in the
// webhook URL and publishes the IP addresses its webhooks come from, so a
// request is accepted when its basic-auth pair matches (compared in
// constant time) and, when an allow-list is configured, it comes from one
// of those addresses.
package postmark

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/mailwatch/mailwatch/internal/esp"
)

// ParseBasicAuth decodes an Authorization header of the Basic scheme.
func ParseBasicAuth(header string) (user, pass string, err error) {
	const prefix = "Basic "
	if len(header) > 1024 || len(header) < len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return "", "", esp.Errorf(esp.ErrSignature, "missing basic-auth credentials")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(header[len(prefix):]))
	if err != nil {
		return "", "", esp.Errorf(esp.ErrSignature, "basic-auth credentials are not base64")
	}
	u, p, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", esp.Errorf(esp.ErrSignature, "basic-auth credentials lack a colon")
	}
	return u, p, nil
}

// ParseAllowList parses IP addresses and CIDR prefixes.
func ParseAllowList(entries []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(entries))
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if p, err := netip.ParsePrefix(e); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(e)
		if err != nil {
			return nil, esp.Errorf(esp.ErrPayload, "allowed_ips entry "+strconv.Quote(e)+" is not an IP address or CIDR")
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// Verify checks the Authorization header against user and pass in constant
// time, and clientIP against allowed when it is not empty.
func Verify(user, pass, authorization string, clientIP string, allowed []netip.Prefix) error {
	u, p, err := ParseBasicAuth(authorization)
	if err != nil {
		return err
	}
	// Hash first so the comparison's time does not depend on lengths.
	gotU, gotP := sha256.Sum256([]byte(u)), sha256.Sum256([]byte(p))
	wantU, wantP := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	if subtle.ConstantTimeCompare(gotU[:], wantU[:])&subtle.ConstantTimeCompare(gotP[:], wantP[:]) != 1 {
		return esp.Errorf(esp.ErrSignature, "basic-auth credentials do not match")
	}
	if len(allowed) == 0 {
		return nil
	}
	ip, err := netip.ParseAddr(clientIP)
	if err != nil {
		return esp.Errorf(esp.ErrSignature, "client address not in allowed_ips")
	}
	ip = ip.Unmap()
	for _, pfx := range allowed {
		if pfx.Contains(ip) {
			return nil
		}
	}
	return esp.Errorf(esp.ErrSignature, "client address not in allowed_ips")
}

type payload struct {
	RecordType        string          `json:"RecordType"`
	ID                json.Number     `json:"ID"`
	Type              string          `json:"Type"`
	TypeCode          json.Number     `json:"TypeCode"`
	MessageID         string          `json:"MessageID"`
	Email             string          `json:"Email"`
	From              string          `json:"From"`
	Recipient         string          `json:"Recipient"`
	Description       string          `json:"Description"`
	Details           string          `json:"Details"`
	BouncedAt         time.Time       `json:"BouncedAt"`
	DeliveredAt       time.Time       `json:"DeliveredAt"`
	ChangedAt         time.Time       `json:"ChangedAt"`
	SuppressSending   bool            `json:"SuppressSending"`
	SuppressionReason string          `json:"SuppressionReason"`
	Metadata          json.RawMessage `json:"Metadata"`
}

// hardBounceTypes are Postmark bounce types that mean the address will not
// accept mail; softBounceTypes may succeed later.
var (
	hardBounceTypes = map[string]bool{"HardBounce": true, "BadEmailAddress": true}
	softBounceTypes = map[string]bool{
		"SoftBounce": true, "Transient": true, "DnsError": true, "Blocked": true,
		"Undeliverable": true, "SMTPApiError": true, "DMARCPolicy": true, "Unknown": true,
	}
)

// Parse normalises one Postmark webhook body (one record per request).
// Opens, clicks and informational bounce types (auto-responders, address
// changes) give no event.
func Parse(body []byte) ([]esp.Event, error) {
	if len(body) > esp.MaxPayloadBytes {
		return nil, esp.Errorf(esp.ErrPayload, "payload too large")
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, esp.Errorf(esp.ErrPayload, "a Postmark webhook body is a JSON object")
	}
	var p payload
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return nil, esp.Errorf(esp.ErrPayload, "not a Postmark webhook body")
	}
	e := esp.Event{Sender: p.From, MessageID: p.MessageID, Classification: esp.Join(p.RecordType, p.Type)}
	switch p.RecordType {
	case "Delivery":
		e.Type, e.Recipient, e.Timestamp, e.Detail = esp.TypeDelivered, p.Recipient, p.DeliveredAt, p.Details
		e.ID = esp.Join("delivery", p.MessageID, strings.ToLower(p.Recipient))
	case "Bounce", "SpamComplaint":
		e.Recipient, e.Timestamp, e.Detail = p.Email, p.BouncedAt, p.Description
		e.ID = "bounce/" + p.ID.String()
		switch {
		case p.RecordType == "SpamComplaint" || p.Type == "SpamComplaint" || p.Type == "SpamNotification":
			e.Type = esp.TypeComplained
		case p.Type == "Unsubscribe":
			e.Type = esp.TypeUnsubscribed
		case p.Type == "ManuallyDeactivated":
			e.Type = esp.TypeSuppressed
		case hardBounceTypes[p.Type]:
			e.Type, e.Bounce = esp.TypeBounced, esp.BounceHard
		case softBounceTypes[p.Type]:
			e.Type, e.Bounce = esp.TypeBounced, esp.BounceSoft
		default:
			return nil, nil
		}
		if p.ID.String() == "" {
			e.ID = esp.Join("bounce", p.MessageID, p.Type, strings.ToLower(p.Email))
		}
	case "SubscriptionChange":
		if !p.SuppressSending {
			return nil, nil // a reactivation
		}
		e.Recipient, e.Timestamp = p.Recipient, p.ChangedAt
		e.Classification = esp.Join(p.RecordType, p.SuppressionReason)
		e.ID = esp.Join("subscription", p.MessageID, strings.ToLower(p.Recipient), p.ChangedAt.UTC().Format(time.RFC3339Nano))
		e.Type = esp.TypeSuppressed
		if p.SuppressionReason == "ManualSuppression" {
			e.Type = esp.TypeUnsubscribed
		}
	default:
		return nil, nil
	}
	return esp.Finish([]esp.Event{e})
}

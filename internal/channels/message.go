package channels

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/events"
)

// Message is what every kind says about one event, built from the event
// as alert mail builds it (events.Title, events.Summary, the likely
// causes) so that a message is useful on its own.
type Message struct {
	EventID     uuid.UUID
	Type        string
	Group       string
	Title       string
	Summary     string
	Description string
	Severity    string
	Domain      string
	At          time.Time
	// Causes are the likely causes, most likely first; HasCauses says
	// whether they were looked for (an empty list: none found).
	Causes    []events.Cause
	HasCauses bool
	// Link is the event in the dashboard: the alert for a critical one.
	Link string
}

// MessageOf describes ev, linking to the dashboard at baseURL.
func MessageOf(ev dbsqlc.Event, baseURL string) Message {
	t, _ := events.Lookup(ev.EventType)
	m := Message{
		EventID: ev.ID, Type: ev.EventType, Group: t.Group, Title: events.Title(ev.EventType),
		Summary: events.Summary(ev.EventType, ev.Payload), Description: t.Description, Severity: ev.Severity,
		At: ev.CreatedAt.UTC(), Causes: events.CausesOf(ev.Payload),
		Link: strings.TrimSuffix(baseURL, "/") + "/events",
	}
	if ev.Domain != nil {
		m.Domain = *ev.Domain
	}
	if ev.Severity == string(events.SeverityCritical) {
		m.Link = strings.TrimSuffix(baseURL, "/") + "/alerts?event=" + url.QueryEscape(ev.ID.String())
		m.HasCauses = m.Domain != "" && events.HasCauses(ev.EventType)
	}
	return m
}

// headline is the message's one-line text: severity, title, domain,
// summary.
func (m Message) headline() string {
	s := "[" + m.Severity + "] " + m.Title
	if m.Domain != "" {
		s += " on " + m.Domain
	}
	if m.Summary != "" {
		// Summaries of a domain's events start with the domain, named
		// already.
		s += ": " + strings.TrimPrefix(m.Summary, m.Domain+": ")
	}
	return s
}

// causeLines are the likely causes as list items, or a sentence saying
// none were found; nil when they were not looked for.
func (m Message) causeLines() []string {
	if !m.HasCauses {
		return nil
	}
	if len(m.Causes) == 0 {
		return []string{"None found: no signal of the domain in the 72 hours before explains it."}
	}
	out := make([]string, len(m.Causes))
	for i, c := range m.Causes {
		out[i] = c.Title + ": " + c.Summary + " (" + c.At.UTC().Format("2006-01-02 15:04") + " UTC)"
	}
	return out
}

// Text limits of the destinations: Slack's header block (150) and
// section text (3000), PagerDuty's summary (1024).
const (
	slackHeaderMax  = 150
	slackSectionMax = 3000
	pdSummaryMax    = 1024
)

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// slackEscape escapes the three characters Slack's mrkdwn reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// marshal encodes v compactly without HTML escapes, so golden files read
// as the destination receives them.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

type obj = map[string]any

// SlackPayload is the Slack incoming-webhook body of m: a text fallback
// (notifications, screen readers) and Block Kit blocks.
func SlackPayload(m Message) ([]byte, error) {
	icon := map[string]string{"critical": "🔴", "warning": "🟠"}[m.Severity]
	if icon == "" {
		icon = "🔵"
	}
	body := slackEscape(m.Summary)
	if body != "" {
		body = "*" + body + "*\n"
	}
	body += slackEscape(m.Description)
	fields := []any{
		obj{"type": "mrkdwn", "text": "*Severity*\n" + m.Severity},
		obj{"type": "mrkdwn", "text": "*Type*\n`" + m.Type + "`"},
	}
	if m.Domain != "" {
		fields = append([]any{obj{"type": "mrkdwn", "text": "*Domain*\n" + slackEscape(m.Domain)}}, fields...)
	}
	fields = append(fields, obj{"type": "mrkdwn", "text": "*At*\n" + m.At.Format(time.RFC3339)})
	blocks := []any{
		obj{"type": "header", "text": obj{"type": "plain_text", "text": clip(icon+" "+m.Title, slackHeaderMax), "emoji": true}},
		obj{"type": "section", "text": obj{"type": "mrkdwn", "text": clip(body, slackSectionMax)}},
		obj{"type": "section", "fields": fields},
	}
	if lines := m.causeLines(); lines != nil {
		text := "*Likely causes*"
		for _, l := range lines {
			text += "\n• " + slackEscape(l)
		}
		blocks = append(blocks, obj{"type": "section", "text": obj{"type": "mrkdwn", "text": clip(text, slackSectionMax)}})
	}
	blocks = append(blocks, obj{"type": "actions", "elements": []any{obj{
		"type": "button", "text": obj{"type": "plain_text", "text": "Open in mailwatch"}, "url": m.Link,
	}}})
	return marshal(obj{"text": clip(m.headline(), slackSectionMax), "blocks": blocks})
}

// TeamsPayload is the body of m for a Teams workflow webhook: a message
// carrying one Adaptive Card (version 1.4).
func TeamsPayload(m Message) ([]byte, error) {
	color := map[string]string{"critical": "Attention", "warning": "Warning"}[m.Severity]
	if color == "" {
		color = "Accent"
	}
	facts := []any{}
	if m.Domain != "" {
		facts = append(facts, obj{"title": "Domain", "value": m.Domain})
	}
	facts = append(facts, obj{"title": "Severity", "value": m.Severity}, obj{"title": "Type", "value": m.Type},
		obj{"title": "At", "value": m.At.Format(time.RFC3339)})
	body := []any{
		obj{"type": "TextBlock", "text": m.Title, "weight": "Bolder", "size": "Medium", "color": color, "wrap": true},
	}
	if m.Summary != "" {
		body = append(body, obj{"type": "TextBlock", "text": m.Summary, "weight": "Bolder", "wrap": true})
	}
	body = append(body, obj{"type": "TextBlock", "text": m.Description, "wrap": true}, obj{"type": "FactSet", "facts": facts})
	if lines := m.causeLines(); lines != nil {
		body = append(body, obj{"type": "TextBlock", "text": "Likely causes", "weight": "Bolder", "wrap": true},
			obj{"type": "TextBlock", "text": "- " + strings.Join(lines, "\r- "), "wrap": true})
	}
	card := obj{
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard", "version": "1.4",
		"body":    body,
		"actions": []any{obj{"type": "Action.OpenUrl", "title": "Open in mailwatch", "url": m.Link}},
	}
	return marshal(obj{"type": "message", "attachments": []any{obj{
		"contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": nil, "content": card,
	}}})
}

// PagerDuty Events API v2 actions.
const (
	ActionTrigger = "trigger"
	ActionResolve = "resolve"
)

// pdSeverity is PagerDuty's word for severity: alerts are critical; only
// a test message is info.
func pdSeverity(s string) string {
	if s == string(events.SeverityInfo) || s == string(events.SeverityWarning) {
		return s
	}
	return "critical"
}

// PagerDutyPayload is the Events API v2 body of action on the alert m
// describes, deduplicated by the alert's event id: a trigger carries the
// description, a resolve only the key.
func PagerDutyPayload(routingKey, action string, m Message) ([]byte, error) {
	body := obj{"routing_key": routingKey, "event_action": action, "dedup_key": m.EventID.String()}
	if action == ActionResolve {
		return marshal(body)
	}
	source := m.Domain
	if source == "" {
		source = "mailwatch"
	}
	details := obj{"title": m.Title, "description": m.Description, "event_id": m.EventID.String(), "event_type": m.Type,
		"severity": m.Severity, "at": m.At.Format(time.RFC3339)}
	if m.HasCauses {
		details["likely_causes"] = m.causeLines()
	}
	payload := obj{
		"summary": clip(m.headline(), pdSummaryMax), "source": source, "severity": pdSeverity(m.Severity),
		"timestamp": m.At.Format(time.RFC3339), "class": m.Type, "group": m.Group, "custom_details": details,
	}
	if m.Domain != "" {
		payload["component"] = m.Domain
	}
	body["payload"] = payload
	body["client"] = "mailwatch"
	body["client_url"] = m.Link
	body["links"] = []any{obj{"href": m.Link, "text": "Open the alert in mailwatch"}}
	return marshal(body)
}

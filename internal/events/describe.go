package events

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// People read events in the dashboard, in alert mail and digests: each
// type has a title ("Health score changed") and a one-line summary built
// from its payload ("example.com: score fell from 90 to 40"), kept here
// so that every place says the same thing.

// description is a type's title and summary builder.
type description struct {
	title string
	// summary says what happened, from the payload's fields; "" when the
	// payload lacks what it needs.
	summary func(p fields) string
}

var descriptions = map[string]description{
	TypeHealthScoreChanged: {"Health score changed", func(p fields) string {
		prev, score := p.int("previous_score"), p.int("score")
		verb := "rose"
		if score < prev {
			verb = "fell"
		}
		return p.on("score " + verb + " from " + strconv.Itoa(prev) + " to " + strconv.Itoa(score))
	}},
	TypeBounceSpike: {"Bounce spike", func(p fields) string {
		return p.on(p.spike("bounce", "bounces"))
	}},
	TypeComplaintSpike: {"Complaint spike", func(p fields) string {
		return p.on(p.spike("complaint", "complaints"))
	}},
	TypeDNSRecordChanged: {"DNS record changed", func(p fields) string {
		before, after := p.sub("before").str("status"), p.sub("after").str("status")
		s := strings.ToUpper(p.str("check")) + " record changed"
		if before != "" && after != "" && before != after {
			s += ": " + before + " → " + after
		}
		return p.on(s)
	}},
	TypeWebhookDeliveryFailed: {"Webhook delivery failed", func(p fields) string {
		s := p.str("event_type") + " to " + orDash(p.str("url")) + " failed after " + plural(p.int("attempts"), "attempt")
		if code := p.int("last_status_code"); code > 0 {
			s += " (last answer " + strconv.Itoa(code) + ")"
		}
		return s
	}},
	TypeSubscriptionDisabled: {"Subscription disabled", func(p fields) string {
		return orDash(p.str("url")) + " was disabled: " + p.str("reason")
	}},
	TypeSubscriptionFailing: {"Subscription failing", func(p fields) string {
		return "every push to " + orDash(p.str("url")) + " has failed since " + p.str("failing_since")
	}},
	TypeSubscriptionRecovered: {"Subscription recovered", func(p fields) string {
		return orDash(p.str("url")) + " accepts pushes again (failing since " + p.str("failing_since") + ")"
	}},
	TypeSubscriptionRecoveryRequested: {"Subscription recovery requested", func(p fields) string {
		return "failed deliveries from " + p.str("since") + " to " + p.str("until") + " queued again"
	}},
	TypeDMARCReportReceived: {"DMARC report received", func(p fields) string {
		s := "report from " + p.str("org_name")
		if p.has("messages") {
			s += ": " + plural(p.int("messages"), "message")
			if p.has("pass_rate") {
				s += ", " + percent(p.num("pass_rate")) + " passing DMARC"
			}
		}
		return p.on(s)
	}},
	TypeReceiverMessageReceived: {"Message received", func(p fields) string {
		s := p.str("channel") + " message"
		if from := p.str("from"); from != "" {
			s += " from " + from
		}
		if subj := p.str("subject"); subj != "" {
			s += ": " + strconv.Quote(subj)
		}
		if label := p.str("label"); label != "" {
			s += " (receiver " + strconv.Quote(label) + ")"
		}
		return s
	}},
	TypeReceiverMessageAnalyzed: {"Message analysed", func(p fields) string {
		return "grade " + p.str("grade") + " (" + strconv.Itoa(p.int("score")) + "/100): SPF " + p.str("spf") +
			", DKIM " + p.str("dkim") + ", DMARC " + p.str("dmarc")
	}},
	TypeAlertAcknowledged: {"Alert acknowledged", func(p fields) string {
		s := Title(p.str("alert_type")) + " acknowledged by " + p.str("acknowledged_by")
		if note := p.str("note"); note != "" {
			s += ": " + note
		}
		return s
	}},
	TypeAlertUnacknowledged: {"Alert reopened", func(p fields) string {
		return Title(p.str("alert_type")) + " is open again"
	}},
	TypeMessageDeleted: {"Message deleted", func(fields) string {
		return "a received message was deleted"
	}},
	TypeDNSFixApplied: {"DNS fix applied", func(p fields) string {
		return p.on(strings.ToUpper(p.str("check")) + ": " + p.str("type") + " " + p.str("name") + " updated through " + p.str("connection_kind"))
	}},
	TypeDNSFixFailed: {"DNS fix failed", func(p fields) string {
		s := strings.ToUpper(p.str("check")) + ": " + p.str("type") + " " + p.str("name") + " could not be updated through " + p.str("connection_kind")
		if e := p.str("error"); e != "" {
			s += ": " + e
		}
		return p.on(s)
	}},
	TypeMXVerificationLost: {"Report address no longer reaches mailwatch", func(p fields) string {
		return p.on(p.str("name") + ": " + p.first("problems"))
	}},
	TypeDMARCNewSource: {"New DMARC source", func(p fields) string {
		s := "new source " + p.str("source_ip")
		if name := firstOf(p.str("ptr"), p.str("base_domain")); name != "" {
			s += " (" + name + ")"
		}
		s += ": " + plural(p.int("messages"), "message") + ", " + strconv.Itoa(p.int("failing")) + " failing DMARC"
		return p.on(s)
	}},
	TypeDMARCNewSubdomain: {"New subdomain in DMARC reports", func(p fields) string {
		return p.on("mail claims new subdomain " + p.str("subdomain") + ": " + plural(p.int("messages"), "message") +
			", " + percent(p.num("pass_rate")) + " passing DMARC")
	}},
	TypeDMARCReportsStopped: {"DMARC reports stopped", func(p fields) string {
		return p.on(p.str("reporter") + " sent daily reports and has been silent for " + plural(p.int("silent_hours"), "hour"))
	}},
	TypeDMARCReportsResumed: {"DMARC reports resumed", func(p fields) string {
		return p.on(p.str("reporter") + " sends reports again")
	}},
	TypeDMARCFailureReport: {"DMARC failure report", func(p fields) string {
		s := "a message"
		if ip := p.str("source_ip"); ip != "" {
			s += " from " + ip
		}
		s += " failed DMARC"
		if f := p.str("auth_failure"); f != "" {
			s += " (" + f + ")"
		}
		if n := p.int("suppressed"); n > 0 {
			s += "; " + plural(n, "more report") + " since the last event"
		}
		return p.on(s)
	}},
	TypeDKIMSelectorNew: {"New DKIM selector", func(p fields) string {
		if p.str("origin") == "dns" {
			return p.on("selector " + p.str("selector") + " found published in DNS")
		}
		return p.on("selector " + p.str("selector") + " signs mail in reports")
	}},
	TypeDKIMSelectorIdle: {"Idle DKIM selector", func(p fields) string {
		return p.on("selector " + p.str("selector") + " is published but unseen in reports for " + plural(p.int("idle_days"), "day"))
	}},
	TypeDKIMKeyWeak: {"Weak DKIM key", func(p fields) string {
		return p.on("selector " + p.str("selector") + " has a " + strconv.Itoa(p.int("key_bits")) + "-bit " + strings.ToUpper(p.str("key_type")) + " key")
	}},
	TypeTLSReportReceived: {"TLS report received", func(p fields) string {
		return p.on(p.tlsSessions())
	}},
	TypeTLSReportFailures: {"TLS delivery failures", func(p fields) string {
		return p.on(p.tlsSessions())
	}},
	TypeBlocklistListed: {"Listed on a blocklist", func(p fields) string {
		s := p.str("target") + " listed on " + p.str("list")
		if codes := p.list("codes"); len(codes) > 0 {
			if name := codes[0].str("name"); name != "" {
				s += " (" + name + ")"
			}
		}
		if p.has("share") {
			s += ", carrying " + percent(p.num("share")) + " of the mail"
		}
		return p.on(s)
	}},
	TypeBlocklistDelisted: {"Removed from a blocklist", func(p fields) string {
		return p.on(p.str("target") + " is no longer listed on " + p.str("list"))
	}},
	TypePlanChanged: {"Plan changed", func(p fields) string {
		return "plan changed from " + p.str("previous_plan") + " to " + p.str("plan")
	}},
	TypePaymentFailed: {"Payment failed", func(p fields) string {
		s := "a payment for the " + p.str("plan") + " plan failed"
		if g := p.str("grace_until"); len(g) >= 10 {
			s += "; the plan stays until " + g[:10]
		}
		return s
	}},
	TypeAdminPlanSet: {"Plan set by an operator", func(p fields) string {
		return "an operator set the plan from " + p.str("previous_plan") + " to " + p.str("plan")
	}},
	TypeAccountSuspended: {"Account suspended", func(p fields) string {
		return "the account was suspended: " + p.str("reason")
	}},
	TypeAccountUnsuspended: {"Account reinstated", func(fields) string {
		return "the account's suspension was lifted"
	}},
	TypeMaintenanceTaskRun: {"Maintenance task run", func(p fields) string {
		if p.bool("already_queued") {
			return "an operator asked for " + p.str("task") + ", which was already queued"
		}
		return "an operator ran " + p.str("task")
	}},
	TypeSMSPoolChanged: {"SMS number pool changed", func(p fields) string {
		return p.str("phone_number") + ": " + p.str("action")
	}},
	TypePasswordChanged: {"Password changed", func(fields) string {
		return "the account's password was changed"
	}},
	TypeSubscriptionSecretRotated: {"Signing secret rotated", func(p fields) string {
		if until := p.str("previous_secret_expires_at"); until != "" {
			return "a subscription's signing secret was rotated; the old one signs too until " + until
		}
		return "a subscription's signing secret was rotated; the old one was retired at once"
	}},
	TypeMXTLSFailing: {"MX TLS failing", func(p fields) string {
		return p.on(p.str("mx_host") + ": " + firstOf(p.first("problems"), p.str("verdict")))
	}},
	TypeCertificateExpiring: {"Certificate expiring", func(p fields) string {
		return p.on(p.str("mx_host") + "'s certificate expires in " + plural(p.int("days_left"), "day"))
	}},
	TypeDANEMismatch: {"DANE mismatch", func(p fields) string {
		return p.on(p.str("mx_host") + ": its TLSA records match no certificate it presents")
	}},
	// Notification channels (internal/channels).
	TypeNotificationChannelFailing: {"Notification channel failing", func(p fields) string {
		return channelName(p) + " has failed since " + p.str("failing_since") + ": " + p.str("last_error")
	}},
	TypeNotificationChannelRecovered: {"Notification channel recovered", func(p fields) string {
		return channelName(p) + " sends again"
	}},
}

// channelName names a notification channel in a summary: its kind, its
// label when it has one, and its redacted destination.
func channelName(p fields) string {
	name := p.str("kind") + " channel"
	if l := p.str("label"); l != "" {
		name += " " + strconv.Quote(l)
	}
	return name + " (" + p.str("destination") + ")"
}

// titles are the descriptions' titles, filled at init.
var titles = map[string]string{}

// required are the fields each type's payload schema requires.
var required = map[string][]string{}

func init() {
	for typ, d := range descriptions {
		titles[typ] = d.title
	}
	for name, t := range types {
		var s struct {
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(t.PayloadSchema, &s); err != nil {
			panic("events: the payload schema of " + name + ": " + err.Error())
		}
		required[name] = s.Required
	}
}

// Title is the type's name for people, e.g. "Health score changed"; for an
// unknown type, its name with underscores as spaces.
func Title(typ string) string {
	if t, ok := titles[typ]; ok {
		return t
	}
	s := strings.ReplaceAll(typ, "_", " ")
	if s == "" {
		return "Event"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// Summary says in one line what an event of type typ with this payload
// reports; "" when the type is unknown or the payload is not an object
// with the fields its schema requires (every emitted payload has them).
func Summary(typ string, payload []byte) string {
	d, ok := descriptions[typ]
	if !ok {
		return ""
	}
	var p fields
	if err := json.Unmarshal(payload, &p); err != nil || p == nil {
		return ""
	}
	for _, k := range required[typ] {
		if !p.has(k) {
			return ""
		}
	}
	s := d.summary(p)
	if len(s) > maxSummary {
		s = s[:maxSummary-3] + "..."
	}
	return s
}

// maxSummary bounds a summary (payload strings are untrusted in length).
const maxSummary = 300

// fields is a decoded payload; missing or mistyped fields read as zero.
type fields map[string]any

func (p fields) has(k string) bool { _, ok := p[k]; return ok }

func (p fields) str(k string) string {
	switch v := p[k].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

func (p fields) num(k string) float64 {
	if v, ok := p[k].(float64); ok {
		return v
	}
	return 0
}

func (p fields) int(k string) int { return int(math.Round(p.num(k))) }

func (p fields) bool(k string) bool { v, _ := p[k].(bool); return v }

func (p fields) sub(k string) fields { v, _ := p[k].(map[string]any); return v }

func (p fields) list(k string) []fields {
	items, _ := p[k].([]any)
	out := make([]fields, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// first is the first string of an array field.
func (p fields) first(k string) string {
	items, _ := p[k].([]any)
	for _, it := range items {
		if s, ok := it.(string); ok {
			return s
		}
	}
	return ""
}

// on prefixes the payload's domain: "example.com: ...".
func (p fields) on(s string) string {
	if d := p.str("domain"); d != "" {
		return d + ": " + s
	}
	return s
}

// spike is a bounce or complaint spike's sentence.
func (p fields) spike(what, count string) string {
	s := what + " rate " + percent(p.num("rate")) + " (threshold " + percent(p.num("threshold")) + "): " +
		strconv.Itoa(p.int(count)) + " of " + plural(p.int("sent"), "message") + " in " + minutes(p.int("window_minutes"))
	if prov := firstOf(p.str("provider_label"), p.str("provider")); prov != "" {
		s += " at " + prov
	}
	return s
}

// tlsSessions is a TLS report's sentence, with its failure types.
func (p fields) tlsSessions() string {
	ok, failed := p.int("successful_sessions"), p.int("failed_sessions")
	s := p.str("org_name") + ": " + strconv.Itoa(failed) + " of " + plural(ok+failed, "TLS session") + " failed"
	if byType := p.sub("failures_by_type"); len(byType) > 0 {
		names := slices.Sorted(maps.Keys(byType))
		parts := make([]string, 0, len(names))
		for _, k := range names {
			parts = append(parts, k+" "+byType.str(k))
		}
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return s
}

// percent writes a fraction as a percentage with at most one decimal.
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}

// plural writes "1 message", "2 messages".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func minutes(n int) string {
	if n > 0 && n%60 == 0 {
		return plural(n/60, "hour")
	}
	return fmt.Sprintf("%d min", n)
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

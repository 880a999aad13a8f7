// Package events is mailwatch's event log: the registry of event types and
// the one function every producer uses to emit an event inside its own
// transaction, so that an event exists if and only if the change that
// caused it committed.
package events

import (
	"encoding/json"
	"sort"

	"github.com/mailwatch/mailwatch/internal/plans"
)

// Severity of an event. A critical event is an alert.
type Severity string

// Severities.
const (
	SeverityInfo     Severity = "info"
	SeverityWarning  Severity = "warning"
	SeverityCritical Severity = "critical"
)

// Valid reports whether s is a known severity.
func (s Severity) Valid() bool {
	return s == SeverityInfo || s == SeverityWarning || s == SeverityCritical
}

// Type names.
const (
	TypeHealthScoreChanged      = "health_score_changed"
	TypeBounceSpike             = "bounce_spike"
	TypeComplaintSpike          = "complaint_spike"
	TypeDNSRecordChanged        = "dns_record_changed"
	TypeWebhookDeliveryFailed   = "webhook_delivery_failed"
	TypeSubscriptionDisabled    = "subscription_disabled"
	TypeDMARCReportReceived     = "dmarc_report_received"
	TypeReceiverMessageReceived = "receiver_message_received"
	TypeReceiverMessageAnalyzed = "receiver_message_analyzed"
	TypeAlertAcknowledged       = "alert_acknowledged"
	TypeAlertUnacknowledged     = "alert_unacknowledged"
	TypeMessageDeleted          = "message_deleted"
	TypeDNSFixApplied           = "dns_fix_applied"
	TypeDNSFixFailed            = "dns_fix_failed"
	TypeMXVerificationLost      = "mx_verification_lost"
	TypeDMARCNewSource          = "dmarc_new_source"
	TypeDMARCNewSubdomain       = "dmarc_new_subdomain"
	TypeDMARCReportsStopped     = "dmarc_reports_stopped"
	TypeDMARCReportsResumed     = "dmarc_reports_resumed"
	TypeDMARCFailureReport      = "dmarc_failure_report"
	TypeDKIMSelectorNew         = "dkim_selector_new"
	TypeDKIMSelectorIdle        = "dkim_selector_idle"
	TypeDKIMKeyWeak             = "dkim_key_weak"
	TypeTLSReportReceived       = "tls_report_received"
	TypeTLSReportFailures       = "tls_report_failures"
	// Blocklists (internal/reputation).
	TypeBlocklistListed   = "blocklist_listed"
	TypeBlocklistDelisted = "blocklist_delisted"
	// Plans and billing (internal/billing).
	TypePlanChanged        = "plan_changed"
	TypePaymentFailed      = "payment_failed"
	TypeAdminPlanSet       = "admin_plan_set"
	TypeAccountSuspended   = "account_suspended"
	TypeAccountUnsuspended = "account_unsuspended"
	TypeMaintenanceTaskRun = "maintenance_task_run"
	TypePasswordChanged    = "password_changed"
	TypeSMSPoolChanged     = "sms_pool_changed"
	// Webhook subscriptions (internal/subscriptions).
	TypeSubscriptionSecretRotated = "subscription_secret_rotated"
	// Webhook subscriptions that fail and recover (internal/deliveries).
	TypeSubscriptionFailing           = "subscription_failing"
	TypeSubscriptionRecovered         = "subscription_recovered"
	TypeSubscriptionRecoveryRequested = "subscription_recovery_requested"
	// Notification channels (internal/channels).
	TypeNotificationChannelFailing   = "notification_channel_failing"
	TypeNotificationChannelRecovered = "notification_channel_recovered"
)

// Type describes one kind of event.
type Type struct {
	Name string `json:"name"`
	// Title is the type's name for people (describe.go).
	Title           string   `json:"title"`
	Description     string   `json:"description"`
	DefaultSeverity Severity `json:"default_severity"`
	// Group is the preference group of the type (groups.go).
	Group      string `json:"group"`
	Escalation string `json:"escalation,omitempty"`
	// escalate applies the Escalation rule to a payload (already validated
	// against PayloadSchema): it returns the severity the rule gives, or ""
	// when the rule does not apply. Emit applies it for every producer.
	escalate      func(payload []byte) Severity
	Audit         bool            `json:"audit"`
	PayloadSchema json.RawMessage `json:"payload_schema"`
	// Example is a payload that matches PayloadSchema.
	Example json.RawMessage `json:"example"`
}

func schema(s string) json.RawMessage { return json.RawMessage(s) }

// planNames is the JSON array of the plan names, for payload enums.
var planNames = func() string {
	b, err := json.Marshal(plans.Names())
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// tlsReportSchema is the payload of tls_report_received and
// tls_report_failures (which adds failures_by_type).
var tlsReportSchema = schema(`{"type":"object","required":["domain","org_name","report_id","successful_sessions","failed_sessions"],"properties":{
	"domain":{"type":"string"},"org_name":{"type":"string"},"report_id":{"type":"string"},
	"begin":{"type":"string","format":"date-time"},"end":{"type":"string","format":"date-time"},
	"successful_sessions":{"type":"integer","minimum":0},"failed_sessions":{"type":"integer","minimum":0},
	"tls_report_id":{"type":"string","format":"uuid"},
	"failures_by_type":{"type":"object","additionalProperties":{"type":"integer","minimum":0}}}}`)

// types is the registry. Payload schemas are JSON Schema (2020-12); tests
// validate every emitted payload against them.
var types = map[string]Type{
	TypeHealthScoreChanged: {
		Name:            TypeHealthScoreChanged,
		Group:           GroupHealth,
		Description:     "A domain's health score moved by 5 points or more.",
		DefaultSeverity: SeverityWarning,
		Escalation:      "info for a rise; critical for a fall that ends below 50 or a fall of 20 points or more",
		escalate:        escalateHealthScore,
		PayloadSchema: schema(`{"type":"object","required":["domain","previous_score","score","delta"],"properties":{
			"domain":{"type":"string"},"previous_score":{"type":"integer","minimum":0,"maximum":100},
			"score":{"type":"integer","minimum":0,"maximum":100},"delta":{"type":"integer"},
			"reasons":{"type":"array","items":{"type":"string"}}}}`),
	},
	TypeBounceSpike: {
		Name:            TypeBounceSpike,
		Group:           GroupSending,
		Description:     "A domain's hard-bounce rate at one sending provider, over a rolling window with a minimum volume, rose above its threshold and well above the domain's own baseline. One event per episode.",
		DefaultSeverity: SeverityWarning,
		Escalation:      "critical when the rate reaches critical_threshold (twice the threshold when absent)",
		escalate:        escalateSpike,
		PayloadSchema: schema(`{"type":"object","required":["domain","window_minutes","rate","threshold","bounces","sent"],"properties":{
			"domain":{"type":"string"},"provider":{"type":"string"},"provider_id":{"type":"string","format":"uuid"},
			"provider_label":{"type":"string"},"window_minutes":{"type":"integer","minimum":1},
			"rate":{"type":"number","minimum":0},"threshold":{"type":"number","minimum":0},
			"critical_threshold":{"type":"number","minimum":0},"baseline":{"type":["number","null"],"minimum":0},
			"bounces":{"type":"integer","minimum":0},"sent":{"type":"integer","minimum":0}}}`),
	},
	TypeComplaintSpike: {
		Name:            TypeComplaintSpike,
		Group:           GroupSending,
		Description:     "A domain's spam-complaint rate at one sending provider, over a rolling window with a minimum volume, rose above its threshold and well above the domain's own baseline. One event per episode.",
		DefaultSeverity: SeverityWarning,
		Escalation:      "critical when the rate reaches critical_threshold (0.3%, Google's ceiling for bulk senders; twice the threshold when absent)",
		escalate:        escalateSpike,
		PayloadSchema: schema(`{"type":"object","required":["domain","window_minutes","rate","threshold","complaints","sent"],"properties":{
			"domain":{"type":"string"},"provider":{"type":"string"},"provider_id":{"type":"string","format":"uuid"},
			"provider_label":{"type":"string"},"window_minutes":{"type":"integer","minimum":1},
			"rate":{"type":"number","minimum":0},"threshold":{"type":"number","minimum":0},
			"critical_threshold":{"type":"number","minimum":0},"baseline":{"type":["number","null"],"minimum":0},
			"complaints":{"type":"integer","minimum":0},"sent":{"type":"integer","minimum":0}}}`),
	},
	TypeDNSRecordChanged: {
		Name:            TypeDNSRecordChanged,
		Group:           GroupHealth,
		Description:     "A DNS check of a domain found a different record set or status than the previous check.",
		DefaultSeverity: SeverityWarning,
		Escalation:      "critical when a check that passed (pass or warn) now fails or is missing (fail, none or permerror)",
		escalate:        escalateDNSChange,
		PayloadSchema: schema(`{"type":"object","required":["domain","check","before","after"],"properties":{
			"domain":{"type":"string"},"check":{"type":"string"},
			"before":{"type":"object","required":["status","records"],"properties":{"status":{"type":"string"},"records":{"type":"array","items":{"type":"string"}}}},
			"after":{"type":"object","required":["status","records"],"properties":{"status":{"type":"string"},"records":{"type":"array","items":{"type":"string"}}}}}}`),
	},
	TypeWebhookDeliveryFailed: {
		Name:            TypeWebhookDeliveryFailed,
		Group:           GroupDeliveries,
		Description:     "A webhook delivery used all its attempts (or hit a permanent error) and ended failed.",
		DefaultSeverity: SeverityWarning,
		PayloadSchema: schema(`{"type":"object","required":["delivery_id","subscription_id","event_id","event_type","attempts"],"properties":{
			"delivery_id":{"type":"string","format":"uuid"},"subscription_id":{"type":"string","format":"uuid"},
			"event_id":{"type":"string","format":"uuid"},"event_type":{"type":"string"},"url":{"type":"string"},
			"attempts":{"type":"integer","minimum":0},"last_status_code":{"type":["integer","null"]},"last_error":{"type":["string","null"]}}}`),
	},
	TypeSubscriptionDisabled: {
		Name:            TypeSubscriptionDisabled,
		Group:           GroupDeliveries,
		Description:     "An event subscription was disabled: its endpoint answered 410 Gone, or every delivery failed for 5 days.",
		DefaultSeverity: SeverityCritical,
		PayloadSchema: schema(`{"type":"object","required":["subscription_id","url","reason"],"properties":{
			"subscription_id":{"type":"string","format":"uuid"},"url":{"type":"string"},"reason":{"type":"string"}}}`),
	},
	TypeSubscriptionFailing: {
		Name:            TypeSubscriptionFailing,
		Group:           GroupDeliveries,
		Description:     "Every push to an event subscription has failed for a day (no success since failing_since). Raised once per failing period; the subscription is disabled if it keeps failing until disables_at.",
		DefaultSeverity: SeverityWarning,
		PayloadSchema: schema(`{"type":"object","required":["subscription_id","url","failing_since"],"properties":{
			"subscription_id":{"type":"string","format":"uuid"},"url":{"type":"string"},
			"failing_since":{"type":"string","format":"date-time"},"disables_at":{"type":"string","format":"date-time"}}}`),
	},
	TypeSubscriptionRecovered: {
		Name:            TypeSubscriptionRecovered,
		Group:           GroupDeliveries,
		Description:     "An event subscription that raised subscription_failing accepted a push again. Failed deliveries of the period can be pushed again with POST .../event-subscriptions/{id}/recover.",
		DefaultSeverity: SeverityInfo,
		PayloadSchema: schema(`{"type":"object","required":["subscription_id","url","failing_since","recovered_at"],"properties":{
			"subscription_id":{"type":"string","format":"uuid"},"url":{"type":"string"},
			"failing_since":{"type":"string","format":"date-time"},"recovered_at":{"type":"string","format":"date-time"}}}`),
	},
	TypeSubscriptionRecoveryRequested: {
		Name:            TypeSubscriptionRecoveryRequested,
		Group:           GroupAudit,
		Description:     "Audit: the failed deliveries of an event subscription created in a time range were queued again (POST .../event-subscriptions/{id}/recover); job_id is the River job that does it.",
		DefaultSeverity: SeverityInfo,
		Audit:           true,
		PayloadSchema: schema(`{"type":"object","required":["subscription_id","since","until","job_id","already_queued","key_identifier"],"properties":{
			"subscription_id":{"type":"string","format":"uuid"},"since":{"type":"string","format":"date-time"},
			"until":{"type":"string","format":"date-time"},"job_id":{"type":"integer"},"already_queued":{"type":"boolean"},
			"key_identifier":{"type":"string"}}}`),
	},
	TypeDMARCReportReceived: {
		Name:            TypeDMARCReportReceived,
		Group:           GroupReports,
		Description:     "A DMARC aggregate report for a domain was received and stored.",
		DefaultSeverity: SeverityInfo,
		PayloadSchema: schema(`{"type":"object","required":["domain","org_name","report_id"],"properties":{
			"domain":{"type":"string"},"org_name":{"type":"string"},"report_id":{"type":"string"},
			"begin":{"type":"string","format":"date-time"},"end":{"type":"string","format":"date-time"},
			"messages":{"type":"integer","minimum":0},"pass_rate":{"type":"number","minimum":0,"maximum":1},
			"records":{"type":"integer","minimum":0},"dmarc_report_id":{"type":"string","format":"uuid"}}}`),
	},
	TypeReceiverMessageReceived: {
		Name:            TypeReceiverMessageReceived,
		Group:           GroupReceivers,
		Description:     "A receiver got a message (email or SMS).",
		DefaultSeverity: SeverityInfo,
		PayloadSchema: schema(`{"type":"object","required":["receiver_id","message_id","channel"],"properties":{
			"receiver_id":{"type":"string","format":"uuid"},"message_id":{"type":"string","format":"uuid"},
			"channel":{"type":"string","enum":["email","sms"]},"from":{"type":"string"},"subject":{"type":"string"},
			"label":{"type":"string"}}}`),
	},
	TypeReceiverMessageAnalyzed: {
		Name:            TypeReceiverMessageAnalyzed,
		Group:           GroupReceivers,
		Description:     "The deliverability analysis of a message a receiver got over SMTP is done: its grade, score and authentication verdicts (the full report is GET .../messages/{message_id}/analysis).",
		DefaultSeverity: SeverityInfo,
		PayloadSchema: schema(`{"type":"object","required":["receiver_id","message_id","grade","score","spf","dkim","dmarc"],"properties":{
			"receiver_id":{"type":"string","format":"uuid"},"message_id":{"type":"string","format":"uuid"},
			"grade":{"type":"string","enum":["A","B","C","D","F"]},"score":{"type":"integer","minimum":0,"maximum":100},
			"spf":{"type":"string"},"dkim":{"type":"string"},"dmarc":{"type":"string"}}}`),
	},
	TypeAlertAcknowledged: {
		Name:            TypeAlertAcknowledged,
		Group:           GroupAudit,
		Description:     "Audit: an alert was acknowledged.",
		DefaultSeverity: SeverityInfo,
		Audit:           true,
		PayloadSchema: schema(`{"type":"object","required":["alert_id","alert_type","acknowledged_by","key_identifier"],"properties":{
			"alert_id":{"type":"string","format":"uuid"},"alert_type":{"type":"string"},
			"acknowledged_by":{"type":"string"},"note":{"type":["string","null"]},"key_identifier":{"type":"string"}}}`),
	},
	TypeAlertUnacknowledged: {
		Name:            TypeAlertUnacknowledged,
		Group:           GroupAudit,
		Description:     "Audit: an alert's acknowledgement was withdrawn.",
		DefaultSeverity: SeverityInfo,
		Audit:           true,
		PayloadSchema: schema(`{"type":"object","required":["alert_id","alert_type","key_identifier"],"properties":{
			"alert_id":{"type":"string","format":"uuid"},"alert_type":{"type":"string"},
			"previously_acknowledged_by":{"type":["string","null"]},"previous_note":{"type":["string","null"]},
			"key_identifier":{"type":"string"}}}`),
	},
	TypeMessageDeleted: {
		Name:            TypeMessageDeleted,
		Group:           GroupAudit,
		Description:     "Audit: a receiver's message was deleted.",
		DefaultSeverity: SeverityInfo,
		Audit:           true,
		PayloadSchema: schema(`{"type":"object","required":["receiver_id","message_id","key_identifier"],"properties":{
			"receiver_id":{"type":"string","format":"uuid"},"message_id":{"type":"string","format":"uuid"},
			"key_identifier":{"type":"string"}}}`),
	},
	TypeDNSFixApplied: {
		Name:            TypeDNSFixApplied,
		Group:           GroupDNSFixes,
		Description:     "A DNS recommendation was written into the domain's zone through its DNS connection (before and after are the records of the recommendation's kind).",
		DefaultSeverity: SeverityInfo,
		Audit:           true,
		PayloadSchema:   dnsFixSchema,
	},
	TypeDNSFixFailed: {
		Name:            TypeDNSFixFailed,
		Group:           GroupDNSFixes,
		Description:     "Writing a DNS recommendation failed: the record changed since it was observed (conflict; after is what the zone holds) or the provider refused the change (error).",
		DefaultSeverity: SeverityWarning,
		Audit:           true,
		PayloadSchema:   dnsFixSchema,
	},
	TypeMXVerificationLost: {
		Name:            TypeMXVerificationLost,
		Group:           GroupHealth,
		Description:     "A verified custom inbound subdomain no longer points its MX at mailwatch or lost its ownership TXT record; mail for it is refused until it verifies again.",
		DefaultSeverity: SeverityCritical,
		PayloadSchema: schema(`{"type":"object","required":["domain","name","problems"],"properties":{
			"domain":{"type":"string"},"name":{"type":"string"},"problems":{"type":"array","items":{"type":"string"}}}}`),
	},
	TypeDMARCNewSource: {
		Name:            TypeDMARCNewSource,
		Group:           GroupReports,
		Description:     "An aggregate report named a source never seen for the domain, unknown to the sender map, failing DMARC for at least 10 messages.",
		DefaultSeverity: SeverityWarning,
		PayloadSchema: schema(`{"type":"object","required":["domain","source_ip","messages","failing","category"],"properties":{
			"domain":{"type":"string"},"source_ip":{"type":"string"},"ptr":{"type":"string"},"base_domain":{"type":"string"},
			"messages":{"type":"integer","minimum":0},"failing":{"type":"integer","minimum":0},
			"category":{"type":"string","enum":["threat_unknown"]},"org_name":{"type":"string"},"report_id":{"type":"string"}}}`),
	},
	TypeDMARCNewSubdomain: {
		Name:            TypeDMARCNewSubdomain,
		Group:           GroupReports,
		Description:     "An aggregate report showed mail claiming (header_from) a subdomain never seen for the domain: its first day, volume and DMARC pass rate. Warning when most of that mail failed DMARC.",
		DefaultSeverity: SeverityInfo,
		PayloadSchema: schema(`{"type":"object","required":["domain","subdomain","first_seen","messages","pass_rate"],"properties":{
			"domain":{"type":"string"},"subdomain":{"type":"string"},"first_seen":{"type":"string","format":"date"},
			"messages":{"type":"integer","minimum":0},"passing":{"type":"integer","minimum":0},
			"pass_rate":{"type":"number","minimum":0,"maximum":1},"org_name":{"type":"string"},"report_id":{"type":"string"}}}`),
	},
	TypeDMARCReportsStopped: {
		Name:            TypeDMARCReportsStopped,
		Group:           GroupReports,
		Description:     "A reporter that sent the domain aggregate reports daily (on 5 of the 7 days up to its last) has been silent for 3 days: a removed rua, a lost authorisation record or a broken MX look like this. Once per silence.",
		DefaultSeverity: SeverityWarning,
		PayloadSchema: schema(`{"type":"object","required":["domain","reporter","last_report_at","silent_hours","days_reported"],"properties":{
			"domain":{"type":"string"},"reporter":{"type":"string"},"last_report_at":{"type":"string","format":"date-time"},
			"silent_hours":{"type":"integer","minimum":0},"days_reported":{"type":"integer","minimum":0,"maximum":7}}}`),
	},
	TypeDMARCReportsResumed: {
		Name:            TypeDMARCReportsResumed,
		Group:           GroupReports,
		Description:     "A reporter whose silence raised dmarc_reports_stopped sent the domain a report again.",
		DefaultSeverity: SeverityInfo,
		PayloadSchema: schema(`{"type":"object","required":["domain","reporter","stopped_at"],"properties":{
			"domain":{"type":"string"},"reporter":{"type":"string"},"stopped_at":{"type":"string","format":"date-time"}}}`),
	},
	TypeDMARCFailureReport: {
		Name:            TypeDMARCFailureReport,
		Group:           GroupReports,
		Description:     "A DMARC failure report (ruf, RFC 6591) arrived for the domain: the failing message's source and why it failed. At most one event per domain and hour; suppressed counts the reports that arrived since the last event without one.",
		DefaultSeverity: SeverityWarning,
		PayloadSchema: schema(`{"type":"object","required":["domain","suppressed"],"properties":{
			"domain":{"type":"string"},"reporter":{"type":"string"},"source_ip":{"type":"string"},"from":{"type":"string"},
			"auth_failure":{"type":"string"},"dkim_domain":{"type":"string"},"arrival_date":{"type":"string","format":"date-time"},
			"suppressed":{"type":"integer","minimum":0}}}`),
	},
	TypeDKIMSelectorNew: {
		Name:            TypeDKIMSelectorNew,
		Group:           GroupReports,
		Description:     "A DKIM selector never seen for the domain signed its mail in an aggregate report (origin report, with the sources using it) or was found published in DNS (origin dns, with its key).",
		DefaultSeverity: SeverityInfo,
		PayloadSchema: schema(`{"type":"object","required":["domain","selector","origin"],"properties":{
			"domain":{"type":"string"},"selector":{"type":"string"},"origin":{"type":"string","enum":["report","dns"]},
			"sources":{"type":"array","items":{"type":"string"}},"key_type":{"type":"string"},"key_bits":{"type":"integer","minimum":0}}}`),
	},
	TypeDKIMSelectorIdle: {
		Name:            TypeDKIMSelectorIdle,
		Group:           GroupReports,
		Description:     "A DKIM selector is published in DNS but no aggregate report has shown it signing the domain's mail for 90 days: if nothing signs with it any more, remove its record. Once per idle period.",
		DefaultSeverity: SeverityInfo,
		PayloadSchema: schema(`{"type":"object","required":["domain","selector","idle_days"],"properties":{
			"domain":{"type":"string"},"selector":{"type":"string"},"last_seen_in_reports":{"type":["string","null"],"format":"date-time"},
			"idle_days":{"type":"integer","minimum":0}}}`),
	},
	TypeDKIMKeyWeak: {
		Name:            TypeDKIMKeyWeak,
		Group:           GroupReports,
		Description:     "A DKIM selector of the domain publishes an RSA key shorter than 2048 bits: rotate to a 2048-bit RSA or an Ed25519 key. Once per key.",
		DefaultSeverity: SeverityWarning,
		PayloadSchema: schema(`{"type":"object","required":["domain","selector","key_type","key_bits"],"properties":{
			"domain":{"type":"string"},"selector":{"type":"string"},"key_type":{"type":"string"},"key_bits":{"type":"integer","minimum":0}}}`),
	},
	TypeTLSReportReceived: {
		Name:            TypeTLSReportReceived,
		Group:           GroupReports,
		Description:     "An SMTP TLS report (RFC 8460) for a domain was received and stored.",
		DefaultSeverity: SeverityInfo,
		PayloadSchema:   tlsReportSchema,
	},
	TypeTLSReportFailures: {
		Name:            TypeTLSReportFailures,
		Group:           GroupReports,
		Description:     "An SMTP TLS report (RFC 8460) counted failed TLS sessions to the domain's MX hosts.",
		DefaultSeverity: SeverityWarning,
		PayloadSchema:   tlsReportSchema,
	},
	TypeBlocklistListed: {
		Name:            TypeBlocklistListed,
		Group:           GroupHealth,
		Description:     "An IP that carries the domain's mail, or the domain itself, was listed on a DNS blocklist. share is the part of the domain's last 7 days of mail the IP carried, listed_share that of every IP of the domain listed now.",
		DefaultSeverity: SeverityWarning,
		Escalation:      "critical when listed_share reaches critical_share (10%); info for an informational listing (e.g. Spamhaus PBL)",
		PayloadSchema: schema(`{"type":"object","required":["domain","list","zone","kind","target","codes","share","listed_share"],"properties":{
			"domain":{"type":"string"},"list":{"type":"string"},"zone":{"type":"string"},"kind":{"type":"string","enum":["ip","domain"]},
			"target":{"type":"string"},"codes":{"type":"array","items":{"type":"object","properties":{"code":{"type":"string"},
			"name":{"type":"string"},"meaning":{"type":"string"},"informational":{"type":"boolean"}}}},"reason":{"type":"string"},
			"share":{"type":"number","minimum":0,"maximum":1},"listed_share":{"type":"number","minimum":0,"maximum":1},
			"critical_share":{"type":"number"},"informational":{"type":"boolean"},"delist_url":{"type":"string"}}}`),
	},
	TypeBlocklistDelisted: {
		Name:            TypeBlocklistDelisted,
		Group:           GroupHealth,
		Description:     "A listing reported by blocklist_listed ended: the list answers that the IP or domain is no longer listed.",
		DefaultSeverity: SeverityInfo,
		PayloadSchema: schema(`{"type":"object","required":["domain","list","zone","kind","target","listed_at"],"properties":{
			"domain":{"type":"string"},"list":{"type":"string"},"zone":{"type":"string"},"kind":{"type":"string","enum":["ip","domain"]},
			"target":{"type":"string"},"share":{"type":"number","minimum":0,"maximum":1},"listed_at":{"type":"string","format":"date-time"},
			"listed_share":{"type":"number","minimum":0,"maximum":1}}}`),
	},
	TypePlanChanged: {
		Name:            TypePlanChanged,
		Group:           GroupBilling,
		Description:     "The account's plan changed: through a Stripe subscription, a paid invoice restoring it, the end of a failed payment's grace period (to the server's default plan), or an operator. A downgrade is a warning.",
		DefaultSeverity: SeverityInfo,
		PayloadSchema: schema(`{"type":"object","required":["previous_plan","plan","reason"],"properties":{
			"previous_plan":{"type":"string","enum":` + planNames + `},"plan":{"type":"string","enum":` + planNames + `},
			"reason":{"type":"string","enum":["stripe_subscription","invoice_paid","grace_expired","admin"]},
			"stripe_event_id":{"type":"string"},"stripe_subscription_id":{"type":"string"}}}`),
	},
	TypePaymentFailed: {
		Name:            TypePaymentFailed,
		Group:           GroupBilling,
		Description:     "A Stripe invoice payment failed (invoice.payment_failed): the account is past due and keeps its plan until grace_until (BILLING_GRACE_PERIOD after the first failure), then moves to the server's default plan unless an invoice is paid.",
		DefaultSeverity: SeverityCritical,
		PayloadSchema: schema(`{"type":"object","required":["invoice_id","plan","grace_until"],"properties":{
			"invoice_id":{"type":"string"},"customer_id":{"type":"string"},"amount_due":{"type":"integer"},"currency":{"type":"string"},
			"attempt_count":{"type":"integer","minimum":0},"plan":{"type":"string"},"grace_until":{"type":"string","format":"date-time"},
			"stripe_event_id":{"type":"string"}}}`),
	},
	TypeAdminPlanSet: {
		Name:            TypeAdminPlanSet,
		Group:           GroupAudit,
		Description:     "Audit: an operator set the account's plan by hand (PUT /api/admin/accounts/{account_id}/plan).",
		DefaultSeverity: SeverityInfo,
		Audit:           true,
		PayloadSchema: schema(`{"type":"object","required":["plan","previous_plan","key_identifier"],"properties":{
			"plan":{"type":"string"},"previous_plan":{"type":"string"},"key_identifier":{"type":"string"},
			"note":{"type":["string","null"]}}}`),
	},
	TypeAccountSuspended: {
		Name:            TypeAccountSuspended,
		Group:           GroupAudit,
		Description:     "Audit: an admin suspended the account. Its keys answer 403, its data-API tokens are refused and its webhook pushes wait until it is unsuspended.",
		DefaultSeverity: SeverityWarning,
		Audit:           true,
		PayloadSchema: schema(`{"type":"object","required":["reason","admin_account_id","admin_key_identifier"],"properties":{
			"reason":{"type":"string"},"admin_account_id":{"type":"string","format":"uuid"},
			"admin_email":{"type":"string"},"admin_key_identifier":{"type":"string"}}}`),
	},
	TypeAccountUnsuspended: {
		Name:            TypeAccountUnsuspended,
		Group:           GroupAudit,
		Description:     "Audit: an admin lifted the account's suspension; its keys work again and its waiting webhook pushes resume.",
		DefaultSeverity: SeverityInfo,
		Audit:           true,
		PayloadSchema: schema(`{"type":"object","required":["admin_account_id","admin_key_identifier"],"properties":{
			"previous_reason":{"type":["string","null"]},"admin_account_id":{"type":"string","format":"uuid"},
			"admin_email":{"type":"string"},"admin_key_identifier":{"type":"string"}}}`),
	},
	TypeMaintenanceTaskRun: {
		Name:            TypeMaintenanceTaskRun,
		Group:           GroupAudit,
		Description:     "Audit: an admin ran a maintenance task now (POST /api/admin/maintenance/{task}). Tasks affect no single account, so the event is on the admin's own account.",
		DefaultSeverity: SeverityInfo,
		Audit:           true,
		PayloadSchema: schema(`{"type":"object","required":["task","job_id","already_queued","admin_key_identifier"],"properties":{
			"task":{"type":"string"},"job_id":{"type":"integer"},"job_kind":{"type":"string"},
			"already_queued":{"type":"boolean"},"admin_key_identifier":{"type":"string"}}}`),
	},
	TypeSMSPoolChanged: {
		Name:            TypeSMSPoolChanged,
		Group:           GroupAudit,
		Description:     "Audit: an admin added a number to the SMS pool or removed one. The pool belongs to no account, so the event is on the admin's own account.",
		DefaultSeverity: SeverityInfo,
		Audit:           true,
		PayloadSchema: schema(`{"type":"object","required":["action","phone_number","admin_key_identifier"],"properties":{
			"action":{"type":"string","enum":["added","removed"]},"phone_number":{"type":"string"},
			"admin_key_identifier":{"type":"string"}}}`),
	},
	TypePasswordChanged: {
		Name:            TypePasswordChanged,
		Group:           GroupSecurity,
		Description:     "The account's password was changed. Data-API tokens and dashboard sessions issued before it are refused; API keys stay valid.",
		DefaultSeverity: SeverityWarning,
		PayloadSchema: schema(`{"type":"object","required":["key_identifier","changed_at"],"properties":{
			"key_identifier":{"type":"string"},"changed_at":{"type":"string","format":"date-time"}}}`),
	},
	TypeSubscriptionSecretRotated: {
		Name:            TypeSubscriptionSecretRotated,
		Group:           GroupSecurity,
		Description:     "An event subscription's signing secret was rotated. Until previous_secret_expires_at every push carries a signature under the new secret and one under the secret it replaced; null means the old secret was retired at once.",
		DefaultSeverity: SeverityInfo,
		PayloadSchema: schema(`{"type":"object","required":["subscription_id","rotated_at","previous_secret_expires_at","key_identifier"],"properties":{
			"subscription_id":{"type":"string","format":"uuid"},"rotated_at":{"type":"string","format":"date-time"},
			"previous_secret_expires_at":{"type":["string","null"],"format":"date-time"},"key_identifier":{"type":"string"}}}`),
	},
	// Notification channels (internal/channels).
	TypeNotificationChannelFailing: {
		Name:            TypeNotificationChannelFailing,
		Group:           GroupDeliveries,
		Description:     "A notification channel (Slack, Microsoft Teams or PagerDuty) has failed every send for a day; raised once per failing period. It is never sent to notification channels.",
		DefaultSeverity: SeverityCritical,
		PayloadSchema: schema(`{"type":"object","required":["channel_id","kind","destination","failing_since","last_error"],"properties":{
			"channel_id":{"type":"string","format":"uuid"},"kind":{"type":"string","enum":["slack","teams","pagerduty"]},
			"label":{"type":"string"},"destination":{"type":"string"},"failing_since":{"type":"string","format":"date-time"},
			"last_error":{"type":"string"}}}`),
	},
	TypeNotificationChannelRecovered: {
		Name:            TypeNotificationChannelRecovered,
		Group:           GroupDeliveries,
		Description:     "A notification channel that had raised notification_channel_failing sent successfully again. It is never sent to notification channels.",
		DefaultSeverity: SeverityInfo,
		PayloadSchema: schema(`{"type":"object","required":["channel_id","kind","destination"],"properties":{
			"channel_id":{"type":"string","format":"uuid"},"kind":{"type":"string","enum":["slack","teams","pagerduty"]},
			"label":{"type":"string"},"destination":{"type":"string"},"failing_since":{"type":"string","format":"date-time"}}}`),
	},
}

// dnsFixSchema is the payload of dns_fix_applied and dns_fix_failed
// (dnsfix.FixPayload).
var dnsFixSchema = schema(`{"type":"object","required":["domain","recommendation_id","check","name","type","op","connection_kind","before","after"],"properties":{
	"domain":{"type":"string"},"recommendation_id":{"type":"string","format":"uuid"},"check":{"type":"string"},
	"name":{"type":"string"},"type":{"type":"string"},"op":{"type":"string","enum":["create","replace_rr","replace_rrset","delete_rr"]},
	"connection_kind":{"type":"string"},"before":{"type":"array","items":{"type":"string"}},
	"after":{"type":"array","items":{"type":"string"}},"error":{"type":"string"},"conflict":{"type":"boolean"}}}`)

// Lookup returns the registered type called name.
func Lookup(name string) (Type, bool) {
	t, ok := types[name]
	if ok {
		t.Example, t.Title = examples[name], Title(name)
	}
	return t, ok
}

// Types returns every registered type, sorted by name.
func Types() []Type {
	out := make([]Type, 0, len(types))
	for name, t := range types {
		t.Example, t.Title = examples[name], Title(name)
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

package events

import "encoding/json"

// examples holds one valid payload per registered type: shown by
// GET /api/accounts/me/events/types (operators copy them into the
// injection endpoint) and validated against the schemas by a test.
var examples = map[string]json.RawMessage{
	TypeHealthScoreChanged: json.RawMessage(`{"domain":"example.com","previous_score":82,"score":45,"delta":-37,` +
		`"reasons":["DMARC policy changed to none","SPF exceeds 10 DNS lookups"]}`),
	TypeBounceSpike: json.RawMessage(`{"domain":"example.com","provider":"postmark",` +
		`"provider_id":"01930f2e-8c1a-7d3e-9b2a-3f4e5d6c7b8a","provider_label":"transactional","window_minutes":60,` +
		`"rate":0.082,"threshold":0.05,"critical_threshold":0.1,"baseline":0.004,"bounces":41,"sent":500}`),
	TypeComplaintSpike: json.RawMessage(`{"domain":"example.com","provider":"ses",` +
		`"provider_id":"01930f2e-8c1a-7d3e-9b2a-3f4e5d6c7b8b","provider_label":"newsletters","window_minutes":60,` +
		`"rate":0.004,"threshold":0.001,"critical_threshold":0.003,"baseline":null,"complaints":12,"sent":3000}`),
	TypeDNSRecordChanged: json.RawMessage(`{"domain":"example.com","check":"spf",` +
		`"before":{"status":"pass","records":["v=spf1 include:_spf.example.net -all"]},` +
		`"after":{"status":"fail","records":[]}}`),
	TypeWebhookDeliveryFailed: json.RawMessage(`{"delivery_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f70",` +
		`"subscription_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f71","event_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f72",` +
		`"event_type":"bounce_spike","url":"https://hooks.example.com/mailwatch","attempts":10,` +
		`"last_status_code":500,"last_error":"HTTP 500"}`),
	TypeSubscriptionDisabled: json.RawMessage(`{"subscription_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f71",` +
		`"url":"https://hooks.example.com/mailwatch","reason":"endpoint answered 410 Gone"}`),
	TypeSubscriptionFailing: json.RawMessage(`{"subscription_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f71",` +
		`"url":"https://hooks.example.com/mailwatch","failing_since":"2026-01-01T08:00:00Z","disables_at":"2026-01-06T08:00:00Z"}`),
	TypeSubscriptionRecovered: json.RawMessage(`{"subscription_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f71",` +
		`"url":"https://hooks.example.com/mailwatch","failing_since":"2026-01-01T08:00:00Z","recovered_at":"2026-01-02T14:30:00Z"}`),
	TypeSubscriptionRecoveryRequested: json.RawMessage(`{"subscription_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f71",` +
		`"since":"2026-01-01T08:00:00Z","until":"2026-01-02T14:30:00Z","job_id":4212,"already_queued":false,"key_identifier":"mw_AbCd"}`),
	TypeDMARCReportReceived: json.RawMessage(`{"domain":"example.com","org_name":"google.com","report_id":"1234567890",` +
		`"begin":"2026-01-01T00:00:00Z","end":"2026-01-02T00:00:00Z","messages":1520,"pass_rate":0.98}`),
	TypeReceiverMessageReceived: json.RawMessage(`{"receiver_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f73",` +
		`"message_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f74","channel":"email","from":"noreply@example.com",` +
		`"subject":"Your sign-in code","label":"signup test"}`),
	TypeReceiverMessageAnalyzed: json.RawMessage(`{"receiver_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f73",` +
		`"message_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f74","grade":"B","score":85,"spf":"pass","dkim":"pass","dmarc":"pass"}`),
	TypeAlertAcknowledged: json.RawMessage(`{"alert_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f75","alert_type":"health_score_changed",` +
		`"acknowledged_by":"alice@example.com","note":"DMARC record restored","key_identifier":"mw_AbCd"}`),
	TypeAlertUnacknowledged: json.RawMessage(`{"alert_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f75","alert_type":"health_score_changed",` +
		`"previously_acknowledged_by":"alice@example.com","previous_note":"DMARC record restored","key_identifier":"mw_AbCd"}`),
	TypeMessageDeleted: json.RawMessage(`{"receiver_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f73",` +
		`"message_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f74","key_identifier":"mw_AbCd"}`),
	TypeDNSFixApplied: json.RawMessage(`{"domain":"example.com","recommendation_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f80",` +
		`"check":"spf","name":"example.com","type":"TXT","op":"replace_rr","connection_kind":"rfc2136",` +
		`"before":["v=spf1 include:a.example include:b.example ~all"],"after":["v=spf1 ip4:192.0.2.0/24 -all"]}`),
	TypeDNSFixFailed: json.RawMessage(`{"domain":"example.com","recommendation_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f80",` +
		`"check":"dmarc","name":"_dmarc.example.com","type":"TXT","op":"replace_rr","connection_kind":"cloudflare",` +
		`"before":["v=DMARC1; p=none"],"after":["v=DMARC1; p=quarantine"],` +
		`"error":"the record changed since it was observed; it now holds [\"v=DMARC1; p=quarantine\"]","conflict":true}`),
	TypeMXVerificationLost: json.RawMessage(`{"domain":"example.com","name":"reports.example.com",` +
		`"problems":["reports.example.com has no MX record pointing to mx.mailwatch.example"]}`),
	TypeDMARCNewSource: json.RawMessage(`{"domain":"example.com","source_ip":"203.0.113.7","ptr":"",` +
		`"base_domain":"","messages":412,"failing":412,"category":"threat_unknown","org_name":"google.com","report_id":"1234567890"}`),
	TypeDMARCReportsStopped: json.RawMessage(`{"domain":"example.com","reporter":"google.com",` +
		`"last_report_at":"2026-01-01T04:12:00Z","silent_hours":74,"days_reported":7}`),
	TypeDMARCReportsResumed: json.RawMessage(`{"domain":"example.com","reporter":"google.com","stopped_at":"2026-01-04T06:00:00Z"}`),
	TypeDMARCFailureReport: json.RawMessage(`{"domain":"example.com","reporter":"Yahoo! Mail AFRF Report Generator",` +
		`"source_ip":"203.0.113.7","from":"billing@example.com","auth_failure":"dmarc","arrival_date":"2026-01-01T10:00:00Z","suppressed":0}`),
	TypeDKIMSelectorNew:  json.RawMessage(`{"domain":"example.com","selector":"s2","origin":"report","sources":["192.0.2.10"]}`),
	TypeDKIMSelectorIdle: json.RawMessage(`{"domain":"example.com","selector":"old2019","last_seen_in_reports":"2025-09-01T06:00:00Z","idle_days":122}`),
	TypeDKIMKeyWeak:      json.RawMessage(`{"domain":"example.com","selector":"s1","key_type":"rsa","key_bits":1024}`),
	TypeDMARCNewSubdomain: json.RawMessage(`{"domain":"example.com","subdomain":"billing.example.com","first_seen":"2026-01-01",` +
		`"messages":212,"passing":0,"pass_rate":0,"org_name":"google.com","report_id":"1234567890"}`),
	TypeBlocklistListed: json.RawMessage(`{"domain":"example.com","list":"Spamhaus ZEN","zone":"zen.spamhaus.org","kind":"ip",` +
		`"target":"192.0.2.10","codes":[{"code":"127.0.0.2","name":"SBL","meaning":"Spamhaus SBL: a known spam source","informational":false}],` +
		`"reason":"https://check.spamhaus.org/","share":0.4,"listed_share":0.4,"critical_share":0.1,"informational":false,` +
		`"delist_url":"https://check.spamhaus.org/"}`),
	TypeBlocklistDelisted: json.RawMessage(`{"domain":"example.com","list":"Spamhaus ZEN","zone":"zen.spamhaus.org","kind":"ip",` +
		`"target":"192.0.2.10","share":0.4,"listed_at":"2026-01-01T00:00:00Z","listed_share":0}`),
	TypeTLSReportReceived: json.RawMessage(`{"domain":"example.com","org_name":"Google Inc.","report_id":"2026-01-01T00:00:00Z_example.com",` +
		`"begin":"2026-01-01T00:00:00Z","end":"2026-01-01T23:59:59Z","successful_sessions":5326,"failed_sessions":0}`),
	TypeTLSReportFailures: json.RawMessage(`{"domain":"example.com","org_name":"Google Inc.","report_id":"2026-01-01T00:00:00Z_example.com",` +
		`"begin":"2026-01-01T00:00:00Z","end":"2026-01-01T23:59:59Z","successful_sessions":5023,"failed_sessions":303,` +
		`"failures_by_type":{"certificate-expired":100,"starttls-not-supported":203}}`),
	TypePlanChanged: json.RawMessage(`{"previous_plan":"free","plan":"pro","reason":"stripe_subscription",` +
		`"stripe_event_id":"evt_1QbC2dEfGhIjKlMn","stripe_subscription_id":"sub_1QbC2dEfGhIjKlMn"}`),
	TypePaymentFailed: json.RawMessage(`{"invoice_id":"in_1QbC2dEfGhIjKlMn","customer_id":"cus_RcD3eFgHiJkLmN",` +
		`"amount_due":2900,"currency":"usd","attempt_count":1,"plan":"pro","grace_until":"2026-01-08T12:00:00Z",` +
		`"stripe_event_id":"evt_1QbC2dEfGhIjKlMo"}`),
	TypeAdminPlanSet: json.RawMessage(`{"plan":"business","previous_plan":"pro","key_identifier":"mw_AbCd","note":"annual contract"}`),
	TypeAccountSuspended: json.RawMessage(`{"reason":"unpaid invoices since March",` +
		`"admin_account_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f90","admin_email":"ops@example.com","admin_key_identifier":"mw_AbCd"}`),
	TypeAccountUnsuspended: json.RawMessage(`{"previous_reason":"unpaid invoices since March",` +
		`"admin_account_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f90","admin_email":"ops@example.com","admin_key_identifier":"mw_AbCd"}`),
	TypeMaintenanceTaskRun: json.RawMessage(`{"task":"prune-events","job_id":4211,"job_kind":"event_prune",` +
		`"already_queued":false,"admin_key_identifier":"mw_AbCd"}`),
	TypeSMSPoolChanged:  json.RawMessage(`{"action":"added","phone_number":"+14155550100","admin_key_identifier":"mw_AbCd"}`),
	TypePasswordChanged: json.RawMessage(`{"key_identifier":"mw_AbCd","changed_at":"2026-03-01T12:00:00Z"}`),
	TypeSubscriptionSecretRotated: json.RawMessage(`{"subscription_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f71",` +
		`"rotated_at":"2026-03-01T12:00:00Z","previous_secret_expires_at":"2026-03-02T12:00:00Z","key_identifier":"mw_AbCd"}`),
	// Notification channels (internal/channels).
	TypeNotificationChannelFailing: json.RawMessage(`{"channel_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f75","kind":"slack",` +
		`"label":"#ops","destination":"https://hooks.slack.com/…","failing_since":"2026-01-01T08:00:00Z",` +
		`"last_error":"Slack answered 404 Not Found: no_service"}`),
	TypeNotificationChannelRecovered: json.RawMessage(`{"channel_id":"0195a3b4-7c1d-7e2f-9a10-2b3c4d5e6f75","kind":"slack",` +
		`"label":"#ops","destination":"https://hooks.slack.com/…","failing_since":"2026-01-01T08:00:00Z"}`),
}

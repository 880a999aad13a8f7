package dataapi

// Column is an allow-listed column and its Postgres type (values are bound
// as text and cast to it in SQL).
type Column struct {
	Name string
	Type string
}

// Table is an allow-listed view of schema data_api.
type Table struct {
	Name    string
	Columns []Column
	// Owner is the SQL condition, on $1 (the caller's account id), that
	// keeps the caller's rows; RLS enforces the same in the database.
	Owner string
	index map[string]Column
}

func (t *Table) column(name string) (Column, bool) {
	c, ok := t.index[name]
	return c, ok
}

func cols(spec ...string) []Column {
	out := make([]Column, 0, len(spec)/2)
	for i := 0; i+1 < len(spec); i += 2 {
		out = append(out, Column{Name: spec[i], Type: spec[i+1]})
	}
	return out
}

const byAccount = `account_id = $1::uuid`

// byDomain owns a row through its domain.
const byDomain = `domain_id IN (SELECT d.id FROM data_api.domains d WHERE d.account_id = $1::uuid)`

// Tables is the allow-list; it matches the views of schema/0010_data_api.sql,
// schema/0012_data_api_tables.sql, schema/0013_preferences.sql and
// schema/0029_message_event_rollups.sql and schema/0041_reputation.sql, as
// schema/0024_data_api_rest_names.sql extends them with the REST API's
// names (RESTNames), and schema/0030_event_rollups.sql's; a test compares
// them with the database.
var Tables = func() map[string]*Table {
	list := []*Table{
		{Name: "domains", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "name", "text", "tags", "text[]", "dkim_selectors", "text[]",
			"created_at", "timestamptz", "updated_at", "timestamptz", "checked_at", "timestamptz", "results", "jsonb",
			"check_status", "jsonb", "score", "integer", "health", "jsonb", "scored_at", "timestamptz",
			"domain", "text", "checks", "jsonb")},
		{Name: "domain_health_history", Owner: `domain_id IN (SELECT d.id FROM data_api.domains d WHERE d.account_id = $1::uuid)`, Columns: cols(
			"id", "uuid", "domain_id", "uuid", "score", "integer", "report", "jsonb", "computed_at", "timestamptz")},
		{Name: "events", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "event_type", "text", "severity", "text", "domain", "text", "tags", "text[]",
			"payload", "jsonb", "created_at", "timestamptz", "acknowledged_at", "timestamptz", "acknowledged_by", "text",
			"acknowledged_note", "text", "note", "text")},
		{Name: "receivers", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "channel", "text", "label", "text", "address", "text", "ttl_seconds", "integer",
			"expires_at", "timestamptz", "created_at", "timestamptz", "expired_at", "timestamptz")},
		{Name: "messages", Owner: byAccount, Columns: cols(
			"id", "uuid", "receiver_id", "uuid", "account_id", "uuid", "seq", "bigint", "channel", "text", "sender", "text",
			"subject", "text", "text_body", "text", "html_body", "text", "parsed", "jsonb", "size_bytes", "integer",
			"received_at", "timestamptz",
			// schema/0047_data_api_message_analysis.sql
			"analysis", "jsonb", "analyzed_at", "timestamptz", "smtp_client_ip", "text", "smtp_helo", "text",
			"smtp_mail_from", "text", "smtp_tls_version", "text", "smtp_tls_cipher", "text")},
		{Name: "event_subscriptions", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "url", "text", "event_types", "text[]", "domain_filter", "text",
			"tag_filter", "text", "enabled", "boolean", "disabled_reason", "text", "disabled_at", "timestamptz",
			"failing_since", "timestamptz", "last_success_at", "timestamptz", "created_at", "timestamptz", "updated_at", "timestamptz",
			// schema/0059_subscription_rotation_throttle.sql
			"max_per_second", "integer", "max_in_flight", "integer", "secret_rotated_at", "timestamptz",
			"previous_secret_expires_at", "timestamptz")},
		{Name: "deliveries", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "subscription_id", "uuid", "event_id", "uuid", "event_type", "text",
			"status", "text", "attempts", "integer", "max_attempts", "integer", "last_status_code", "integer",
			"last_error", "text", "next_retry_at", "timestamptz", "created_at", "timestamptz", "updated_at", "timestamptz",
			"delivered_at", "timestamptz", "failed_at", "timestamptz")},
		{Name: "auth_providers", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "kind", "text", "name", "text", "issuer", "text", "jwks_url", "text",
			"audience", "text", "subject_claim", "text", "email_claim", "text", "created_at", "timestamptz", "updated_at", "timestamptz")},
		{Name: "auth_provider_links", Owner: byAccount, Columns: cols(
			"id", "uuid", "provider_id", "uuid", "account_id", "uuid", "subject", "text", "email", "text", "source", "text",
			"created_at", "timestamptz", "updated_at", "timestamptz")},

		// schema/0012_data_api_tables.sql
		{Name: "providers", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "kind", "text", "label", "text", "config", "jsonb",
			"last_payload_at", "timestamptz", "created_at", "timestamptz", "updated_at", "timestamptz")},
		{Name: "provider_links", Owner: `provider_id IN (SELECT p.id FROM data_api.providers p WHERE p.account_id = $1::uuid)`, Columns: cols(
			"provider_id", "uuid", "domain_id", "uuid", "created_at", "timestamptz")},
		{Name: "message_events", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "provider_id", "uuid", "provider_kind", "text", "event_id", "text",
			"message_id", "text", "event_type", "text", "bounce_class", "text", "recipient", "text", "domain", "text",
			"domain_id", "uuid", "unlinked", "boolean", "classification", "text", "detail", "text",
			"occurred_at", "timestamptz", "received_at", "timestamptz")},
		{Name: "suppressions", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "email", "text", "reason", "text", "domain", "text",
			"provider_id", "uuid", "source_event_id", "uuid", "created_at", "timestamptz", "since", "timestamptz")},
		{Name: "message_spikes", Owner: byDomain, Columns: cols(
			"domain_id", "uuid", "provider_id", "uuid", "kind", "text", "active", "boolean", "started_at", "timestamptz",
			"ended_at", "timestamptz", "event_id", "uuid", "rate", "double precision", "checked_at", "timestamptz")},
		{Name: "received_reports", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "domain_id", "uuid", "kind", "text", "source", "text",
			"raw_size", "integer", "status", "text", "reason", "text", "report_type", "text", "failure", "jsonb",
			"received_at", "timestamptz", "parsed_at", "timestamptz", "size_bytes", "integer")},
		{Name: "dmarc_reports", Owner: byDomain, Columns: cols(
			"id", "uuid", "domain_id", "uuid", "message_id", "uuid", "org_name", "text", "report_id", "text",
			"email", "text", "begin_at", "timestamptz", "end_at", "timestamptz", "policy_domain", "text",
			"policy", "jsonb", "version", "text", "record_count", "integer", "message_count", "bigint",
			"pass_count", "bigint", "created_at", "timestamptz",
			"begin", "timestamptz", "end", "timestamptz", "records", "integer", "messages", "bigint", "passing", "bigint")},
		{Name: "dmarc_records", Owner: `report_id IN (SELECT r.id FROM data_api.dmarc_reports r JOIN data_api.domains d ON d.id = r.domain_id WHERE d.account_id = $1::uuid)`, Columns: cols(
			"report_id", "uuid", "ordinal", "integer", "source_ip", "text", "count", "bigint", "disposition", "text",
			"dkim", "text", "spf", "text", "header_from", "text", "envelope_from", "text", "envelope_to", "text",
			"reasons", "jsonb", "dkim_results", "jsonb", "spf_results", "jsonb")},
		{Name: "dmarc_sources", Owner: byDomain, Columns: cols(
			"domain_id", "uuid", "day", "date", "source_ip", "text", "messages", "bigint", "dkim_aligned", "bigint",
			"spf_aligned", "bigint", "compliant", "bigint", "forwarded", "bigint", "failing", "bigint",
			"dkim_selectors", "text[]")},
		{Name: "tls_reports", Owner: byDomain, Columns: cols(
			"id", "uuid", "domain_id", "uuid", "message_id", "uuid", "org_name", "text", "report_id", "text",
			"contact_info", "text", "begin_at", "timestamptz", "end_at", "timestamptz", "successful_count", "bigint",
			"failure_count", "bigint", "policies", "jsonb", "created_at", "timestamptz",
			"begin", "timestamptz", "end", "timestamptz", "successful_sessions", "bigint", "failed_sessions", "bigint")},
		{Name: "dns_connections", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "kind", "text", "label", "text", "config", "jsonb",
			"verified_at", "timestamptz", "created_at", "timestamptz", "updated_at", "timestamptz")},
		{Name: "dns_connection_links", Owner: byDomain, Columns: cols(
			"domain_id", "uuid", "connection_id", "uuid", "zone_name", "text", "zone_id", "text", "created_at", "timestamptz",
			"zone", "text", "linked_at", "timestamptz")},
		{Name: "dns_recommendations", Owner: byDomain, Columns: cols(
			"id", "uuid", "domain_id", "uuid", "key", "text", "check_name", "text", "severity", "text", "name", "text",
			"rtype", "text", "op", "text", "current", "text[]", "proposed", "text[]", "why", "text", "manual", "boolean",
			"fingerprint", "text", "state", "text", "dismissed_reason", "text", "dismissed_until", "timestamptz",
			"last_error", "text", "applied_at", "timestamptz", "created_at", "timestamptz", "updated_at", "timestamptz",
			"check", "text", "type", "text")},
		{Name: "mx_setups", Owner: byDomain, Columns: cols(
			"id", "uuid", "domain_id", "uuid", "name", "text", "token", "text", "state", "text", "problems", "text[]",
			"last_checked_at", "timestamptz", "verified_at", "timestamptz", "created_at", "timestamptz", "updated_at", "timestamptz")},

		// schema/0029_message_event_rollups.sql
		{Name: "message_event_days", Owner: byAccount, Columns: cols(
			"account_id", "uuid", "day", "date", "provider_kind", "text", "event_type", "text", "bounce_class", "text",
			"count", "bigint")},

		// schema/0041_reputation.sql
		{Name: "reputation_targets", Owner: byAccount, Columns: cols(
			"account_id", "uuid", "domain_id", "uuid", "target", "text", "kind", "text", "origin", "text", "messages", "bigint",
			"share", "double precision", "checked_at", "timestamptz", "updated_at", "timestamptz")},
		{Name: "reputation_listings", Owner: byAccount, Columns: cols(
			"account_id", "uuid", "domain_id", "uuid", "zone", "text", "target", "text", "codes", "jsonb", "reason", "text",
			"listed_at", "timestamptz", "delisted_at", "timestamptz")},

		// schema/0044_reputation_watch.sql
		{Name: "reputation_pins", Owner: byAccount, Columns: cols(
			"account_id", "uuid", "domain_id", "uuid", "cidr", "text", "note", "text", "created_at", "timestamptz")},

		// schema/0049_dmarc_subdomains.sql
		{Name: "dmarc_subdomains", Owner: byDomain, Columns: cols(
			"domain_id", "uuid", "name", "text", "first_seen", "date", "last_seen", "date", "first_messages", "bigint",
			"first_passing", "bigint", "messages", "bigint", "passing", "bigint", "dns_exists", "boolean",
			"dns_checked_at", "timestamptz")},

		// schema/0057_dmarc_reporters.sql
		{Name: "dmarc_reporters", Owner: byDomain, Columns: cols(
			"domain_id", "uuid", "reporter", "text", "first_seen_at", "timestamptz", "last_seen_at", "timestamptz",
			"recent_days", "date[]", "reports", "bigint", "stopped_at", "timestamptz")},

		// schema/0058_dkim_selectors.sql
		{Name: "dkim_selectors", Owner: byDomain, Columns: cols(
			"domain_id", "uuid", "selector", "text", "first_seen_at", "timestamptz", "report_first_at", "timestamptz",
			"report_last_at", "timestamptz", "dns_first_at", "timestamptz", "dns_last_at", "timestamptz", "published", "boolean",
			"key_type", "text", "key_bits", "integer", "sources", "text[]", "idle_since", "timestamptz")},

		// schema/0013_preferences.sql
		{Name: "preference_groups", Owner: byAccount, Columns: cols(
			"account_id", "uuid", "group_name", "text", "email", "boolean", "webhook", "boolean", "updated_at", "timestamptz",
			"name", "text")},
		{Name: "preference_overrides", Owner: byAccount, Columns: cols(
			"account_id", "uuid", "event_type", "text", "email", "boolean", "webhook", "boolean", "updated_at", "timestamptz")},

		// schema/0042_transport.sql
		{Name: "mx_transport", Owner: byAccount, Columns: cols(
			"account_id", "uuid", "domain_id", "uuid", "mx_host", "text", "address", "text", "port", "integer",
			"verdict", "text", "host_verdict", "text", "problems", "jsonb", "starttls", "boolean", "tls_version", "text",
			"cipher_suite", "text", "verified", "boolean", "name_matches", "boolean", "matches_policy", "boolean",
			"not_after", "timestamptz", "days_left", "integer", "fingerprint", "text", "dane_status", "text",
			"dane_rollover", "boolean", "fcrdns", "boolean", "ptr", "text", "probed_at", "timestamptz")},

		// schema/0030_event_rollups.sql, reading event_counts_daily since 0036
		{Name: "event_daily_counts", Owner: byAccount, Columns: cols(
			"account_id", "uuid", "day", "date", "event_type", "text", "severity", "text", "events", "bigint")},
	}
	m := make(map[string]*Table, len(list))
	for _, t := range list {
		t.index = make(map[string]Column, len(t.Columns))
		for _, c := range t.Columns {
			t.index[c.Name] = c
		}
		m[t.Name] = t
	}
	return m
}()

// TableNames lists the allow-listed tables, sorted.
func TableNames() []string {
	out := make([]string, 0, len(Tables))
	for n := range Tables {
		out = append(out, n)
	}
	sortStrings(out)
	return out
}

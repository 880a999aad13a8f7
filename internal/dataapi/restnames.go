package dataapi

import "strings"

// RESTName pairs a data-API column with the REST API's JSON field that
// carries the same value under another name.
type RESTName struct {
	Table  string // data-API table (view)
	Column string // its column
	// Field is the REST API's JSON field in its object for the same row; a
	// dotted path for a nested one, with [] for one inside a list
	// (ips[].ip).
	Field string
	// Alias: the view also has Field (a plain name) as a column
	// (schema/0024_data_api_rest_names.sql), so either name reads it.
	Alias bool
	// Note says how the two differ.
	Note string
}

// RESTNames lists every column whose REST name differs. A test holds it to
// the views and to the REST API's response types, and the table of docs/features/data-api.md
// is rendered from it (RESTNamesMarkdown), so neither can go stale.
var RESTNames = []RESTName{
	{Table: "domains", Column: "name", Field: "domain", Alias: true},
	{Table: "domains", Column: "check_status", Field: "checks", Alias: true},
	{Table: "domain_health_history", Column: "report", Field: "components",
		Note: "the REST entry spreads the report's fields (components, unknown, caps, applied) at its top level"},
	{Table: "events", Column: "acknowledged_note", Field: "note", Alias: true},
	{Table: "messages", Column: "text_body", Field: "text", Note: "no alias: select=* would send each body twice"},
	{Table: "messages", Column: "html_body", Field: "html", Note: "no alias: select=* would send each body twice"},
	{Table: "suppressions", Column: "created_at", Field: "since", Alias: true},
	{Table: "received_reports", Column: "raw_size", Field: "size_bytes", Alias: true},
	{Table: "dmarc_reports", Column: "begin_at", Field: "begin", Alias: true},
	{Table: "dmarc_reports", Column: "end_at", Field: "end", Alias: true},
	{Table: "dmarc_reports", Column: "record_count", Field: "records", Alias: true},
	{Table: "dmarc_reports", Column: "message_count", Field: "messages", Alias: true},
	{Table: "dmarc_reports", Column: "pass_count", Field: "passing", Alias: true},
	{Table: "dmarc_sources", Column: "source_ip", Field: "ips[].ip",
		Note: "REST groups a period's daily rows by sender; each of its IPs is one source_ip"},
	{Table: "tls_reports", Column: "begin_at", Field: "begin", Alias: true},
	{Table: "tls_reports", Column: "end_at", Field: "end", Alias: true},
	{Table: "tls_reports", Column: "successful_count", Field: "successful_sessions", Alias: true},
	{Table: "tls_reports", Column: "failure_count", Field: "failed_sessions", Alias: true},
	{Table: "dns_connection_links", Column: "zone_name", Field: "zone", Alias: true},
	{Table: "dns_connection_links", Column: "created_at", Field: "linked_at", Alias: true},
	{Table: "dns_connection_links", Column: "domain_id", Field: "domain",
		Note: "REST gives the domain's name; read it from domains by id"},
	{Table: "dns_recommendations", Column: "check_name", Field: "check", Alias: true},
	{Table: "dns_recommendations", Column: "rtype", Field: "type", Alias: true},
	{Table: "mx_setups", Column: "domain_id", Field: "domain",
		Note: "REST gives the domain's name; read it from domains by id"},
	// The preferences object: each of its groups[] is a preference_groups
	// row, each of their types[] a preference_overrides row.
	{Table: "preference_groups", Column: "group_name", Field: "name", Alias: true},
	{Table: "preference_groups", Column: "email", Field: "channels.email", Note: "nested under channels"},
	{Table: "preference_groups", Column: "webhook", Field: "channels.webhook", Note: "nested under channels"},
	{Table: "preference_overrides", Column: "email", Field: "override.email",
		Note: "nested under override; the REST type's own email is the resolved decision, not the override"},
	{Table: "preference_overrides", Column: "webhook", Field: "override.webhook",
		Note: "nested under override; the REST type's own webhook is the resolved decision, not the override"},
	{Table: "event_daily_counts", Column: "day", Field: "date",
		Note: "REST sums these rows: events/daily-volume per date (severities as info, warning, critical, total), type-breakdown per event_type (count)"},
}

// RESTNamesMarkdown renders RESTNames as the table of docs/features/data-api.md.
func RESTNamesMarkdown() string {
	var b strings.Builder
	b.WriteString("| data API `table.column` | REST field | REST name also a data-API column | note |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, n := range RESTNames {
		alias := "no"
		if n.Alias {
			alias = "yes"
		}
		b.WriteString("| `" + n.Table + "." + n.Column + "` | `" + n.Field + "` | " + alias + " | " + n.Note + " |\n")
	}
	return b.String()
}

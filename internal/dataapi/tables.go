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

// Tables is the allow-list; it matches the views of schema/0010_data_api.sql
// (a test compares them with the database).
var Tables = func() map[string]*Table {
	list := []*Table{
		{Name: "domains", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "name", "text", "tags", "text[]", "dkim_selectors", "text[]",
			"created_at", "timestamptz", "updated_at", "timestamptz", "checked_at", "timestamptz", "results", "jsonb",
			"check_status", "jsonb", "score", "integer", "health", "jsonb", "scored_at", "timestamptz")},
		{Name: "domain_health_history", Owner: `domain_id IN (SELECT d.id FROM data_api.domains d WHERE d.account_id = $1::uuid)`, Columns: cols(
			"id", "uuid", "domain_id", "uuid", "score", "integer", "report", "jsonb", "computed_at", "timestamptz")},
		{Name: "events", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "event_type", "text", "severity", "text", "domain", "text", "tags", "text[]",
			"payload", "jsonb", "created_at", "timestamptz", "acknowledged_at", "timestamptz", "acknowledged_by", "text",
			"acknowledged_note", "text")},
		{Name: "receivers", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "channel", "text", "label", "text", "address", "text", "ttl_seconds", "integer",
			"expires_at", "timestamptz", "created_at", "timestamptz", "expired_at", "timestamptz")},
		{Name: "messages", Owner: byAccount, Columns: cols(
			"id", "uuid", "receiver_id", "uuid", "account_id", "uuid", "seq", "bigint", "channel", "text", "sender", "text",
			"subject", "text", "text_body", "text", "html_body", "text", "parsed", "jsonb", "size_bytes", "integer",
			"received_at", "timestamptz")},
		{Name: "event_subscriptions", Owner: byAccount, Columns: cols(
			"id", "uuid", "account_id", "uuid", "url", "text", "event_types", "text[]", "domain_filter", "text",
			"tag_filter", "text", "enabled", "boolean", "disabled_reason", "text", "disabled_at", "timestamptz",
			"failing_since", "timestamptz", "last_success_at", "timestamptz", "created_at", "timestamptz", "updated_at", "timestamptz")},
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

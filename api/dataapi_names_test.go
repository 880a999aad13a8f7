package api_test

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dataapi"
	"github.com/mailwatch/mailwatch/internal/notify"
	"github.com/mailwatch/mailwatch/internal/reports"
	"github.com/mailwatch/mailwatch/internal/selectors"
)

// restObjects are, per data-API table, the REST API's objects for the same
// rows, and the fields of theirs that are not a data-API column under any
// name (computed, or kept from the data API).
var restObjects = map[string]struct {
	types   []any
	derived []string
}{
	"domains":               {[]any{api.Domain{}, api.DomainDetail{}}, nil},
	"domain_health_history": {[]any{api.HealthEntry{}}, []string{"unknown", "caps", "applied"}}, // inside report
	"events":                {[]any{api.Event{}, api.Alert{}}, []string{"acknowledged", "acknowledged_key_identifier"}},
	"receivers":             {[]any{api.Receiver{}}, []string{"expired", "message_count"}},
	// Parsed from the message: the data API has it in parsed.
	"messages": {[]any{api.MessageSummary{}, api.Message{}}, []string{"from", "to", "cc", "recipients", "date", "headers",
		"attachments", "attachment_count", "links", "codes", "media", "rfc822_message_id"}},
	"event_subscriptions":  {[]any{api.Subscription{}}, nil},
	"deliveries":           {[]any{api.Delivery{}}, []string{"last_error_class", "job_id", "pending_reconciliation"}},
	"auth_providers":       {[]any{api.AuthProvider{}}, []string{"has_webhook_secret", "webhook_path"}},
	"auth_provider_links":  {[]any{api.AuthProviderLink{}}, nil},
	"providers":            {[]any{api.SendingProvider{}}, []string{"configured_fields", "ingress_url", "setup_steps", "linked_domains"}},
	"suppressions":         {[]any{api.SuppressionEntry{}}, nil},
	"received_reports":     {[]any{api.ReceivedReport{}}, []string{"raw_kept", "job_id"}},
	"dmarc_reports":        {[]any{api.DMARCReportSummary{}}, nil},
	"dmarc_records":        {[]any{api.DMARCRecord{}}, nil},
	"dmarc_sources":        {[]any{reports.Source{}}, []string{"name", "type", "known", "base_domain", "category", "dmarc_pass_rate", "dkim_aligned_rate", "spf_aligned_rate", "ip_count"}},
	"tls_reports":          {[]any{api.TLSReportSummary{}}, nil},
	"dns_connections":      {[]any{api.DNSProvider{}}, []string{"links"}}, // dns_connection_links
	"dns_connection_links": {[]any{api.DNSProviderLink{}}, nil},
	"dns_recommendations":  {[]any{api.DNSRecommendation{}}, []string{"job_id"}},
	"mx_setups":            {[]any{api.MXSetup{}}, []string{"records"}},
	"mx_transport":         {[]any{api.TransportAddress{}}, nil},
	"preference_groups":    {[]any{notify.GroupPrefs{}}, []string{"description", "required", "set", "types"}},
	"preference_overrides": {[]any{notify.TypePrefs{}}, nil},
	"event_daily_counts":   {[]any{api.DayVolume{}, api.TypeCount{}}, []string{"info", "warning", "critical", "total", "count"}},
	"reputation_targets":   {[]any{api.WatchedTarget{}}, []string{"listings"}},                               // reputation_listings
	"reputation_listings":  {[]any{api.BlocklistListing{}}, []string{"list", "informational", "delist_url"}}, // from the catalog
	"reputation_pins":      {[]any{api.ReputationPin{}}, []string{"addresses"}},                              // from cidr
	"dmarc_subdomains":     {[]any{reports.Subdomain{}}, []string{"subdomain", "pass_rate"}},                 // pass_rate from messages and passing
	"dmarc_reporters":      {[]any{reports.Reporter{}}, []string{"days_reported_7", "status"}},               // from recent_days and stopped_at
	"dkim_selectors":       {[]any{selectors.Selector{}}, []string{"status", "weak", "suggested_action"}},    // from the other columns
}

// TestRESTNamesMatchRESTTypes holds dataapi.RESTNames to the REST API's
// JSON: every pair names a real REST field and a real column, and every
// field of a REST object is either a column of the same name, a listed
// pair, or known to have no column. A REST field added or renamed without
// its pair fails here.
func TestRESTNamesMatchRESTTypes(t *testing.T) {
	t.Parallel()
	require.ElementsMatch(t, dataapi.TableNames(), append(keys(restObjects), "message_events", "message_spikes", "provider_links", "message_event_days"),
		"each table has its REST objects listed (those four have no REST object: REST only counts them)")
	renamed := map[string]map[string]bool{} // table -> REST top-level field
	for _, n := range dataapi.RESTNames {
		objs, ok := restObjects[n.Table]
		require.True(t, ok, "%s has no REST object listed", n.Table)
		found := false
		for _, typ := range objs.types {
			found = found || jsonPathExists(reflect.TypeOf(typ), n.Field)
		}
		require.True(t, found, "%s.%s: no REST field %s", n.Table, n.Column, n.Field)
		if renamed[n.Table] == nil {
			renamed[n.Table] = map[string]bool{}
		}
		renamed[n.Table][strings.TrimSuffix(strings.Split(n.Field, ".")[0], "[]")] = true
	}
	var missing []string
	for table, objs := range restObjects {
		tab := dataapi.Tables[table]
		columns := map[string]bool{}
		for _, c := range tab.Columns {
			columns[c.Name] = true
		}
		for _, typ := range objs.types {
			for _, field := range jsonFields(reflect.TypeOf(typ)) {
				ok := columns[field] || renamed[table][field]
				for _, d := range objs.derived {
					ok = ok || d == field
				}
				if !ok {
					missing = append(missing, fmt.Sprintf("%s: %T.%s", table, typ, field))
				}
			}
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "REST fields that are neither a column of the same name, a pair of dataapi.RESTNames, nor listed as derived")
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// jsonFields lists a struct's JSON field names, embedded structs' included.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if f.Anonymous && name == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// jsonPathExists resolves a path such as ips[].ip or channels.email.
func jsonPathExists(t reflect.Type, path string) bool {
	for _, part := range strings.Split(path, ".") {
		name := strings.TrimSuffix(part, "[]")
		f, ok := jsonField(t, name)
		if !ok {
			return false
		}
		t = f.Type
		for t.Kind() == reflect.Pointer || (strings.HasSuffix(part, "[]") && t.Kind() == reflect.Slice) {
			t = t.Elem()
		}
	}
	return true
}

func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("json"), ",")[0]
		if f.Anonymous && tag == "" {
			if inner, ok := jsonField(f.Type, name); ok {
				return inner, true
			}
			continue
		}
		if f.IsExported() && tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

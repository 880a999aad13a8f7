package migrate_test

import (
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

// Why a unique key of a tenant table does not hold account_id. Sharding by
// account (a distributed Postgres such as Citus) needs every unique key of a
// distributed table to include the distribution column; each kind below says
// what would change for it (docs/capacity.md, "Past one machine").
const (
	// idKey: a primary key on a generated id (UUIDv7). Sharded, it becomes
	// (account_id, id); lookups by id alone (jobs that carry only the id)
	// would carry the account too.
	idKey = "id"
	// globalKey: looked up before the account is known (a secret's hash, an
	// inbound address, a provider's customer id). Sharded, it moves to a
	// small routing table that maps the key to its account.
	globalKey = "global lookup"
	// parentKey: unique within another tenant row (a provider, a receiver, a
	// domain) that itself belongs to one account. Sharded, account_id is
	// added in front, which keeps it unique.
	parentKey = "scoped by a tenant parent"
)

// tenantKeysWithoutAccount lists every unique key of a table with an
// account_id column that does not include account_id.
var tenantKeysWithoutAccount = map[string]string{
	"account_plans_stripe_customer_key":     globalKey,
	"api_keys_key_hash_key":                 globalKey,
	"api_keys_pkey":                         idKey,
	"auth_provider_links_email_key":         parentKey,
	"auth_provider_links_pkey":              idKey,
	"auth_provider_links_subject_key":       parentKey,
	"auth_providers_pkey":                   idKey,
	"dns_connections_pkey":                  idKey,
	"domains_pkey":                          idKey,
	"event_subscriptions_pkey":              idKey,
	"message_events_pkey":                   parentKey, // (provider_id, event_id, occurred_at): the dedupe key
	"notification_addresses_pkey":           idKey,
	"notification_channel_alerts_pkey":      parentKey, // (channel_id, alert_id): one record per channel and alert
	"notification_channels_pkey":            idKey,
	"notification_addresses_token_hash_key": globalKey,
	"provider_payloads_pkey":                idKey,
	"receiver_messages_pkey":                idKey,
	"receiver_messages_seq_key":             parentKey,
	"receiver_messages_webhook_id_key":      globalKey,
	"receivers_email_address_key":           globalKey,
	"receivers_pkey":                        idKey,
	"report_messages_pkey":                  idKey,
	"reporting_addresses_domain_kind_key":   parentKey,
	"reporting_addresses_pkey":              globalKey,
	"sending_providers_pkey":                idKey,
	"stripe_events_pkey":                    globalKey,
	"stripe_subscriptions_pkey":             globalKey,
	"suppressions_pkey":                     idKey,
	"web_sessions_pkey":                     idKey,
	"web_sessions_token_hash_key":           globalKey,
	"webhook_deliveries_pkey":               idKey,
}

// TestTenantUniqueKeysHoldAccount keeps the path to sharding by account
// open: a new unique key on a tenant table either includes account_id or is
// listed above with the reason it cannot, and the list names only keys that
// exist.
func TestTenantUniqueKeysHoldAccount(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDB(t)
	rows, err := pool.Query(t.Context(), `
SELECT i.relname
FROM pg_index ix
JOIN pg_class i ON i.oid = ix.indexrelid
JOIN pg_class c ON c.oid = ix.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND ix.indisunique
  AND NOT c.relispartition -- a partition's keys are its parent's
  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'account_id' AND NOT a.attisdropped)
  AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'account_id'
                  AND a.attnum = ANY (ix.indkey))
ORDER BY 1`)
	require.NoError(t, err)
	var found []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		found = append(found, name)
	}
	require.NoError(t, rows.Err())
	var unlisted []string
	for _, name := range found {
		if _, ok := tenantKeysWithoutAccount[name]; !ok {
			unlisted = append(unlisted, name)
		}
	}
	require.Empty(t, unlisted, "unique keys of tenant tables without account_id: add account_id, or list them with their reason")
	var stale []string
	for name := range tenantKeysWithoutAccount {
		if !slices.Contains(found, name) {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	require.Empty(t, stale, "listed keys that no longer exist (or now hold account_id): remove them from the list")
}

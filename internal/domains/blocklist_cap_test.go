package domains

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/testfactory"
)

// TestHealthCapsIncludeBlocklists: IPs carrying 40% of the mail listed on a
// blocklist cap the score at 60; an informational listing (Spamhaus PBL)
// caps nothing.
func TestHealthCapsIncludeBlocklists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := dbtest.Tx(t)
	d := testfactory.AccountDomain(t, tx, "capped.test")
	_, err := tx.Exec(ctx, `INSERT INTO reputation_targets (account_id, domain_id, target, kind, origin, messages, share) VALUES
		($1, $2, '192.0.2.10', 'ip', 'report', 40, 0.4), ($1, $2, '192.0.2.11', 'ip', 'report', 50, 0.5)`, d.AccountID, d.ID)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO reputation_listings (account_id, domain_id, zone, target, codes, listed_at) VALUES
		($1, $2, 'zen.spamhaus.org', '192.0.2.10', '[{"code":"127.0.0.2","name":"SBL","informational":false}]', now()),
		($1, $2, 'zen.spamhaus.org', '192.0.2.11', '[{"code":"127.0.0.10","name":"PBL","informational":true}]', now())`, d.AccountID, d.ID)
	require.NoError(t, err)

	caps, err := healthCaps(ctx, tx, &d, time.Now())
	require.NoError(t, err)
	var found bool
	for _, c := range caps {
		if c.Name == "blocklist" {
			found = true
			require.Equal(t, 60, c.Max, "40%% listed, the PBL listing left out: %+v", c)
		}
	}
	require.True(t, found, "caps: %+v", caps)
}

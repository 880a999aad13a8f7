// Package testfactory makes the rows and fixtures tests share, so that no
// test re-implements "the way the API does it": an account, a domain of an
// account, the zone of a well-configured domain. Only tests import it.
package testfactory

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
)

// Account inserts an account with a unique address and an unusable
// password hash, and returns its id.
func Account(t testing.TB, db dbsqlc.DBTX) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := dbsqlc.New().AccountInsert(t.Context(), db, dbsqlc.AccountInsertParams{
		ID: id, Email: id.String() + "@example.com", PasswordHash: "x",
	})
	require.NoError(t, err)
	return id
}

// Domain inserts a monitored domain of account.
func Domain(t testing.TB, db dbsqlc.DBTX, account uuid.UUID, name string, tags ...string) dbsqlc.Domain {
	t.Helper()
	if tags == nil {
		tags = []string{}
	}
	row, err := dbsqlc.New().DomainInsert(t.Context(), db, dbsqlc.DomainInsertParams{
		ID: uuid.Must(uuid.NewV7()), AccountID: account, Name: name, Tags: tags,
	})
	require.NoError(t, err)
	return row
}

// AccountDomain inserts a new account and a domain of it.
func AccountDomain(t testing.TB, db dbsqlc.DBTX, name string, tags ...string) dbsqlc.Domain {
	t.Helper()
	return Domain(t, db, Account(t, db), name, tags...)
}

// GoodZone is the zone text of a well-configured domain: SPF, DMARC at
// reject with reports, an Ed25519 DKIM key at selector1, two MX hosts that
// resolve and TLS-RPT; no MTA-STS (its policy needs HTTPS), BIMI or
// DNSSEC, so it scores 80.
func GoodZone(domain string) string {
	d := domain + "."
	return fmt.Sprintf(`$TTL 300
%[1]s SOA ns.%[1]s hostmaster.%[1]s 1 7200 3600 1209600 300
%[1]s MX 10 mx1.%[1]s
%[1]s MX 20 mx2.%[1]s
mx1.%[1]s A 192.0.2.1
mx2.%[1]s A 192.0.2.2
%[1]s TXT "v=spf1 mx ip4:192.0.2.0/24 -all"
_dmarc.%[1]s TXT "v=DMARC1; p=reject; rua=mailto:dmarc@%[2]s"
selector1._domainkey.%[1]s TXT "v=DKIM1; k=ed25519; p=d+nLbJ2hNdGhwjiSC/ex5+5OqAWWpNlHodnZIHApHTs="
_smtp._tls.%[1]s TXT "v=TLSRPTv1; rua=mailto:tls@%[2]s"
`, d, domain)
}

package dnsfix_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dnsfix"
)

// TestConnectionStore reads and deletes connections by account: another
// account's connection is ErrNotFound for get and delete and is left alone;
// deleting takes the links with it.
func TestConnectionStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tx := newDomainTx(t)
	mine := newDomain(t, tx, "mine.example")
	theirs := newDomain(t, tx, "theirs.example")
	q := dbsqlc.New()
	insert := func(d dbsqlc.Domain, label string) dbsqlc.DnsConnection {
		c, err := q.DNSConnectionInsert(ctx, tx, dbsqlc.DNSConnectionInsertParams{ID: uuid.Must(uuid.NewV7()), AccountID: d.AccountID,
			Kind: "cloudflare", Label: label, Config: json.RawMessage(`{}`), SecretCiphertext: []byte{1}, SecretKeyID: "k", VerifiedAt: time.Now()})
		require.NoError(t, err)
		return c
	}
	own, other := insert(mine, "own"), insert(theirs, "other")
	_, err := q.DNSConnectionLinkUpsert(ctx, tx, dbsqlc.DNSConnectionLinkUpsertParams{DomainID: mine.ID, ConnectionID: own.ID, ZoneName: "mine.example", ZoneID: "z1"})
	require.NoError(t, err)

	list, err := dnsfix.ListConnections(ctx, tx, mine.AccountID)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, own.ID, list[0].ID)

	got, err := dnsfix.GetConnection(ctx, tx, mine.AccountID, own.ID)
	require.NoError(t, err)
	require.Equal(t, "own", got.Label)
	_, err = dnsfix.GetConnection(ctx, tx, mine.AccountID, other.ID)
	require.ErrorIs(t, err, dnsfix.ErrNotFound)

	links, err := dnsfix.ConnectionLinks(ctx, tx, own.ID)
	require.NoError(t, err)
	require.Len(t, links, 1)
	require.Equal(t, "mine.example", links[0].DomainName)

	require.ErrorIs(t, dnsfix.DeleteConnection(ctx, tx, mine.AccountID, other.ID), dnsfix.ErrNotFound)
	_, err = dnsfix.GetConnection(ctx, tx, theirs.AccountID, other.ID)
	require.NoError(t, err, "another account's delete leaves the connection")

	require.NoError(t, dnsfix.DeleteConnection(ctx, tx, mine.AccountID, own.ID))
	_, err = dnsfix.GetConnection(ctx, tx, mine.AccountID, own.ID)
	require.ErrorIs(t, err, dnsfix.ErrNotFound)
	links, err = dnsfix.ConnectionLinks(ctx, tx, own.ID)
	require.NoError(t, err)
	require.Empty(t, links)
	require.ErrorIs(t, dnsfix.DeleteConnection(ctx, tx, mine.AccountID, own.ID), dnsfix.ErrNotFound)
}

package dnsfix

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// ListConnections returns the account's DNS connections, at most
// MaxConnectionsListed.
func ListConnections(ctx context.Context, db dbutil.Executor, accountID uuid.UUID) ([]dbsqlc.DnsConnection, error) {
	rows, err := dbsqlc.New().DNSConnectionListByAccount(ctx, db, dbsqlc.DNSConnectionListByAccountParams{AccountID: accountID, Max: MaxConnectionsListed})
	if err != nil {
		return nil, fmt.Errorf("listing DNS connections: %w", err)
	}
	return rows, nil
}

// GetConnection returns one of the account's DNS connections; ErrNotFound
// when the account has none with that id.
func GetConnection(ctx context.Context, db dbutil.Executor, accountID, id uuid.UUID) (dbsqlc.DnsConnection, error) {
	row, err := dbsqlc.New().DNSConnectionGetByID(ctx, db, dbsqlc.DNSConnectionGetByIDParams{ID: id, AccountID: accountID})
	if dbutil.IsNotFound(err) {
		return row, ErrNotFound
	}
	if err != nil {
		return row, fmt.Errorf("reading DNS connection: %w", err)
	}
	return row, nil
}

// DeleteConnection deletes one of the account's DNS connections (its links
// go with it); ErrNotFound when the account has none with that id.
func DeleteConnection(ctx context.Context, db dbutil.Executor, accountID, id uuid.UUID) error {
	n, err := dbsqlc.New().DNSConnectionDelete(ctx, db, dbsqlc.DNSConnectionDeleteParams{ID: id, AccountID: accountID})
	if err != nil {
		return fmt.Errorf("deleting DNS connection: %w", err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// ConnectionLinks lists the domains a connection writes, with their zones.
func ConnectionLinks(ctx context.Context, db dbutil.Executor, connID uuid.UUID) ([]dbsqlc.DNSConnectionLinkListByConnectionRow, error) {
	links, err := dbsqlc.New().DNSConnectionLinkListByConnection(ctx, db, connID)
	if err != nil {
		return nil, fmt.Errorf("listing DNS connection links: %w", err)
	}
	return links, nil
}

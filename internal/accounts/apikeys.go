package accounts

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/apikey"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// MaxActiveAPIKeys caps an account's active keys. Each key has its own
// request budget, so without a cap one account could multiply its rate
// limit by creating keys.
const MaxActiveAPIKeys = 25

// CreateKey makes an API key labelled label for the account; plain is the
// full key, shown once. Errors: *TooManyKeysError, *KeyLabelTakenError.
func CreateKey(ctx context.Context, db dbutil.Executor, accountID uuid.UUID, label string) (row dbsqlc.APIKey, plain string, err error) {
	key := apikey.Generate()
	row, err = dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) (dbsqlc.APIKey, error) {
		// The account's row lock serialises concurrent creations, so
		// the cap holds.
		if err := q.APIKeyLockAccount(ctx, tx, accountID); err != nil {
			return dbsqlc.APIKey{}, fmt.Errorf("locking account: %w", err)
		}
		active, err := q.APIKeyCountActive(ctx, tx, accountID)
		if err != nil {
			return dbsqlc.APIKey{}, fmt.Errorf("counting API keys: %w", err)
		}
		if active >= MaxActiveAPIKeys {
			return dbsqlc.APIKey{}, &TooManyKeysError{Max: MaxActiveAPIKeys}
		}
		row, err := q.APIKeyInsert(ctx, tx, dbsqlc.APIKeyInsertParams{
			ID: uuid.Must(uuid.NewV7()), AccountID: accountID, Label: label, KeyIdentifier: key.Identifier, KeyHash: key.Hash,
		})
		if err != nil {
			return row, fmt.Errorf("inserting API key: %w", err)
		}
		return row, nil
	})
	if dbutil.IsUniqueViolation(err, "api_keys_account_label_active_key") {
		return row, "", &KeyLabelTakenError{Label: label}
	}
	if err != nil {
		return row, "", err
	}
	return row, key.Plain, nil
}

// ListKeys lists the account's active keys.
func ListKeys(ctx context.Context, db dbutil.Executor, accountID uuid.UUID) ([]dbsqlc.APIKey, error) {
	rows, err := q.APIKeyListByAccount(ctx, db, accountID)
	if err != nil {
		return nil, fmt.Errorf("listing API keys: %w", err)
	}
	return rows, nil
}

// RevokeKey revokes one active key of the account and returns its hash (to
// evict from caches). Errors: ErrKeyNotFound, ErrLastKey (nothing revoked).
func RevokeKey(ctx context.Context, db dbutil.Executor, accountID, keyID uuid.UUID) ([]byte, error) {
	return dbutil.WithTxV(ctx, db, func(ctx context.Context, tx dbutil.Tx) ([]byte, error) {
		hash, err := q.APIKeyRevoke(ctx, tx, dbsqlc.APIKeyRevokeParams{ID: keyID, AccountID: accountID})
		if dbutil.IsNotFound(err) {
			return nil, ErrKeyNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("revoking API key: %w", err)
		}
		left, err := q.APIKeyCountActive(ctx, tx, accountID)
		if err != nil {
			return nil, fmt.Errorf("counting API keys: %w", err)
		}
		if left == 0 {
			return nil, ErrLastKey
		}
		return hash, nil
	})
}

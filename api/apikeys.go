package api

import (
	"context"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/accounts"
	"github.com/mailwatch/mailwatch/internal/dbsqlc"
)

// MaxActiveAPIKeys caps an account's active keys (accounts.MaxActiveAPIKeys).
const MaxActiveAPIKeys = accounts.MaxActiveAPIKeys

// APIKey describes a key without revealing it.
type APIKey struct {
	ID            uuid.UUID  `json:"id" validate:"required"`
	Label         string     `json:"label" validate:"required"`
	KeyIdentifier string     `json:"key_identifier" validate:"required" description:"The key's first 7 characters."`
	CreatedAt     time.Time  `json:"created_at" validate:"required"`
	LastUsedAt    *time.Time `json:"last_used_at" validate:"required" description:"Recorded in batches; may lag by up to 10 s."`
}

// NewAPIKey is a key as returned once, at creation.
type NewAPIKey struct {
	APIKey
	Key string `json:"key" validate:"required" description:"The full key (mw_ + 40 characters). Shown only in this response."`
}

func apiKeyFromRow(k dbsqlc.APIKey) APIKey {
	out := APIKey{ID: k.ID, Label: k.Label, KeyIdentifier: k.KeyIdentifier, CreatedAt: k.CreatedAt.UTC()}
	if k.LastUsedAt != nil {
		t := k.LastUsedAt.UTC()
		out.LastUsedAt = &t
	}
	return out
}

// CreateAPIKeyRequest is the body of POST /api/accounts/me/api-keys.
type CreateAPIKeyRequest struct {
	Label string `json:"label" validate:"required,min=1,max=100" description:"Unique among the account's active keys."`
}

// APIKeyPath names one key.
type APIKeyPath struct {
	ID uuid.UUID `path:"id" format:"uuid"`
}

func (s *Server) apiKeyRoutes() {
	s.ops.CreateAPIKey = Handle(s.router, Endpoint[CreateAPIKeyRequest, NewAPIKey]{
		Method: "POST", Path: "/api/accounts/me/api-keys", Status: 201, OperationID: "createAPIKey", Tag: "api keys",
		Summary: "Create an API key",
		Description: "The full key is in this response only; a duplicate label is 409, and so is a key beyond the cap of " +
			strconv.Itoa(MaxActiveAPIKeys) + " active keys per account (revoke one first).",
		Errors: []int{409},
		Call:   s.createAPIKey,
	})
	s.ops.ListAPIKeys = Handle(s.router, Endpoint[emptyRequest, []APIKey]{
		Method: "GET", Path: "/api/accounts/me/api-keys", OperationID: "listAPIKeys", Tag: "api keys",
		Summary: "List the account's active API keys", Description: "Never includes a key or its hash.",
		Call: s.listAPIKeys,
	})
	s.ops.RevokeAPIKey = Handle(s.router, Endpoint[APIKeyPath, NoContent]{
		Method: "DELETE", Path: "/api/accounts/me/api-keys/{id}", Status: 204, OperationID: "revokeAPIKey", Tag: "api keys",
		Summary: "Revoke an API key",
		Description: "The key answers 401 at once on this replica and within 5 s on every other. " +
			"The account's last active key cannot be revoked (409): create its successor first.",
		Errors: []int{404, 409},
		Call:   s.revokeAPIKey,
	})
}

// createAPIKey serves POST /api/accounts/me/api-keys: create an API key.
func (s *Server) createAPIKey(ctx context.Context, req *CreateAPIKeyRequest) (*NewAPIKey, error) {
	row, plain, err := accounts.CreateKey(ctx, s.db, mustCaller(ctx).AccountID, req.Label)
	if err != nil {
		return nil, accountError(err)
	}
	return &NewAPIKey{APIKey: apiKeyFromRow(row), Key: plain}, nil
}

// listAPIKeys serves GET /api/accounts/me/api-keys: list the account's active API keys.
func (s *Server) listAPIKeys(ctx context.Context, _ *emptyRequest) (*[]APIKey, error) {
	rows, err := accounts.ListKeys(ctx, s.db, mustCaller(ctx).AccountID)
	if err != nil {
		return nil, err
	}
	out := make([]APIKey, len(rows))
	for i, r := range rows {
		out[i] = apiKeyFromRow(r)
	}
	return &out, nil
}

// revokeAPIKey serves DELETE /api/accounts/me/api-keys/{id}: revoke an API key.
func (s *Server) revokeAPIKey(ctx context.Context, req *APIKeyPath) (*NoContent, error) {
	hash, err := accounts.RevokeKey(ctx, s.db, mustCaller(ctx).AccountID, req.ID)
	if err != nil {
		return nil, accountError(err)
	}
	s.router.guard.evict(hash)
	return &NoContent{}, nil
}

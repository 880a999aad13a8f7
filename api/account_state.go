package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/mailwatch/mailwatch/internal/accounts"
)

// checkTokenAccount refuses a verified data-API token whose account is
// gone or being deleted (401), suspended (403), or whose password changed
// after the token was issued (401). The account's state is cached per
// replica for accounts.CacheTTL (4 s): that bounds how long another
// replica may still accept such a token; the replica that made the change
// evicts at once.
func (s *Server) checkTokenAccount(ctx context.Context, v *verifiedToken) error {
	id, err := uuid.Parse(v.accountID)
	if err != nil {
		return unauthorized("invalid JWT")
	}
	st, err := s.accountStates.Get(ctx, s.db, id)
	if errors.Is(err, accounts.ErrNotFound) {
		return unauthorized("the token's account no longer exists")
	}
	if err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Detail: "authentication is temporarily unavailable", Cause: err}
	}
	if st.Deleting() {
		return unauthorized("the token's account is being deleted")
	}
	if st.Suspended() {
		return &Error{Status: http.StatusForbidden, Detail: st.SuspendedDetail()}
	}
	if !v.issuedAt.IsZero() && st.IssuedBeforeCredentialsChange(v.issuedAt) {
		return unauthorized("the token was issued before the account's password changed; get a new one")
	}
	return nil
}

// forgetAccount drops what this replica caches about an account (its
// state and its keys) after a change to it, so the change applies here at
// once; other replicas follow within their cache TTLs (4 s).
func (s *Server) forgetAccount(id uuid.UUID, keyHashes [][]byte) {
	s.accountStates.Evict(id)
	for _, h := range keyHashes {
		s.router.guard.evict(h)
	}
}

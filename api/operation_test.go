package api_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
)

// TestOperationCall: an operation called directly (as the dashboard does)
// refuses what its route refuses before its function runs, and one this
// server never registered answers 503 instead of panicking.
func TestOperationCall(t *testing.T) {
	srv := api.New(api.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	caller := api.Caller{AccountID: uuid.New(), KeyIdentifier: "test"}

	t.Run("ValidatesLikeItsRoute", func(t *testing.T) {
		// No database: reaching the function would fail otherwise.
		_, err := srv.Ops().CreateDomain.Call(context.Background(), caller, &api.CreateDomainRequest{Domain: ""})
		var e *api.Error
		require.True(t, errors.As(err, &e), "%v", err)
		require.Equal(t, http.StatusUnprocessableEntity, e.Status)
		require.Equal(t, "domain", e.Fields[0].Field)

		_, err = srv.Ops().CreateDomain.Call(context.Background(), caller, &api.CreateDomainRequest{Domain: "a\x00.example"})
		require.True(t, errors.As(err, &e), "%v", err)
		require.Less(t, e.Status, 500, "the text check refuses a NUL as the route does")
	})

	t.Run("UnregisteredIs503", func(t *testing.T) {
		var op api.Operation[api.CreateDomainRequest, api.Domain]
		_, err := op.Call(context.Background(), caller, &api.CreateDomainRequest{Domain: "example.com"})
		var e *api.Error
		require.True(t, errors.As(err, &e), "%v", err)
		require.Equal(t, http.StatusServiceUnavailable, e.Status)
	})
}

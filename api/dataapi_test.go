package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/dataapi"
	"github.com/mailwatch/mailwatch/internal/dbtest"
	"github.com/mailwatch/mailwatch/internal/dbutil"
)

// TestDataAPIHead: postgrest-js's head: true sends HEAD (usually with
// count=exact) and reads only Content-Range.
func TestDataAPIHead(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) {
		o.deps = func(d *api.Deps) { d.DataAPI.Pages = dataapi.NewPages(time.Second, 1<<20) }
	})
	acct := b.createAccount(t)
	tok := b.token(t, acct.Key)
	for i := range 3 {
		_, err := b.db.Exec(context.Background(), `INSERT INTO events (id, account_id, event_type, severity, payload, rendered, created_at)
			VALUES ($1, $2, 'bounce_spike', 'info', '{}', '{}', now() - make_interval(mins => $3))`, uuid.Must(uuid.NewV7()), acct.ID, i)
		require.NoError(t, err)
	}
	head := func(token string) *http.Response {
		req := httptest.NewRequest("HEAD", "/rest/v1/events?select=id&limit=1", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Prefer", "count=exact")
		resp, err := b.srv.App().Test(req, -1)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Empty(t, body)
		return resp
	}
	for range 2 { // the second through the events cache
		resp := head(tok)
		require.Equal(t, http.StatusPartialContent, resp.StatusCode)
		require.Equal(t, "0-0/3", resp.Header.Get("Content-Range"))
	}
	require.Equal(t, http.StatusUnauthorized, head("a.b.c").StatusCode)

	// A new event shows at once in the cached read.
	_, err := b.db.Exec(context.Background(), `INSERT INTO events (id, account_id, event_type, severity, payload, rendered)
		VALUES ($1, $2, 'bounce_spike', 'info', '{}', '{}')`, uuid.Must(uuid.NewV7()), acct.ID)
	require.NoError(t, err)
	require.Equal(t, "0-0/4", head(tok).Header.Get("Content-Range"))

	// Another account's GET of the same URL sees its own rows only.
	other := b.createAccount(t)
	resp := b.do(t, "GET", "/rest/v1/events?select=id&limit=1", b.token(t, other.Key), nil)
	require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
	require.Equal(t, "[]", strings.TrimSpace(string(resp.Body)))
}

// TestDataAPIValueOverLimitIs400: a filter value Postgres refuses for a
// program limit (an array literal nested past 6 dimensions) is the
// caller's bad value, a 400 in PostgREST's shape, never a 500.
func TestDataAPIValueOverLimitIs400(t *testing.T) {
	t.Parallel()
	b := setup(t)
	acct := b.createAccount(t)
	resp := b.do(t, "GET", "/rest/v1/events?tags=eq."+url.QueryEscape("{{{{{{{{{{}}}}}}}}}}"), b.token(t, acct.Key), nil)
	require.Equal(t, http.StatusBadRequest, resp.Status, "%s", resp.Body)
	require.Contains(t, string(resp.Body), `"code":"54000"`)
}

// failingProviders fails the lookup of a token issuer's providers, as a
// database outage would.
type failingProviders struct{ dbutil.Executor }

func (f failingProviders) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if strings.Contains(sql, "name: AuthProviderGetByAccountIssuer") {
		return errRow{errors.New("connection refused")}
	}
	return f.Executor.QueryRow(ctx, sql, args...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// TestDataAPIProviderLookupFailureIs503: when the providers cannot be read
// the token was not judged; the answer is 503 (try again), not 401.
func TestDataAPIProviderLookupFailureIs503(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOpts) { o.db = failingProviders{dbtest.Tx(t)} })
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": "https://idp.example.com", "sub": "user_1", "exp": time.Now().Add(time.Minute).Unix(),
	}).SignedString([]byte("x"))
	require.NoError(t, err)
	resp := b.dataAPI(t, "/rest/v1/events", tok, uuid.NewString())
	require.Equal(t, http.StatusServiceUnavailable, resp.Status, "%s", resp.Body)
	var e api.PostgRESTErrorBody
	resp.JSON(t, &e)
	require.Equal(t, "PGRST000", e.Code)
}

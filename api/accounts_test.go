package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
	"github.com/mailwatch/mailwatch/internal/password"
)

func TestCreateAccount(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsAccountAndKeyOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		resp := b.do(t, "POST", "/api/accounts", "", map[string]string{"email": "  Alice@Example.COM ", "password": "correct horse battery"})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var out struct {
			Account struct {
				Email   string `json:"email"`
				IsAdmin bool   `json:"is_admin"`
			} `json:"account"`
			APIKey struct {
				Key           string `json:"key"`
				KeyIdentifier string `json:"key_identifier"`
				Label         string `json:"label"`
			} `json:"api_key"`
		}
		resp.JSON(t, &out)
		require.Equal(t, "alice@example.com", out.Account.Email)
		require.False(t, out.Account.IsAdmin)
		require.True(t, strings.HasPrefix(out.APIKey.Key, "mw_"))
		require.Len(t, out.APIKey.Key, 43)
		require.Equal(t, out.APIKey.Key[:7], out.APIKey.KeyIdentifier)
		require.Equal(t, "default", out.APIKey.Label)

		// Nothing but the hash is stored.
		var stored int
		require.NoError(t, b.db.QueryRow(context.Background(),
			"SELECT count(*) FROM api_keys WHERE key_hash = sha256($1::bytea)", []byte(out.APIKey.Key)).Scan(&stored))
		require.Equal(t, 1, stored)
		var leaked int
		require.NoError(t, b.db.QueryRow(context.Background(),
			"SELECT count(*) FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE position($1 in k::text) > 0 OR position($2 in a.password_hash) > 0",
			out.APIKey.Key[3:], "correct horse").Scan(&leaked))
		require.Zero(t, leaked)

		// The key works.
		me := b.do(t, "GET", "/api/accounts/me", out.APIKey.Key, nil)
		require.Equal(t, http.StatusOK, me.Status)
		require.Contains(t, string(me.Body), "alice@example.com")
	})

	t.Run("DuplicateEmailIs409", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.createAccount(t)
		resp := b.do(t, "POST", "/api/accounts", "", map[string]string{"email": strings.ToUpper(a.Email), "password": "another password"})
		require.Equal(t, http.StatusConflict, resp.Status)
		require.Contains(t, resp.Detail(t), "already exists")
	})

	t.Run("Validation", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, tc := range []struct {
			name   string
			body   any
			status int
			field  string
		}{
			{"InvalidEmail", map[string]string{"email": "not-an-email", "password": "long enough pw"}, 422, "email"},
			{"EmailWithName", map[string]string{"email": "Bob <bob@example.com>", "password": "long enough pw"}, 422, "email"},
			{"EmailWithoutDot", map[string]string{"email": "bob@localhost", "password": "long enough pw"}, 422, "email"},
			{"ShortPassword", map[string]string{"email": "short@example.com", "password": "1234567"}, 422, "password"},
			{"LongPassword", map[string]string{"email": "long@example.com", "password": strings.Repeat("x", 257)}, 422, "password"},
			{"MissingFields", map[string]string{}, 422, "email"},
			{"EmptyBody", nil, 422, "email"},
			{"UnknownField", map[string]string{"email": "u@example.com", "password": "long enough pw", "role": "admin"}, 422, "role"},
			{"MalformedJSON", `{"email": "x@example.com",`, 400, ""},
			{"WrongType", `{"email": 5, "password": "long enough pw"}`, 400, ""},
			{"NotAnObject", `[1,2]`, 400, ""},
			{"TrailingData", `{"email": "t@example.com", "password": "long enough pw"} {}`, 400, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := b.do(t, "POST", "/api/accounts", "", tc.body)
				require.Equal(t, tc.status, resp.Status, "%s", resp.Body)
				resp.Detail(t)
				if tc.field != "" {
					var e struct {
						Errors []struct{ Field, Message string } `json:"errors"`
					}
					resp.JSON(t, &e)
					require.NotEmpty(t, e.Errors)
					require.Equal(t, tc.field, e.Errors[0].Field)
				}
			})
		}
	})
}

func TestAccountMe(t *testing.T) {
	t.Parallel()

	t.Run("PatchEmailAndPassword", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.createAccount(t)
		other := b.createAccount(t)

		resp := b.do(t, "PATCH", "/api/accounts/me", a.Key, map[string]string{"email": "New-" + a.Email})
		require.Equal(t, http.StatusOK, resp.Status, "%s", resp.Body)
		require.Contains(t, string(resp.Body), strings.ToLower("new-"+a.Email))

		resp = b.do(t, "PATCH", "/api/accounts/me", a.Key, map[string]string{"email": other.Email})
		require.Equal(t, http.StatusConflict, resp.Status)

		resp = b.do(t, "PATCH", "/api/accounts/me", a.Key, map[string]string{"password": "short"})
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)

		var before string
		require.NoError(t, b.db.QueryRow(context.Background(), "SELECT password_hash FROM accounts WHERE id = $1", a.ID).Scan(&before))
		resp = b.do(t, "PATCH", "/api/accounts/me", a.Key, map[string]string{"password": "a brand new password"})
		require.Equal(t, http.StatusOK, resp.Status)
		var after string
		require.NoError(t, b.db.QueryRow(context.Background(), "SELECT password_hash FROM accounts WHERE id = $1", a.ID).Scan(&after))
		require.NotEqual(t, before, after)

		resp = b.do(t, "PATCH", "/api/accounts/me", a.Key, map[string]string{})
		require.Equal(t, http.StatusUnprocessableEntity, resp.Status)
	})

	t.Run("DeleteRemovesEverythingAndKeysStopWorking", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.createAccount(t)
		second := b.do(t, "POST", "/api/accounts/me/api-keys", a.Key, map[string]string{"label": "ci"})
		require.Equal(t, http.StatusCreated, second.Status)
		var k struct {
			Key string `json:"key"`
		}
		second.JSON(t, &k)

		require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me", k.Key, nil).Status)
		resp := b.do(t, "DELETE", "/api/accounts/me", a.Key, nil)
		require.Equal(t, http.StatusAccepted, resp.Status, "%s", resp.Body)
		var del struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			JobID  int64  `json:"job_id"`
		}
		resp.JSON(t, &del)
		require.Equal(t, a.ID, del.ID)
		require.Equal(t, "deleting", del.Status)

		// Every key stops at once, before the job has run.
		for _, key := range []string{a.Key, k.Key} {
			resp := b.do(t, "GET", "/api/accounts/me/dashboard-summary", key, nil)
			require.Equal(t, http.StatusUnauthorized, resp.Status)
		}
		// The purge is a River job, queued in the same transaction.
		var kind, args string
		require.NoError(t, b.db.QueryRow(context.Background(), "SELECT kind, args::text FROM river_job WHERE id = $1", del.JobID).Scan(&kind, &args))
		require.Equal(t, "account_delete", kind)
		require.Contains(t, args, a.ID)

		// The email stays taken until the job has finished.
		resp = b.do(t, "POST", "/api/accounts", "", map[string]string{"email": a.Email, "password": "correct horse battery"})
		require.Equal(t, http.StatusConflict, resp.Status)
		require.Contains(t, resp.Detail(t), "being deleted")
	})
}

// TestPasswordHashingIsBounded: with every argon2id slot taken, account
// creation and a password change answer 503 with Retry-After and a detail
// instead of piling up hashes; a change without a password still works.
func TestPasswordHashingIsBounded(t *testing.T) {
	t.Parallel()
	limiter := password.NewLimiter(1, time.Millisecond)
	b := setup(t, func(o *setupOpts) { o.deps = func(d *api.Deps) { d.Passwords = limiter } })
	a := b.createAccount(t)

	email := uniqueEmail(t)
	release, err := limiter.Acquire(context.Background())
	require.NoError(t, err)
	resp := b.do(t, "POST", "/api/accounts", "", map[string]string{"email": email, "password": "a long password"})
	require.Equal(t, http.StatusServiceUnavailable, resp.Status, "%s", resp.Body)
	require.Equal(t, "2", resp.Header.Get("Retry-After"))
	require.Contains(t, resp.Detail(t), "retry")
	resp = b.do(t, "PATCH", "/api/accounts/me", a.Key, map[string]string{"password": "another long password"})
	require.Equal(t, http.StatusServiceUnavailable, resp.Status)
	require.Equal(t, "2", resp.Header.Get("Retry-After"))
	require.Equal(t, http.StatusOK, b.do(t, "PATCH", "/api/accounts/me", a.Key, map[string]string{"email": uniqueEmail(t)}).Status)
	release()

	require.Equal(t, http.StatusCreated, b.do(t, "POST", "/api/accounts", "", map[string]string{"email": email, "password": "a long password"}).Status)
	require.Equal(t, http.StatusOK, b.do(t, "PATCH", "/api/accounts/me", a.Key, map[string]string{"password": "another long password"}).Status)
	require.Equal(t, int64(1), limiter.Peak())
}

package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/apikey"
)

func TestAuth(t *testing.T) {
	t.Parallel()

	b := setup(t)
	a := b.createAccount(t)

	t.Run("Unauthorized", func(t *testing.T) {
		for _, tc := range []struct {
			name, header string
		}{
			{"Missing", ""},
			{"WrongScheme", "Basic " + a.Key},
			{"EmptyToken", "Bearer "},
			{"Malformed", "Bearer not-a-key"},
			{"UnknownKey", "Bearer " + apikey.Generate().Plain},
			{"TamperedKey", "Bearer " + a.Key[:42] + string("AB"[(strings.IndexByte("AB", a.Key[42])+1)&1])},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req := httptest.NewRequest("GET", "/api/accounts/me/dashboard-summary", nil)
				if tc.header != "" {
					req.Header.Set("Authorization", tc.header)
				}
				resp, err := b.srv.App().Test(req, -1)
				require.NoError(t, err)
				require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
				require.Equal(t, `Bearer realm="mailwatch"`, resp.Header.Get("WWW-Authenticate"))
				require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
				require.NotEmpty(t, resp.Header.Get("X-RateLimit-Limit"), "401s are rate limited by IP")
			})
		}
		resp := b.do(t, "GET", "/api/accounts/me", "mw_wrong", nil)
		require.Equal(t, http.StatusUnauthorized, resp.Status)
		resp.Detail(t)
	})

	t.Run("PublicRoutesNeedNoKey", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz", "/openapi.json", "/metrics"} {
			resp := b.do(t, "GET", path, "", nil)
			require.Equal(t, http.StatusOK, resp.Status, path)
		}
	})
}

func TestAPIKeys(t *testing.T) {
	t.Parallel()

	t.Run("CreateListRevoke", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.createAccount(t)

		resp := b.do(t, "POST", "/api/accounts/me/api-keys", a.Key, map[string]string{"label": "deploy"})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var created struct {
			ID, Key, Label, KeyIdentifier string
		}
		resp.JSON(t, &created)
		var k struct {
			ID            string `json:"id"`
			Key           string `json:"key"`
			KeyIdentifier string `json:"key_identifier"`
		}
		resp.JSON(t, &k)
		require.True(t, apikey.WellFormed(k.Key))

		dup := b.do(t, "POST", "/api/accounts/me/api-keys", a.Key, map[string]string{"label": "deploy"})
		require.Equal(t, http.StatusConflict, dup.Status)
		require.Contains(t, dup.Detail(t), "deploy")

		require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "POST", "/api/accounts/me/api-keys", a.Key, map[string]string{"label": ""}).Status)
		require.Equal(t, http.StatusUnprocessableEntity, b.do(t, "POST", "/api/accounts/me/api-keys", a.Key, map[string]string{"label": strings.Repeat("l", 101)}).Status)

		list := b.do(t, "GET", "/api/accounts/me/api-keys", k.Key, nil)
		require.Equal(t, http.StatusOK, list.Status)
		require.NotContains(t, string(list.Body), k.Key, "listing never shows a key")
		require.NotContains(t, string(list.Body), a.Key)
		require.NotContains(t, string(list.Body), "hash")
		var keys []map[string]any
		list.JSON(t, &keys)
		require.Len(t, keys, 2)
		require.Equal(t, "default", keys[0]["label"])
		require.Equal(t, "deploy", keys[1]["label"])
		require.Equal(t, k.KeyIdentifier, keys[1]["key_identifier"])

		// Revoking takes effect at once on this replica.
		require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", "/api/accounts/me/api-keys/"+k.ID, a.Key, nil).Status)
		require.Equal(t, http.StatusUnauthorized, b.do(t, "GET", "/api/accounts/me", k.Key, nil).Status)
		require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", "/api/accounts/me/api-keys/"+k.ID, a.Key, nil).Status)

		// The label is free again once revoked.
		require.Equal(t, http.StatusCreated, b.do(t, "POST", "/api/accounts/me/api-keys", a.Key, map[string]string{"label": "deploy"}).Status)
	})

	t.Run("LastKeyCannotBeRevoked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.createAccount(t)
		var keys []struct {
			ID string `json:"id"`
		}
		b.do(t, "GET", "/api/accounts/me/api-keys", a.Key, nil).JSON(t, &keys)
		resp := b.do(t, "DELETE", "/api/accounts/me/api-keys/"+keys[0].ID, a.Key, nil)
		require.Equal(t, http.StatusConflict, resp.Status)
		require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me", a.Key, nil).Status)
	})

	t.Run("OtherAccountsKeysAre404", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		a := b.createAccount(t)
		other := b.createAccount(t)
		var keys []struct {
			ID string `json:"id"`
		}
		b.do(t, "GET", "/api/accounts/me/api-keys", other.Key, nil).JSON(t, &keys)
		require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", "/api/accounts/me/api-keys/"+keys[0].ID, a.Key, nil).Status)
		require.Equal(t, http.StatusNotFound, b.do(t, "DELETE", "/api/accounts/me/api-keys/not-a-uuid", a.Key, nil).Status)
		require.Equal(t, http.StatusOK, b.do(t, "GET", "/api/accounts/me", other.Key, nil).Status)
	})

	t.Run("RevocationReachesOtherReplicasWithinFiveSeconds", func(t *testing.T) {
		t.Parallel()
		tx := setup(t).db
		var (
			mu  sync.Mutex
			now = time.Now()
		)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		replicaA := setup(t, func(o *setupOpts) { o.db = tx })
		replicaB := setup(t, func(o *setupOpts) { o.db = tx; o.now = clock })

		a := replicaA.createAccount(t)
		resp := replicaA.do(t, "POST", "/api/accounts/me/api-keys", a.Key, map[string]string{"label": "second"})
		var k struct{ ID, Key string }
		resp.JSON(t, &k)

		require.Equal(t, http.StatusOK, replicaB.do(t, "GET", "/api/accounts/me", k.Key, nil).Status) // B caches the key
		require.Equal(t, http.StatusNoContent, replicaA.do(t, "DELETE", "/api/accounts/me/api-keys/"+k.ID, a.Key, nil).Status)
		require.Equal(t, http.StatusUnauthorized, replicaA.do(t, "GET", "/api/accounts/me", k.Key, nil).Status)

		mu.Lock()
		now = now.Add(5 * time.Second)
		mu.Unlock()
		require.Equal(t, http.StatusUnauthorized, replicaB.do(t, "GET", "/api/accounts/me", k.Key, nil).Status)
	})
}

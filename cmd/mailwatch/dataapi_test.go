package main

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/internal/dbtest"
)

// TestDataAPIProcess: `mailwatch data-api` serves /rest/v1 and the JWKS,
// and nothing of the REST API.
func TestDataAPIProcess(t *testing.T) {
	t.Parallel()
	_, url := dbtest.NewDB(t)
	addr := freeAddr(t)
	startProcess(t, append(baseEnv(url), "LISTEN_ADDR="+addr), "data-api")
	base := "http://" + addr
	waitHTTP(t, base+"/readyz")

	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	status, body := get("/rest/v1/events")
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, body, `"code":"PGRST301"`)
	status, body = get("/.well-known/jwks.json")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `"alg":"ES256"`)
	status, _ = get("/api/accounts/me/dashboard-summary")
	require.Equal(t, http.StatusNotFound, status)
}

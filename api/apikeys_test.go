package api_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailwatch/mailwatch/api"
)

// TestAPIKeyCap: an account holds at most api.MaxActiveAPIKeys active keys,
// so it cannot multiply its request budget; revoking one frees a place.
func TestAPIKeyCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.createAccount(t) // holds its first key already
	var last string
	for i := 1; i < api.MaxActiveAPIKeys; i++ {
		resp := b.do(t, "POST", "/api/accounts/me/api-keys", a.Key, map[string]string{"label": fmt.Sprintf("k%d", i)})
		require.Equal(t, http.StatusCreated, resp.Status, "%s", resp.Body)
		var k struct {
			ID string `json:"id"`
		}
		resp.JSON(t, &k)
		last = k.ID
	}
	over := b.do(t, "POST", "/api/accounts/me/api-keys", a.Key, map[string]string{"label": "one too many"})
	require.Equal(t, http.StatusConflict, over.Status)
	require.Contains(t, over.Detail(t), strconv.Itoa(api.MaxActiveAPIKeys))

	require.Equal(t, http.StatusNoContent, b.do(t, "DELETE", "/api/accounts/me/api-keys/"+last, a.Key, nil).Status)
	require.Equal(t, http.StatusCreated, b.do(t, "POST", "/api/accounts/me/api-keys", a.Key, map[string]string{"label": "successor"}).Status)
	require.Equal(t, http.StatusConflict, b.do(t, "POST", "/api/accounts/me/api-keys", a.Key, map[string]string{"label": "again"}).Status)
}
